"""Training-free heuristic costs of configs: wasted work from TPU (8 x 128) padding (the
physics: docs/ensemble.md, "Baseline"). Lower cost = predicted faster.

The ``baseline`` model's ranking (:mod:`models.baseline`) and the tabular features
``f_heur_cost`` / ``f_heur_rank`` (:mod:`features.tabular`). Layout configs are priced in chunks
(``CHUNK_CONFIGS`` at a time), so a 100k-config graph never sits in memory as float32.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from scipy.stats import rankdata

from features.columns import MINOR_TO_MAJOR as DEFAULT_LAYOUT, SHAPE_DIMS
from features.io import Graph, iter_npz_rows
from features.pruning import producers_csr
from features.repair import repair_nodes

LANES, SUBLANES = 128, 8
VMEM_BYTES = 16 * 2 ** 20  # on-chip vector memory a tile's working set must fit in
BYTES_PER_ELEMENT = 4
STEP_OVERHEAD_ELEMENTS = 4096  # fixed cost of one grid step, in elements streamed
CHUNK_CONFIGS = 2048


def _padded(minor: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Padding factor (>= 1) of a (second, minor) pair of dimension sizes on (8, 128) tiles."""
    minor = np.maximum(minor, 1).astype(np.float64)
    second = np.maximum(second, 1).astype(np.float64)
    return (np.ceil(minor / LANES) * LANES / minor) * (np.ceil(second / SUBLANES) * SUBLANES / second)


# ---- tile ----------------------------------------------------------------------------------
def tile_costs(config_feat: np.ndarray, node_feat: np.ndarray) -> np.ndarray:
    """Heuristic cost per tile config, already on a log scale (lower = predicted faster).

    Output bounds are read in TPU tile units along the kernel root's layout: 128 elements on the
    most-minor dim, 8 on the second-minor, 1 elsewhere. The estimate is
    ``log(padded_elements * spill**2 + steps * STEP_OVERHEAD_ELEMENTS)`` where ``steps`` is the
    grid size, ``padded_elements`` the output work including tiles that overhang the shape, and
    ``spill = max(1, working set / VMEM)``; the working set is the double-buffered output tile,
    the input it reads (the kernel's largest tensor scaled down to the tile: a reduction reads more
    than it writes) and the kernel (weights) tile.
    """
    shape, minor_to_major = _root_shape(node_feat)
    rank = len(shape)
    units = np.ones(rank)
    if rank:
        units[minor_to_major[0]] = LANES
    if rank > 1:
        units[minor_to_major[1]] = SUBLANES
    bounds = np.maximum(np.asarray(config_feat, dtype=np.float64)[:, 8:8 + rank], 1.0)
    extent = np.minimum(bounds * units, np.maximum(np.ceil(shape / units) * units, 1.0))
    tiles_per_dim = np.ceil(shape / extent)
    steps = tiles_per_dim.prod(axis=1)
    padded = (tiles_per_dim * extent).prod(axis=1)
    tile = extent.prod(axis=1)
    kernel = np.asarray(config_feat, dtype=np.float64)[:, 0:6]
    kernel_tile = np.where((kernel > 0).any(axis=1),
                           np.prod(np.where(kernel > 0, kernel, 1.0), axis=1) * LANES * SUBLANES, 0.0)
    sizes = np.prod(np.where(node_feat[:, SHAPE_DIMS] > 0, node_feat[:, SHAPE_DIMS], 1.0), axis=1)
    read_ratio = max(float(sizes.max()) / max(float(np.prod(shape)), 1.0), 1.0)
    working_set = 2 * BYTES_PER_ELEMENT * (tile * (1.0 + read_ratio) + kernel_tile)
    spill = np.maximum(working_set / VMEM_BYTES, 1.0)
    return np.log(padded * spill ** 2 + steps * STEP_OVERHEAD_ELEMENTS)


def _root_shape(node_feat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Output shape and default minor-to-major order of the kernel's root (last root node)."""
    roots = np.flatnonzero(np.asarray(node_feat[:, 0]) == 1)
    root = int(roots[-1]) if len(roots) else len(node_feat) - 1
    dims = np.asarray(node_feat[root, SHAPE_DIMS], dtype=np.float64)
    rank = int((dims > 0).sum())
    order = np.asarray(node_feat[root, DEFAULT_LAYOUT][:rank]).astype(np.int64)
    if sorted(order.tolist()) != list(range(rank)):  # malformed layout: assume row-major
        order = np.arange(rank)[::-1]
    return dims[:rank], order


# ---- layout --------------------------------------------------------------------------------
@dataclass
class _Tensor:
    """Dimension sizes and default minor-to-major order of one tensor per configurable node."""

    shape: np.ndarray  # (nc, 6) sizes, 0 beyond rank
    default: np.ndarray  # (nc, 2) default most-minor and second-minor dim indices (-1: none)
    present: np.ndarray  # (nc,) bool: the node has this tensor

    def minor_pair(self, layout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sizes of the most-minor and second-minor dims for config layouts (b, nc, >=2)."""
        first = np.where(layout[..., 0] >= 0, layout[..., 0], self.default[None, :, 0])
        fallback = np.where(self.default[None, :, 0] == first, self.default[None, :, 1],
                            self.default[None, :, 0])
        second = np.where(layout[..., 1] >= 0, layout[..., 1], fallback)
        return self._size(first), self._size(second)

    def _size(self, dim: np.ndarray) -> np.ndarray:
        idx = np.clip(dim, 0, 5).astype(np.int64)
        sizes = np.take_along_axis(np.broadcast_to(self.shape, idx.shape[:1] + self.shape.shape),
                                   idx[..., None], axis=2)[..., 0]
        return np.where((dim >= 0) & (sizes > 0), sizes, 1.0)

    @property
    def elements(self) -> np.ndarray:
        return np.prod(np.where(self.shape > 0, self.shape, 1.0), axis=1)


def _tensor(node_feat: np.ndarray, nodes: np.ndarray) -> _Tensor:
    present = nodes >= 0
    feat = np.asarray(node_feat[np.where(present, nodes, 0)], dtype=np.float64)
    shape = np.where(present[:, None], feat[:, SHAPE_DIMS], 0.0)
    rank = (shape > 0).sum(axis=1)
    order = feat[:, DEFAULT_LAYOUT].astype(np.int64)
    default = np.stack([np.where(rank >= 1, order[:, 0], -1), np.where(rank >= 2, order[:, 1], -1)], 1)
    return _Tensor(shape, default, present)


class LayoutHeuristic:
    """Per-graph tables (output, first and second operand of every configurable node) built once;
    :meth:`costs` then prices any chunk of layout configs."""

    def __init__(self, node_feat: np.ndarray, node_config_ids: np.ndarray, edge_index: np.ndarray):
        nodes = np.asarray(node_config_ids).reshape(-1).astype(np.int64)
        edges = np.asarray(edge_index).reshape(-1, 2).astype(np.int64)
        operands = producers_csr(len(node_feat), edges).first_two(nodes)  # in file edge order
        self.tensors = [_tensor(node_feat, nodes), _tensor(node_feat, operands[:, 0]),
                        _tensor(node_feat, operands[:, 1])]

    def costs(self, configs: np.ndarray) -> np.ndarray:
        """Padded elements summed over tensors, per config of a (b, nc, 18) chunk (linear scale)."""
        cost = np.zeros(len(configs))
        for slot, tensor in enumerate(self.tensors):
            minor, second = tensor.minor_pair(np.asarray(configs[:, :, 6 * slot:6 * slot + 2]).astype(np.int64))
            padded = _padded(minor, second) * tensor.elements[None, :] * tensor.present[None, :]
            cost += padded.sum(axis=1)
        return cost

    def costs_of_chunks(self, chunks: Iterable[np.ndarray]) -> np.ndarray:
        costs = [self.costs(chunk) for chunk in chunks]
        return np.concatenate(costs) if costs else np.zeros(0)


def padding_tables(node_feat: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:class:`LayoutHeuristic` of one tensor per node as lookup tables, for models that price
    configs themselves: (nc, 7, 2) float32 logs of [elements x lane padding of each dim as the
    most minor, sublane padding of each dim as the second] (dim 6: none, priced as size 1; an
    absent tensor's elements: -1e4) and (nc, 2) int8 default minor, second dims (-1: none)."""
    t = _tensor(node_feat, nodes)
    sizes = np.pad(np.where(t.shape > 0, t.shape, 1.0), ((0, 0), (0, 1)), constant_values=1.0)
    lane = np.log(_padded(sizes, np.full_like(sizes, SUBLANES))) + np.log(t.elements)[:, None]
    lane = np.where(t.present[:, None], lane, -1e4)
    sublane = np.log(_padded(np.full_like(sizes, LANES), sizes))
    return np.stack([lane, sublane], axis=-1).astype(np.float32), t.default.astype(np.int8)


def graph_costs(path: str | os.PathLike, is_tile: bool) -> np.ndarray:
    """Heuristic cost per config of an npz graph file: :func:`tile_costs` (log scale), or the
    layout cost (linear scale) with ``node_config_feat`` streamed ``CHUNK_CONFIGS`` rows at a time."""
    with np.load(path, allow_pickle=False) as data:
        node_feat = repair_nodes(data["node_feat"], data["node_opcode"])[0]  # a test file's repairs
        if is_tile:
            return tile_costs(data["config_feat"], node_feat)
        heuristic = LayoutHeuristic(node_feat, data["node_config_ids"], data["edge_index"])
    return heuristic.costs_of_chunks(iter_npz_rows(path, "node_config_feat", CHUNK_CONFIGS))


# ---- features ------------------------------------------------------------------------------
def log_costs(graph: Graph, rows: int = CHUNK_CONFIGS) -> np.ndarray:
    """Log heuristic cost of every config of a loaded graph, in source order (layout configs
    read ``rows`` at a time)."""
    if graph.is_tile:
        return tile_costs(np.asarray(graph.config_feat), np.asarray(graph.node_feat))
    heuristic = LayoutHeuristic(np.asarray(graph.node_feat), np.asarray(graph.node_config_ids),
                                graph.edge_index)
    configs = graph.node_config_feat  # each chunk materialised on its own (memmap, codes)
    chunks = (np.asarray(configs[s:s + rows]) for s in range(0, configs.shape[0], rows))
    return np.log1p(heuristic.costs_of_chunks(chunks))


def rank_fraction(costs: np.ndarray) -> np.ndarray:
    """Within-graph rank of each cost scaled to [0, 1] (0 = cheapest; ties share their mean
    rank; a single config gets 0.5)."""
    costs = np.asarray(costs, np.float64)
    if len(costs) <= 1:
        return np.full(len(costs), 0.5)
    return (rankdata(costs, method="average") - 1.0) / (len(costs) - 1.0)
