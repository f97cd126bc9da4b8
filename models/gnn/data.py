"""Processed graphs -> tensors, and per-step config sampling.

Graphs come from the feature pipeline (:func:`features.processed.iter_processed`). Their large
``config_feat`` arrays stay memory-mapped: a step only reads the rows of the configs it sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tpurank.collections import Collection
from features.buildconfig import BuildConfig
from features.configgraph import COLUMNS, PATH, config_graph
from features.processed import ProcessedGraph, iter_processed
from features.tabular import LayoutContext
from models.gnn.model import ConfigLinks


@dataclass
class GraphTensors:
    """The config-independent part of one graph, as tensors on a device."""

    node_feat: torch.Tensor  # (n, F) float32
    node_opcode: torch.Tensor  # (n,) int64
    edge_index: torch.Tensor  # (2, m) int64 producer -> consumer
    config_node_pos: torch.Tensor | None  # (nc,) int64, layout only
    links: ConfigLinks | None = None  # layout: the configurable-node graph
    segments: dict = field(default_factory=dict, repr=False)  # GST: gst.graph_segments by size


def graph_tensors(g: ProcessedGraph, device: torch.device) -> GraphTensors:
    """Copy the small arrays of ``g`` to ``device`` (non-finite features become 0)."""
    feat = np.nan_to_num(np.array(g.node_feat, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    edge_index = np.asarray(g.edge_index, dtype=np.int64).reshape(2, -1)
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= g.num_nodes):
        raise ValueError(f"{g.collection}/{g.split}/{g.stem}: edge_index refers to nodes outside "
                         f"0..{g.num_nodes - 1}")
    pos = links = None
    if not g.is_tile:
        pos = torch.as_tensor(np.array(g.config_node_pos, dtype=np.int64), device=device)
        links = config_links(g, edge_index, device)
    return GraphTensors(
        node_feat=torch.as_tensor(feat, device=device),
        node_opcode=torch.as_tensor(np.array(g.node_opcode, dtype=np.int64), device=device),
        edge_index=torch.as_tensor(np.array(edge_index), device=device),
        config_node_pos=pos,
        links=links,
    )


def config_links(g: ProcessedGraph, edge_index: np.ndarray, device: torch.device) -> ConfigLinks:
    """The configurable-node graph of a layout graph as tensors: the one ``features build``
    stored (computed on the source graph), or, for graphs written without it, computed here on
    the processed graph ``edge_index`` (2, m) with the build's default hop limit (rewired edges
    then shorten some paths); with the graph's layout context, each node's layout pattern tables."""
    links = g.config_graph
    if links is None:
        hops = BuildConfig().config_graph_hops
        links = config_graph(g.num_nodes, edge_index[0], edge_index[1],
                             np.asarray(g.config_node_pos, dtype=np.int64), hops,
                             BuildConfig().config_graph_max_links)
    links = np.asarray(links, dtype=np.int64)
    links = links.reshape(-1, links.shape[-1] if links.ndim == 2 else len(COLUMNS))
    if links.shape[1] == len(COLUMNS) - 1:  # written before meet links: path links only
        links = np.concatenate([links, np.full((len(links), 1), PATH)], axis=1)
    nc = len(g.config_node_pos)
    if links.size and (links[:, :2].min() < 0 or links[:, :2].max() >= nc
                       or links[:, 3:].max() >= g.num_nodes):
        raise ValueError(f"{g.collection}/{g.split}/{g.stem}: config_graph refers to configurable "
                         f"nodes outside 0..{nc - 1} or nodes outside 0..{g.num_nodes - 1}; "
                         f"rebuild features")
    patterns = padding = default_dims = None
    if g.layout_context is not None:
        ctx = LayoutContext.from_arrays(g.layout_context)
        patterns = torch.as_tensor(layout_patterns(ctx), device=device)
        padding, default_dims = (torch.as_tensor(a, device=device) for a in (ctx.padding, ctx.default_dims))
    return ConfigLinks(edge_index=torch.as_tensor(links[:, :2].T.copy(), device=device),
                       hops=torch.as_tensor(links[:, 2].copy(), device=device),
                       inner=torch.as_tensor(links[:, 3:5].copy(), device=device),
                       kind=torch.as_tensor(links[:, 5].copy(), device=device), patterns=patterns,
                       padding=padding, default_dims=default_dims,
                       graph=f"{g.collection}/{g.split}/{g.stem}")


def layout_patterns(ctx: LayoutContext) -> np.ndarray:
    """(nc, 3, 7, PATTERN_BITS) bool per configurable node, tensor (out, in, kernel) and dim
    (index 6: none): is the dim the largest, lane-aligned, contracting, the last, the first (of
    a tensor of rank > 1), sublane-aligned (the last column: read for the second-most minor)."""
    dims = np.arange(7)[None, None, :]
    rank = ctx.rank[:, :, None]
    last, first = (dims == rank - 1) & (dims < 6), (dims == 0) & (rank > 1)
    bits = [ctx.largest, ctx.aligned128, ctx.contract, last, first, ctx.aligned8]
    return np.stack(bits, axis=-1).astype(bool)


def config_rows(g: ProcessedGraph, idx: np.ndarray, device: torch.device) -> torch.Tensor:
    """Rows ``idx`` of the graph's config features (only these rows are read from disk)."""
    idx = np.asarray(idx, dtype=np.int64)
    order = np.argsort(idx, kind="stable")
    rows = np.asarray(g.config_feat[idx[order]])  # sorted reads are memmap-friendly
    out = np.empty_like(rows)
    out[order] = rows
    if out.dtype != np.int8:  # layout values are int8; tile features float32
        out = out.astype(np.float32)
    return torch.as_tensor(out, device=device)


def sample_configs(rng: np.random.Generator, target: np.ndarray, size: int,
                   close_bias: float = 0.0) -> np.ndarray:
    """Indices of ``size`` distinct configs of one graph: uniform, or with probability
    ``close_bias`` from a window of ``4 * size`` configs adjacent in runtime order (so the step
    learns to separate close runtimes)."""
    count = len(target)
    size = min(size, count)
    if close_bias > 0 and count > 4 * size and rng.random() < close_bias:
        by_runtime = np.argsort(target, kind="stable")
        window = 4 * size
        start = int(rng.integers(0, count - window + 1))
        return np.sort(rng.choice(by_runtime[start:start + window], size=size, replace=False))
    return np.sort(rng.choice(count, size=size, replace=False))


def load_graphs(features_dir: str | Path, collection: Collection, split: str) -> list[ProcessedGraph]:
    """All processed graphs of one split (memory-mapped). Raises if the split was never built."""
    base = Path(features_dir) / collection.slug / "graphs" / split
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no processed graphs for {collection.name}/{split}; "
                                f"run `python -m features build` first")
    return list(iter_processed(features_dir, collection, split))


def trainable(g: ProcessedGraph) -> bool:
    """A train graph is useful only with a target and at least two distinct runtimes."""
    return g.target is not None and g.num_configs >= 2 and float(np.ptp(np.asarray(g.target))) > 0
