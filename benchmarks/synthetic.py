"""Synthetic inputs for the benchmarks and the tests: huge, valid layout npz files (streamed, never
held in RAM), small tile/layout graphs and data roots, and toy tabular feature files.

``write_layout_npz(path, n_nodes, n_configs, n_config_nodes, seed)`` writes a file that passes
:func:`features.validate.validate_file` and looks like a real layout graph at scale (a
100k-config × 500-node file holds a 3.6 GB float32 ``node_config_feat``). The zip is written
uncompressed with ZIP64 and ``node_config_feat`` is streamed into its member ``chunk_configs``
configs at a time, so memory stays at tens of MB whatever the size.

Content (plausible, not a model of any real program):

* a DAG in topological order: node ``u`` consumes ``u-1`` and, sometimes, a random earlier node;
  ``edge_index`` rows are ``[consumer, producer]``;
* opcodes from ``hlo_opcodes.tsv`` (parameters first, then elementwise ops), the configurable
  nodes being convolution, dot or reshape; ``node_feat`` fills element type (f32), shape dims
  with sum/product, and the layout minor_to_major (docs/competition.md §4);
* per configurable node and tensor (output, input, kernel — kernel only for convolutions) a small
  menu of layouts: all −1 (compiler default), full permutations of the tensor's rank, or only the
  two most-minor dims given (``[1, 0, -1, ...]``); each config picks from the menus;
* runtimes (int64 ns) = a base cost plus a per-(node, tensor, choice) cost summed over the
  config, with noise: positive and learnable.

Also a CLI: ``python -m benchmarks.synthetic --out X.npz --nodes 40000 --configs 100000
--config-nodes 500``. The API is used by the data and feature benchmarks: keep it stable.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
import polars as pl
from tqdm import tqdm

from tpurank.atomic import atomic_path
from tpurank.collections import COLLECTIONS, Collection
from features.io import LAYOUT_CONFIG_DIM, NODE_FEAT_DIM
from features.processed import tabular_path

__all__ = ["write_layout_npz", "layout_arrays", "tile_arrays", "write_tile_npz", "write_mini_root",
           "toy_frame", "write_toy_features", "main"]

OPCODES = {"parameter": 63, "constant": 24, "add": 2, "multiply": 59, "broadcast": 13,
           "maximum": 57, "reduce": 70, "transpose": 98, "fusion": 41,
           "convolution": 26, "dot": 34, "reshape": 75}
PLAIN_OPS = ("add", "multiply", "broadcast", "maximum", "reduce", "transpose", "fusion", "constant")
CONFIGURABLE_OPS = ("convolution", "dot", "reshape")
F32_ONE_HOT = 2 + 11  # element-type one-hot starts at 2 with "invalid"; f32 is the 12th entry
SHAPE_DIMS, SHAPE_SUM, SHAPE_PRODUCT, MINOR_TO_MAJOR = 21, 27, 28, 134
N_CHOICES = 8  # layout menu size per (node, tensor)
MAX_RANK = 6


def _write_member(zf: zipfile.ZipFile, key: str, array: np.ndarray) -> None:
    with zf.open(key + ".npy", "w", force_zip64=True) as fp:
        np.lib.format.write_array(fp, np.ascontiguousarray(array), allow_pickle=False)


def _node_arrays(rng: np.random.Generator, n: int, config_ids: np.ndarray):
    """opcode (n,), node_feat (n,140), ranks (n,), edge_index (m,2), node_splits (k,)."""
    ops = rng.choice([OPCODES[o] for o in PLAIN_OPS], size=n)
    n_params = max(1, min(n // 50, 64))
    ops[:n_params] = OPCODES["parameter"]
    ops[config_ids] = rng.choice([OPCODES[o] for o in CONFIGURABLE_OPS], size=config_ids.size)
    ranks = rng.integers(1, 5, size=n)
    ranks[ops == OPCODES["convolution"]] = 4
    dims = np.where(np.arange(MAX_RANK)[None, :] < ranks[:, None],
                    2 ** rng.integers(0, 10, size=(n, MAX_RANK)), 0).astype(np.float32)
    feat = np.zeros((n, NODE_FEAT_DIM), np.float32)
    feat[:, F32_ONE_HOT] = 1
    feat[:, SHAPE_DIMS:SHAPE_DIMS + MAX_RANK] = dims
    feat[:, SHAPE_SUM] = dims.sum(1)
    feat[:, SHAPE_PRODUCT] = np.where(dims > 0, dims, 1).prod(1)
    m2m = np.where(np.arange(MAX_RANK)[None, :] < ranks[:, None],
                   ranks[:, None] - 1 - np.arange(MAX_RANK)[None, :], 0)  # default: descending
    feat[:, MINOR_TO_MAJOR:MINOR_TO_MAJOR + MAX_RANK] = m2m
    feat[n - 1, 0] = 1  # is_root
    consumers = np.arange(1, n)
    chain = np.stack([consumers, consumers - 1], 1)
    extra_u = consumers[(consumers > 1) & (rng.random(n - 1) < 0.3)]
    extra = np.stack([extra_u, rng.integers(0, extra_u - 1)], 1) if extra_u.size else \
        np.zeros((0, 2), np.int64)
    edges = np.concatenate([chain, extra]).astype(np.int64)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    n_comps = max(1, min(8, n // 1000))
    splits = np.unique(np.concatenate([[0], rng.integers(1, n, size=n_comps - 1)])) if n > 1 \
        else np.zeros(1, np.int64)
    return ops.astype(np.int64), feat, ranks, edges, splits.astype(np.int64)


def _layout_menus(rng: np.random.Generator, ranks: np.ndarray, is_conv: np.ndarray) -> np.ndarray:
    """(nc, 3, N_CHOICES, 6) float32 menus of layouts per configurable node and tensor."""
    nc = ranks.size
    menus = np.full((nc, 3, N_CHOICES, MAX_RANK), -1, np.float32)
    for i in range(nc):
        r = int(ranks[i])
        for t in range(3 if is_conv[i] else 2):
            for c in range(1, N_CHOICES):  # choice 0 stays all -1: the compiler default
                perm = rng.permutation(r)
                menus[i, t, c, :r] = perm
                if r > 2 and c % 3 == 0:  # only the two most-minor dims given, as in real configs
                    menus[i, t, c, 2:r] = -1
    return menus


def _write_config_feat(fp: IO[bytes], rng: np.random.Generator, menus: np.ndarray,
                       costs: np.ndarray, n_configs: int, chunk_configs: int,
                       progress: bool) -> np.ndarray:
    """Stream (c, nc, 18) float32 configs into ``fp``; returns the (c,) summed costs."""
    nc = menus.shape[0]
    node_idx = np.arange(nc)[None, :, None]
    tensor_idx = np.arange(3)[None, None, :]
    total = np.empty(n_configs, np.float64)
    for start in tqdm(range(0, n_configs, chunk_configs), desc="write node_config_feat",
                      unit="chunk", disable=not progress, file=sys.stderr):
        rows = min(chunk_configs, n_configs - start)
        choice = rng.integers(0, N_CHOICES, size=(rows, nc, 3), dtype=np.int64)
        values = menus[node_idx, tensor_idx, choice]  # (rows, nc, 3, 6)
        fp.write(values.reshape(rows, nc, LAYOUT_CONFIG_DIM).tobytes())
        total[start:start + rows] = costs[node_idx, tensor_idx, choice].sum(axis=(1, 2))
    return total


def write_layout_npz(path: str | os.PathLike, n_nodes: int, n_configs: int, n_config_nodes: int,
                     seed: int = 0, chunk_configs: int = 1000, progress: bool = False) -> Path:
    """Write a valid layout npz of the given size, streaming ``node_config_feat``; returns path.

    Memory: about ``chunk_configs * n_config_nodes * 18 * 4`` bytes (×3 for temporaries) plus
    the node arrays. The file appears atomically (written to a temporary sibling first).
    """
    if not 0 < n_config_nodes < n_nodes:
        raise ValueError(f"need 0 < n_config_nodes < n_nodes, got {n_config_nodes}, {n_nodes}")
    if n_configs < 1:
        raise ValueError("n_configs must be >= 1")
    rng = np.random.default_rng(seed)
    config_ids = np.sort(rng.choice(np.arange(1, n_nodes), size=n_config_nodes, replace=False))
    ops, feat, ranks, edges, splits = _node_arrays(rng, n_nodes, config_ids)
    is_conv = ops[config_ids] == OPCODES["convolution"]
    menus = _layout_menus(rng, ranks[config_ids], is_conv)
    costs = rng.gamma(2.0, 1.0, size=(n_config_nodes, 3, N_CHOICES)) * (menus[..., 0] >= 0)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
              "shape": (n_configs, n_config_nodes, LAYOUT_CONFIG_DIM)}
    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, array in (("node_feat", feat), ("node_opcode", ops), ("edge_index", edges),
                               ("node_splits", splits), ("node_config_ids", config_ids)):
                _write_member(zf, key, array)
            with zf.open("node_config_feat.npy", "w", force_zip64=True) as fp:
                np.lib.format.write_array_header_2_0(fp, header)
                total = _write_config_feat(fp, rng, menus, costs, n_configs, chunk_configs,
                                           progress)
            noise = rng.normal(1.0, 0.01, size=n_configs).clip(0.9, 1.1)
            runtime = (1e6 * (1.0 + 0.05 * total / max(1, n_config_nodes)) * noise)
            _write_member(zf, "config_runtime", runtime.astype(np.int64))
    return path


def tile_arrays(n_nodes: int, n_configs: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The arrays of a small valid tile graph (a fused kernel is small: kept in RAM)."""
    rng = np.random.default_rng(seed)
    ops, feat, _, edges, splits = _node_arrays(rng, n_nodes, np.zeros(0, np.int64))
    bounds = 2 ** rng.integers(0, 8, size=(n_configs, 2, 6)).astype(np.float32)
    bounds[:, :, 4:] = 0
    config = np.zeros((n_configs, 24), np.float32)
    for block, b in ((0, bounds[:, 0]), (8, bounds[:, 1])):  # kernel, output bounds (+sum, product)
        config[:, block:block + 6] = b
        config[:, block + 6] = b.sum(1)
        config[:, block + 7] = np.where(b > 0, b, 1).prod(1)
    runtime = (1e3 * (1 + np.log2(config[:, 7]) + rng.gamma(2.0, 0.5, n_configs))).astype(np.int64)
    normalizers = (runtime * rng.uniform(0.95, 1.05, n_configs)).astype(np.int64).clip(1)
    return {"node_feat": feat, "node_opcode": ops, "edge_index": edges,
            "node_splits": np.array([0, n_nodes], np.int64), "config_feat": config,
            "config_runtime": runtime, "config_runtime_normalizers": normalizers}


def write_tile_npz(path: str | os.PathLike, n_nodes: int, n_configs: int, seed: int = 0) -> Path:
    """Write a small valid tile npz (atomically); returns ``path``."""
    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fp:
            np.savez(fp, **tile_arrays(n_nodes, n_configs, seed))
    return path


def layout_arrays(n_nodes: int, n_configs: int, n_config_nodes: int,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """The arrays of a small valid layout graph, in RAM (same content as the file writer)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_layout_npz(Path(tmp) / "g.npz", n_nodes, n_configs, n_config_nodes, seed)
        with np.load(path) as data:
            return {k: data[k] for k in data.files}


def write_mini_root(root: str | os.PathLike, seed: int = 0) -> Path:
    """A small Kaggle-layout data root: one graph per collection and split (test runtimes 0).

    Independent of the sample generator; used by the data-layer tests and benchmarks.
    """
    from tpurank.collections import COLLECTIONS, SPLITS

    root = Path(root)
    for i, coll in enumerate(COLLECTIONS):
        for j, split in enumerate(SPLITS):
            graph_seed = seed * 100 + 10 * i + j
            arrays = tile_arrays(12, 7, graph_seed) if coll.is_tile else \
                layout_arrays(60, 9, 6, graph_seed)
            if split == "test":
                arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
            out = coll.split_dir(root, split)
            out.mkdir(parents=True, exist_ok=True)
            np.savez(out / f"g{graph_seed}.npz", **arrays)
    return root


# --- toy tabular features -----------------------------------------------------------------------
# Synthetic tabular files in the feature pipeline's format, with a learnable ranking (the LightGBM
# tests and benchmarks/lgbm.py).
# Runtime of a config = graph scale x exp(w . x) x log-normal noise, with fixed weights ``w``
# (``f_0`` weight +1 down to ``f_{F-2}`` weight -1; the middle feature has weight 0) and a
# graph-level feature ``f_{F-1}`` = log(scale), constant within a graph.


def toy_frame(n_graphs: int, n_configs: int, n_features: int, seed: int, with_target: bool = True,
              prefix: str = "g") -> pl.DataFrame:
    """Rows of ``n_graphs`` graphs of ``n_configs`` configs each."""
    rng = np.random.default_rng(seed)
    w = np.linspace(1.0, -1.0, n_features - 1)
    frames = []
    for g in range(n_graphs):
        X = rng.normal(size=(n_configs, n_features)).astype(np.float32)
        scale = rng.uniform(1, 100)
        X[:, -1] = np.float32(np.log(scale))
        runtime = scale * np.exp(X[:, :-1] @ w + 0.3 * rng.normal(size=n_configs))
        cols = {"graph": [f"{prefix}{g:03d}"] * n_configs,
                "config": np.arange(n_configs, dtype=np.int64),
                "target": runtime if with_target else np.full(n_configs, None)}
        cols.update({f"f_{k}": X[:, k] for k in range(n_features)})
        frames.append(pl.DataFrame(cols, schema_overrides={"target": pl.Float64}))
    return pl.concat(frames)


def write_toy_features(features_dir: str | Path, collections: tuple[Collection, ...] = COLLECTIONS,
                       n_graphs: tuple[int, int, int] = (12, 4, 3), n_configs: int = 60,
                       n_features: int = 6, seed: int = 0) -> Path:
    """Write ``features_dir/<slug>/tabular/{train,valid,test}.parquet`` for ``collections``."""
    features_dir = Path(features_dir)
    for k, collection in enumerate(collections):
        for s, (split, n) in enumerate(zip(("train", "valid", "test"), n_graphs)):
            df = toy_frame(n, n_configs, n_features, seed=seed * 100 + k * 10 + s,
                           with_target=split != "test", prefix=f"{split}_")
            path = tabular_path(features_dir, collection, split)
            path.parent.mkdir(parents=True, exist_ok=True)
            df.write_parquet(path)
    return features_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synthetic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="npz file to write")
    parser.add_argument("--nodes", type=int, default=40_000, help="graph nodes")
    parser.add_argument("--configs", type=int, default=100_000, help="layout configs")
    parser.add_argument("--config-nodes", type=int, default=500, help="configurable nodes")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--chunk-configs", type=int, default=1000,
                        help="configs written to the zip member at a time (memory bound)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = write_layout_npz(args.out, args.nodes, args.configs, args.config_nodes, args.seed,
                           args.chunk_configs, progress=True)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 2**30:.2f} GiB) in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
