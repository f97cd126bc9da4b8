"""Data at a glance: per-graph statistics, opcode counts, pruning effect, and their plots.

Used by ``notebooks/eda.py``. Everything streams: shapes come from the npy headers inside each
npz (:func:`features.io.npz_headers`) and only small members (runtimes, opcodes, edges) are read,
so a real 6 GB download is summarised without ever loading a ``node_config_feat``.

Plots are :class:`matplotlib.figure.Figure` objects made without pyplot (no global state, any
backend); a notebook displays the returned figure.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from tpurank.collections import COLLECTIONS, SPLITS, parse_collections
from features.columns import opcode_ids
from features.io import GraphFile, discover, npz_headers, ranked_target, read_npz_member
from features.pruning import prune_graph

def _sample_files(files: list[GraphFile], max_per_group: int | None) -> list[GraphFile]:
    """At most ``max_per_group`` files per (collection, split) (``discover`` lists them grouped),
    evenly spread over stems."""
    if max_per_group is None:
        return files
    out: list[GraphFile] = []
    for _, grouped in itertools.groupby(files, key=lambda f: (f.collection.name, f.split)):
        group = list(grouped)
        out.extend(group[::max(1, len(group) // max_per_group)][:max_per_group])
    return out


def graph_row(f: GraphFile) -> dict[str, object]:
    """Sizes and runtime range of one graph file (ranked target: runtime/normalizer for tile)."""
    headers = npz_headers(f.path)
    runtime = ranked_target(read_npz_member(f.path, "config_runtime"),
                            read_npz_member(f.path, "config_runtime_normalizers")
                            if "config_runtime_normalizers" in headers else None)
    has_runtimes = runtime.size > 0 and bool(np.any(runtime > 0))
    nc = headers["node_config_ids"].size if "node_config_ids" in headers else 0
    return {
        "collection": f.collection.name, "split": f.split, "stem": f.stem,
        "nodes": headers["node_opcode"].size, "edges": headers["edge_index"].shape[0],
        "configs": headers["config_runtime"].size, "configurable_nodes": nc,
        "runtime_min": float(runtime.min()) if has_runtimes else None,
        "runtime_median": float(np.median(runtime)) if has_runtimes else None,
        "runtime_max": float(runtime.max()) if has_runtimes else None,
    }


def graph_stats(root: str | os.PathLike, collections: str | None = "all",
                splits: Iterable[str] = SPLITS, max_per_group: int | None = None) -> pl.DataFrame:
    """One row per graph file: sizes, number of configs and runtime range (null for test).

    ``spread`` = runtime_max / runtime_min: how much choosing the config matters for that graph.
    """
    files = _sample_files(discover(root, parse_collections(collections), splits), max_per_group)
    if not files:
        raise FileNotFoundError(f"{root}: no npz graph files found (expected the Kaggle layout "
                                f"ROOT/npz_all/npz/<kind>/<source>/[<search>/]<split>/*.npz)")
    schema = {"collection": pl.Utf8, "split": pl.Utf8, "stem": pl.Utf8, "nodes": pl.Int64,
              "edges": pl.Int64, "configs": pl.Int64, "configurable_nodes": pl.Int64,
              "runtime_min": pl.Float64, "runtime_median": pl.Float64, "runtime_max": pl.Float64}
    df = pl.DataFrame([graph_row(f) for f in files], schema=schema)
    return df.with_columns((pl.col("runtime_max") / pl.col("runtime_min")).alias("spread"))


def collection_summary(stats: pl.DataFrame) -> pl.DataFrame:
    """Per collection and split: graph count, median/max sizes, configs, median spread."""
    return (stats.group_by("collection", "split", maintain_order=True)
            .agg(pl.len().alias("graphs"),
                 pl.col("nodes").median().alias("nodes_median"),
                 pl.col("nodes").max().alias("nodes_max"),
                 pl.col("configs").median().alias("configs_median"),
                 pl.col("configs").sum().alias("configs_total"),
                 pl.col("configurable_nodes").median().alias("configurable_median"),
                 pl.col("spread").median().alias("spread_median"))
            .sort("collection", "split"))


def opcode_counts(root: str | os.PathLike, collections: str | None = "all",
                  splits: Iterable[str] = ("train",), max_per_group: int | None = None) -> pl.DataFrame:
    """How often each opcode occurs (all nodes, and configurable nodes only for layout)."""
    names = {v: k for k, v in opcode_ids().items()}
    total: Counter[int] = Counter()
    configurable: Counter[int] = Counter()
    for f in _sample_files(discover(root, parse_collections(collections), splits), max_per_group):
        ops = read_npz_member(f.path, "node_opcode").reshape(-1).astype(np.int64)
        total.update(ops.tolist())
        if not f.collection.is_tile:
            ids = read_npz_member(f.path, "node_config_ids").reshape(-1).astype(np.int64)
            configurable.update(ops[ids].tolist())
    rows = [{"opcode": int(op), "name": names.get(int(op), f"#{int(op)}"), "count": int(n),
             "configurable": int(configurable.get(op, 0))} for op, n in total.items()]
    schema = {"opcode": pl.Int64, "name": pl.Utf8, "count": pl.Int64, "configurable": pl.Int64}
    return pl.DataFrame(rows, schema=schema).sort("count", descending=True)


def pruning_effect(root: str | os.PathLike, hops: Sequence[int] = (1, 2, 3),
                   collections: str | None = "all",
                   splits: Iterable[str] = ("train",), max_per_group: int | None = 20) -> pl.DataFrame:
    """Nodes kept by :func:`features.transforms.prune_graph` for each ``hops`` (layout graphs)."""
    layout = [c for c in parse_collections(collections) if not c.is_tile]
    rows = []
    for f in _sample_files(discover(root, layout, splits), max_per_group):
        n = npz_headers(f.path)["node_opcode"].size
        edges = read_npz_member(f.path, "edge_index").reshape(-1, 2)
        seeds = read_npz_member(f.path, "node_config_ids").reshape(-1).astype(np.int64)
        for h in hops:
            kept = prune_graph(n, edges, seeds, h, rewire=False).kept.size
            rows.append({"collection": f.collection.name, "stem": f.stem, "hops": int(h),
                         "nodes": int(n), "kept": int(kept), "configurable": int(seeds.size)})
    schema = {"collection": pl.Utf8, "stem": pl.Utf8, "hops": pl.Int64, "nodes": pl.Int64,
              "kept": pl.Int64, "configurable": pl.Int64}
    return pl.DataFrame(rows, schema=schema).with_columns(
        (pl.col("kept") / pl.col("nodes")).alias("kept_fraction"))


def pruning_summary(pruned: pl.DataFrame) -> pl.DataFrame:
    """Per collection and hop count: total nodes, kept nodes and the kept fraction."""
    return (pruned.group_by("collection", "hops")
            .agg(pl.len().alias("graphs"), pl.col("nodes").sum(), pl.col("kept").sum())
            .with_columns((pl.col("kept") / pl.col("nodes")).alias("kept_fraction"))
            .sort("collection", "hops"))


# ---- plots --------------------------------------------------------------------------------------
def _names(stats: pl.DataFrame) -> list[str]:
    present = set(stats["collection"].unique().to_list())
    return [c.name for c in COLLECTIONS if c.name in present]


def plot_graph_sizes(stats: pl.DataFrame) -> Figure:
    """Histogram of node counts per collection (log scale)."""
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    nodes = stats["nodes"].to_numpy()
    bins = np.geomspace(max(float(nodes.min()), 1.0), max(float(nodes.max()), 2.0) * 1.0001, 30)
    for name in _names(stats):
        ax.hist(stats.filter(pl.col("collection") == name)["nodes"].to_numpy(), bins=bins,
                histtype="step", linewidth=1.5, label=name)
    ax.set(xscale="log", xlabel="nodes per graph", ylabel="graphs", title="Graph sizes")
    ax.legend(fontsize=8)
    return fig


def plot_opcode_histogram(counts: pl.DataFrame, top: int = 25) -> Figure:
    """The ``top`` most frequent opcodes, with the configurable share."""
    head = counts.head(top).reverse()
    fig = Figure(figsize=(8, 0.25 * len(head) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(head))
    ax.barh(y, head["count"].to_numpy(), color="#9ab", label="all nodes")
    ax.barh(y, head["configurable"].to_numpy(), color="#c53", label="configurable (layout)")
    ax.set_yticks(y, head["name"].to_list(), fontsize=8)
    ax.set(xscale="log", xlabel="nodes", title=f"Top {len(head)} opcodes")
    ax.legend(fontsize=8)
    return fig


def _boxplot(stats: pl.DataFrame, column: str, ylabel: str, title: str) -> Figure:
    """One log-scale box of ``column`` per collection (a note when there is no value)."""
    names = _names(stats)
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    if not names:
        ax.text(0.5, 0.5, "no runtimes (test split only)", ha="center", transform=ax.transAxes)
        return fig
    ax.boxplot([stats.filter(pl.col("collection") == n)[column].to_numpy() for n in names],
               tick_labels=names)
    ax.set(yscale="log", ylabel=ylabel, title=title)
    ax.tick_params(axis="x", labelsize=8)
    return fig


def plot_configs_per_graph(stats: pl.DataFrame) -> Figure:
    """Distribution of the number of configs per graph, per collection."""
    return _boxplot(stats, "configs", "configs per graph", "Configs per graph")


def plot_runtime_spread(stats: pl.DataFrame) -> Figure:
    """max/min runtime per graph: random searches spread wide, default ones are tightly clustered."""
    return _boxplot(stats.filter(pl.col("spread").is_not_null() & pl.col("spread").is_finite()),
                    "spread", "runtime max / min per graph",
                    "Runtime spread per collection (default vs random search)")


def plot_pruning(pruned: pl.DataFrame) -> Figure:
    """Nodes before vs after k-hop pruning, one panel per number of hops."""
    hops = sorted(pruned["hops"].unique().to_list())
    fig = Figure(figsize=(3.4 * max(1, len(hops)), 3.4), layout="constrained")
    axes = fig.subplots(1, max(1, len(hops)), squeeze=False)[0]
    for ax, h in zip(axes, hops):
        sub = pruned.filter(pl.col("hops") == h)
        for name in _names(sub):
            part = sub.filter(pl.col("collection") == name)
            ax.scatter(part["nodes"].to_numpy(), part["kept"].to_numpy(), s=12, label=name)
        lim = [1, max(2, int(sub["nodes"].max() or 2))]
        ax.plot(lim, lim, color="grey", linewidth=0.8, linestyle="--")
        frac = float(sub["kept"].sum()) / max(1.0, float(sub["nodes"].sum()))
        ax.set(xscale="log", yscale="log", xlabel="nodes", ylabel="kept",
               title=f"{h}-hop pruning: {frac:.0%} kept")
    axes[0].legend(fontsize=7)
    return fig
