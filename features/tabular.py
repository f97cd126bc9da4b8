"""Tabular features for LightGBM: one row per (graph, config), written as parquet (polars); the
columns: docs/features.md, "What the models get". Configs are processed in chunks
(``(chunk, nc, 18)`` int8 at a time), never the whole array.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import polars as pl

from features import heuristic
from tpurank.atomic import atomic_path
from features.io import Graph
from features.columns import MAX_RANK, SHAPE_DIMS, opcode_ids, tensor_rank
from features.pruning import node_depths, producers_csr, prune_graph
from features.transforms import repad_tile_config
from features.dot_features import DotDims

NODE_TYPES = ("conv", "dot", "reshape", "other")
TENSORS = ("out", "in", "kernel")
LAYOUT_PATTERNS = (
    "default",  # all -1: compiler's choice
    "minor_last",  # most-minor dim is the last logical dim (row-major-like)
    "minor_first",  # most-minor dim is dim 0 (rank > 1)
    "largest_minor",  # the largest dimension is the most minor one
    "minor_aligned128",  # most-minor dim size is a multiple of 128 (TPU lanes)
    "second_aligned8",  # second-minor dim size is a multiple of 8 (sublanes)
    "contract_minor",  # dot operands: a contracting dim is most minor
)
GRAPH_FEATURES = ("f_g_log_nodes", "f_g_log_edges", "f_g_n_config_nodes", "f_g_n_conv", "f_g_n_dot",
                  "f_g_n_reshape", "f_g_log_total_elems", "f_g_max_depth")


def layout_feature_names() -> list[str]:
    patterns = [f"f_{t}_{s}_{p}_{k}" for t in NODE_TYPES for s in TENSORS for p in LAYOUT_PATTERNS
                for k in "nw"]
    return list(GRAPH_FEATURES) + patterns + [
        "f_nondefault_n", "f_nondefault_w", "f_out_minor_mean", "f_mismatch_n", "f_mismatch_w",
        "f_mismatch_default_n", "f_pairs"]


def _shape_rows(node_feat: np.ndarray, rank: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(len(ids), 6) shape dims (-1 beyond rank; -1 everywhere for id -1) and ranks."""
    shapes = np.full((len(ids), MAX_RANK), -1, np.int64)
    ranks = np.zeros(len(ids), np.int64)
    for k, i in enumerate(ids.tolist()):
        if i < 0:
            continue
        r = int(rank[i])
        shapes[k, :r] = node_feat[i, SHAPE_DIMS][:r]
        ranks[k] = r
    return shapes, ranks


def graph_level_features(graph: Graph) -> np.ndarray:
    """Values of :data:`GRAPH_FEATURES` for one graph."""
    ids = opcode_ids()
    op = np.asarray(graph.node_opcode)
    nf = np.asarray(graph.node_feat)
    cfg_ids = graph.node_config_ids if graph.node_config_ids is not None else np.zeros(0, np.int64)
    cop = op[cfg_ids]
    depth, _ = node_depths(graph.num_nodes, graph.edge_index)
    return np.array([np.log1p(graph.num_nodes), np.log1p(len(graph.edge_index)), len(cfg_ids),
                     np.sum(cop == ids["convolution"]), np.sum(cop == ids["dot"]),
                     np.sum(cop == ids["reshape"]),
                     np.log1p(np.sum(np.maximum(nf[:, 28], 0), dtype=np.float64)),
                     depth.max(initial=0)], dtype=np.float32)


@dataclass
class LayoutContext:
    """Per-graph lookup tables for :func:`layout_chunk_features` (built once per graph)."""

    graph_feats: np.ndarray  # (len(GRAPH_FEATURES),)
    type_onehot: np.ndarray  # (nc, 4) float32
    rank: np.ndarray  # (nc, 3) ranks of out/in/kernel tensors
    log_size: np.ndarray  # (nc, 3) log1p element count of each tensor
    # per (node, tensor, dim index 0..6) with index 6 = "no dim" (layout value -1): bool tables
    largest: np.ndarray
    aligned128: np.ndarray
    aligned8: np.ndarray
    contract: np.ndarray
    pairs: np.ndarray  # (p, 2) slot pairs (producer, consumer) of dependent configurable nodes
    padding: np.ndarray  # (nc, 3, 7, 2) per tensor: heuristic.padding_tables' log prices
    default_dims: np.ndarray  # (nc, 3, 2) per tensor: its default minor, second dims (-1: none)

    def arrays(self) -> dict[str, np.ndarray]:
        """The tables by field name (what :func:`features.processed.save_processed` stores)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "LayoutContext":
        missing = [f.name for f in fields(cls) if f.name not in arrays]
        if missing:
            raise KeyError(f"layout context without {', '.join(missing)}")
        return cls(**{f.name: np.asarray(arrays[f.name]) for f in fields(cls)})


def _dim_tables(shapes: np.ndarray) -> tuple[np.ndarray, ...]:
    """(k, 7) tables: is the dim the largest / lane-aligned / sublane-aligned (index 6: False)."""
    valid = shapes > 0
    mx = np.where(valid, shapes, 0).max(axis=1, initial=0)
    tables = (valid & (shapes == mx[:, None]) & (mx[:, None] > 1), valid & (shapes % 128 == 0),
              valid & (shapes % 8 == 0))
    return tuple(np.pad(t, ((0, 0), (0, 1))) for t in tables)


def config_dependency_pairs(graph: Graph, max_sources: int = 8) -> np.ndarray:
    """Slot pairs ``(i, j)``: configurable node ``i`` feeds ``j`` directly or only through
    non-configurable nodes (pruning to the configurable nodes with rewiring)."""
    ids = np.asarray(graph.node_config_ids)
    if len(ids) == 0:
        return np.zeros((0, 2), np.int64)
    pr = prune_graph(graph.num_nodes, graph.edge_index, ids, hops=0, rewire=True, max_sources=max_sources)
    slot_of_kept = np.full(len(pr.kept), -1, np.int64)
    slot_of_kept[pr.positions(ids)] = np.arange(len(ids))
    return np.stack([slot_of_kept[pr.edge_index_pyg[0]], slot_of_kept[pr.edge_index_pyg[1]]], axis=1)


def layout_context(graph: Graph, dots: dict[int, tuple[DotDims, bool]] | None = None,
                   max_sources: int = 8) -> LayoutContext:
    """Lookup tables for a layout graph. ``dots`` (from :func:`dot_dims_for_graph`) enables the
    ``contract_minor`` pattern; without it that pattern is always 0."""
    nf = np.asarray(graph.node_feat)
    op = np.asarray(graph.node_opcode)
    cfg_ids = np.asarray(graph.node_config_ids, np.int64)
    ids = opcode_ids()
    type_idx = np.select([op[cfg_ids] == ids["convolution"], op[cfg_ids] == ids["dot"],
                          op[cfg_ids] == ids["reshape"]], [0, 1, 2], 3)
    onehot = np.eye(len(NODE_TYPES), dtype=np.float32)[type_idx]
    rank = tensor_rank(nf)
    operand = producers_csr(graph.num_nodes, graph.edge_index).first_two(cfg_ids)
    tensors = [cfg_ids, operand[:, 0], operand[:, 1]]
    nc = len(cfg_ids)
    ranks = np.zeros((nc, 3), np.int64)
    log_size = np.zeros((nc, 3), np.float32)
    largest, a128, a8, contract = (np.zeros((nc, 3, 7), bool) for _ in range(4))
    for t, node_ids in enumerate(tensors):
        shapes, ranks[:, t] = _shape_rows(nf, rank, node_ids)
        log_size[:, t] = np.log1p(np.prod(np.where(shapes > 0, shapes, 1), axis=1, dtype=np.float64))
        log_size[node_ids < 0, t] = 0.0
        largest[:, t], a128[:, t], a8[:, t] = _dim_tables(shapes)
    for k, u in enumerate(cfg_ids.tolist()):
        if dots and u in dots:
            d = dots[u][0]
            contract[k, 1, [c for c in d.lhs_contracting if c < 6]] = True
            contract[k, 2, [c for c in d.rhs_contracting if c < 6]] = True
    pairs = config_dependency_pairs(graph, max_sources)
    if len(pairs):  # layouts are only comparable between tensors of equal rank
        pairs = pairs[ranks[pairs[:, 0], 0] == ranks[pairs[:, 1], 1]]
    tables = [heuristic.padding_tables(nf, node_ids) for node_ids in tensors]
    return LayoutContext(graph_level_features(graph), onehot, ranks, log_size, largest, a128, a8,
                         contract, pairs, np.stack([p for p, _ in tables], axis=1),
                         np.stack([d for _, d in tables], axis=1))


def _flat_code(ctx: LayoutContext, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (node, dim) bit codes of tensor ``t``, flattened to (nc * 7,): bit 1 largest, 2 lane-
    aligned, 4 contracting (looked up by the most-minor dim); and the sublane table (second-minor)."""
    code = (ctx.largest[:, t].astype(np.uint8) | (ctx.aligned128[:, t].astype(np.uint8) << 1)
            | (ctx.contract[:, t].astype(np.uint8) << 2))
    return code.reshape(-1), ctx.aligned8[:, t].reshape(-1)


def layout_chunk_features(ctx: LayoutContext, cfg: np.ndarray) -> np.ndarray:
    """(chunk, F) float32 features (names: :func:`layout_feature_names`) of a config chunk
    ``cfg`` of shape (chunk, nc, 18) with values -1..5.

    Vectorised: each layout pattern is a (chunk, nc) boolean; the per-type counts and size
    weights are one matrix product per tensor with ``[type one-hot, type one-hot * log size]``.
    """
    cfg = np.asarray(cfg).astype(np.int8, copy=False)
    c, nc = cfg.shape[0], cfg.shape[1]
    base = (np.arange(nc, dtype=np.int32) * 7)[None, :]
    per_tensor = []
    defaults = []
    for t in range(3):
        lay = cfg[:, :, 6 * t:6 * t + 6]
        m0, m1 = lay[:, :, 0], lay[:, :, 1]
        default = lay.max(axis=2) == -1  # values are >= -1: all -1 <=> max is -1
        defaults.append(default)
        code_t, a8_t = _flat_code(ctx, t)
        code = code_t[base + np.remainder(m0, 7)]  # -1 -> index 6 (no dim)
        r = ctx.rank[:, t].astype(np.int8)[None, :]
        pats = np.stack([default, ~default & (m0 == r - 1), (m0 == 0) & (r > 1), (code & 1) > 0,
                         (code & 2) > 0, a8_t[base + np.remainder(m1, 7)], (code & 4) > 0], axis=1)
        weights = np.concatenate([ctx.type_onehot, ctx.type_onehot * ctx.log_size[:, t:t + 1]], axis=1)
        res = (pats.reshape(c * 7, nc).astype(np.float32) @ weights).reshape(c, 7, 2, 4)
        per_tensor.append(res)  # (c, pattern, n/w, type)
    blocks = np.stack(per_tensor, axis=1)  # (c, tensor, pattern, n/w, type)
    blocks = blocks.transpose(0, 4, 1, 2, 3).reshape(c, -1)  # type, tensor, pattern, n/w
    nd = (~defaults[0]).astype(np.float32)
    count = nd.sum(1)
    m0 = cfg[:, :, 0].astype(np.float32)
    minor_mean = np.where(count > 0, (m0 * nd).sum(1) / np.maximum(count, 1), -1.0)
    extra = [count, nd @ ctx.log_size[:, 0], minor_mean, *_mismatch(ctx, cfg)]
    graph = np.broadcast_to(ctx.graph_feats, (c, len(ctx.graph_feats)))
    return np.concatenate([graph, blocks, np.stack(extra, axis=1)], axis=1).astype(np.float32)


def _mismatch(ctx: LayoutContext, cfg: np.ndarray) -> tuple[np.ndarray, ...]:
    """Producer output vs consumer input layout (two most-minor dims) over dependent pairs of
    equal rank: (#mismatch, size-weighted #mismatch, #pairs where exactly one is default, #pairs).

    Layouts are first reduced to one small code per (config, node) so the pair loop is a
    (chunk, pairs) comparison of int16 codes."""
    c = cfg.shape[0]
    pairs = ctx.pairs
    if len(pairs) == 0:
        z = np.zeros(c, np.float32)
        return z, z, z, z
    out_code = (cfg[:, :, 0].astype(np.int16) + 1) * 8 + cfg[:, :, 1] + 1
    in_code = (cfg[:, :, 6].astype(np.int16) + 1) * 8 + cfg[:, :, 7] + 1
    out_def = np.all(cfg[:, :, 0:6] == -1, axis=2)
    in_def = np.all(cfg[:, :, 6:12] == -1, axis=2)
    p, q = pairs[:, 0], pairs[:, 1]
    both = ~out_def[:, p] & ~in_def[:, q]
    mism = both & (out_code[:, p] != in_code[:, q])
    w = ctx.log_size[p, 0]
    return (mism.sum(1).astype(np.float32), (mism @ w).astype(np.float32),
            (out_def[:, p] ^ in_def[:, q]).sum(1).astype(np.float32), np.full(c, len(pairs), np.float32))


# ---- tile ----------------------------------------------------------------------------------
def kernel_output_shape(graph: Graph) -> np.ndarray:
    """(6,) output shape of a tile kernel, -1 padded.

    The root node (is_root, else the last node) gives it. A multi-output fusion's root is a tuple
    with no shape of its own: then the largest of the root's operands stands for the output (the
    tile bounds in docs/competition.md §5 refer to that array), so the bound/shape ratios stay meaningful.
    """
    nf = np.asarray(graph.node_feat)
    roots = np.flatnonzero(nf[:, 0] == 1)
    node = int(roots[-1]) if len(roots) else graph.num_nodes - 1
    for _ in range(4):  # nested tuples: follow the largest operand a few levels down
        if int(tensor_rank(nf[node:node + 1])[0]) > 0:
            break
        operands = graph.edge_index[graph.edge_index[:, 0] == node, 1]
        if len(operands) == 0:
            break
        node = int(operands[np.argmax(nf[operands, 28])])
    r = int(tensor_rank(nf[node:node + 1])[0])
    shape = np.full(MAX_RANK, -1.0, np.float32)
    shape[:r] = nf[node, SHAPE_DIMS][:r]
    return shape


def tile_feature_names() -> list[str]:
    stats = [f"ratio_{i}" for i in range(6)] + ["log_tiles", "waste", "minor_mod128", "second_mod8"]
    bounds = [f"f_{b}_{stat}" for b in ("kernel", "output") for stat in stats]
    return list(GRAPH_FEATURES) + [f"f_cfg_{i}" for i in range(24)] + bounds + [
        "f_kernel_over_output_prod", "f_log_kernel_prod", "f_log_output_prod"]


def _bound_stats(bounds: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Ratios bound/shape per dim (-1 where either is absent), log #tiles, padded-tile waste
    ``prod(ceil(s/b)*b)/prod(s) - 1``, minor bound % 128 / 128, second-minor bound % 8 / 8."""
    valid = (bounds > 0) & (shape[None, :] > 0)
    safe_b = np.where(valid, bounds, 1.0)
    safe_s = np.where(valid, shape[None, :], 1.0)
    ratio = np.where(valid, safe_b / safe_s, -1.0)
    tiles = np.ceil(safe_s / safe_b)
    log_tiles = np.log(tiles).sum(1)
    waste = np.exp(np.log(tiles * safe_b).sum(1) - np.log(safe_s).sum(1)) - 1.0
    rank = (bounds > 0).sum(1)
    rows = np.arange(len(bounds))
    minor = np.where(rank > 0, bounds[rows, np.maximum(rank - 1, 0)], -1.0)
    second = np.where(rank > 1, bounds[rows, np.maximum(rank - 2, 0)], -1.0)
    return np.concatenate([ratio, np.stack([log_tiles, waste,
                                            np.where(minor > 0, np.mod(minor, 128) / 128, -1.0),
                                            np.where(second > 0, np.mod(second, 8) / 8, -1.0)], 1)], 1)


def tile_config_features(config_feat: np.ndarray, out_shape: np.ndarray,
                         pad_minus_one: bool = True) -> np.ndarray:
    """(c, 24 + 20 + 3) config features of a tile kernel (names: ``tile_feature_names()[8:]``)."""
    raw = np.asarray(config_feat, np.float32)
    cfg = repad_tile_config(raw) if pad_minus_one else raw.copy()
    kernel, output = raw[:, 0:6], raw[:, 8:14]
    kp = np.log1p(np.maximum(raw[:, 7], 0))
    op = np.log1p(np.maximum(raw[:, 15], 0))
    return np.concatenate([cfg, _bound_stats(kernel, out_shape), _bound_stats(output, out_shape),
                           np.stack([kp - op, kp, op], 1)], axis=1).astype(np.float32)


def tile_tabular_features(graph: Graph, config_rows: np.ndarray, pad_minus_one: bool = True) -> np.ndarray:
    """(c, F) rows named :func:`tile_feature_names` for the given config indices."""
    feats = tile_config_features(np.asarray(graph.config_feat)[config_rows], kernel_output_shape(graph),
                                 pad_minus_one)
    g = np.broadcast_to(graph_level_features(graph), (len(feats), len(GRAPH_FEATURES)))
    return np.concatenate([g, feats], axis=1).astype(np.float32)


# ---- heuristic ----------------------------------------------------------------------------
HEURISTIC_FEATURES = ("f_heur_cost", "f_heur_rank")


def tabular_feature_names(is_tile: bool, with_heuristic: bool = False) -> list[str]:
    """Column names of the tabular rows of a tile or layout graph, as ``features build`` writes
    them (:data:`HEURISTIC_FEATURES` last when ``with_heuristic``)."""
    names = tile_feature_names() if is_tile else layout_feature_names()
    return names + list(HEURISTIC_FEATURES) if with_heuristic else names


def heuristic_table(graph: Graph, chunk: int = heuristic.CHUNK_CONFIGS) -> np.ndarray:
    """(c, 2) float32 :data:`HEURISTIC_FEATURES` of every source config of ``graph``.

    The rank is taken over all source configs (not the deduplicated / subsampled train rows),
    so a config gets the same value whichever rows a build keeps."""
    cost = heuristic.log_costs(graph, chunk)
    return np.stack([cost, heuristic.rank_fraction(cost)], axis=1).astype(np.float32)


# ---- frames and files -----------------------------------------------------------------------
def make_frame(stem: str, config_index: np.ndarray, target: np.ndarray | None, feats: np.ndarray,
               names: list[str]) -> pl.DataFrame:
    """The tabular contract: graph, config, target (null for test), float32 ``f_*``."""
    if feats.shape[1] != len(names):
        raise ValueError(f"{len(names)} names for {feats.shape[1]} feature columns")
    n = len(config_index)
    frame = pl.DataFrame({
        "graph": pl.Series("graph", [stem] * n, dtype=pl.String),
        "config": pl.Series("config", np.asarray(config_index, np.int64)),
        "target": pl.Series("target", np.asarray(target, np.float64)) if target is not None
        else pl.Series("target", [None] * n, dtype=pl.Float64),
    })
    return frame.hstack(pl.DataFrame(feats.astype(np.float32, copy=False), schema=names, orient="row"))


def write_parquet(frame: pl.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path, suffix=".parquet") as tmp:
        frame.write_parquet(tmp)


def concat_parquet(parts: Iterable[Path], out: str | os.PathLike) -> int:
    """Concatenate per-graph parquet parts (in the given order, at least one) into ``out``
    atomically; row count."""
    with atomic_path(out, suffix=".parquet") as tmp:
        pl.scan_parquet([str(p) for p in parts]).sink_parquet(tmp)
    return int(pl.scan_parquet(out).select(pl.len()).collect().item())
