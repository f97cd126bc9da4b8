"""Graph transforms of the feature pipeline — each small, named, parameterised and pure.

- :func:`prune_graph`: keep the configurable nodes and their ``hops``-hop neighbourhood (both
  directions) and *rewire* kept nodes connected only through removed nodes.
- :func:`repad_node_feat` / :func:`repad_tile_config`: per-dimension blocks get ``-1`` beyond the
  tensor's rank instead of the ambiguous ``0`` (SPEC §4, §5).
- :func:`infer_dot_dims`: dot-general contracting/batch dimensions from the shapes of a ``dot``
  node and its two operands (SPEC §7); :func:`dot_conv_features` encodes them per node.
- :func:`structure_features`: in/out degree and topological depth.
- :func:`config_row_hashes` / :func:`dedup_groups`: identical-config detection, chunk by chunk.

Conventions: ``edge_index`` arguments are the npz convention ``(m, 2)`` rows ``[consumer, producer]``
unless the name says ``pyg``; every function returns new arrays (inputs may be read-only memmaps).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

import numpy as np
import scipy.sparse as sp

from features.dotdims import DotDims

# ---- SPEC §4 column blocks ---------------------------------------------------------------------
SHAPE_DIMS = slice(21, 27)
DIMENSIONS = slice(31, 37)
WINDOW_BLOCK_STARTS = (37, 45, 53, 61, 69, 77)  # size, stride, pad low, pad high, dilations (6 each)
WINDOW_SIZE = slice(37, 43)
WINDOW_REVERSAL = slice(85, 91)
CONV_SCALAR = (93, 94, 99, 100, 105, 106)  # batch/feature dim numbers (not per-dimension)
CONV_INPUT_SPATIAL = slice(95, 99)
CONV_KERNEL_SPATIAL = slice(101, 105)
SLICE_BLOCKS = (109, 113, 117)  # start, stride, limit: 2 dims each
DYN_SLICE_SIZES = 121
PAD_BLOCKS = (125, 129)  # low, high: 2 dims each
MINOR_TO_MAJOR = slice(134, 140)
MAX_RANK = 6

# Columns with a large range that get a signed log1p (dims, sums, products, counts, window fields,
# slice/pad values). Dimension *indices* (dimensions, dim numbers, minor_to_major) stay raw.
LOG_COLUMNS = np.r_[21:31, 37:85, 107:109, 109:133]


@functools.lru_cache(maxsize=1)
def opcode_ids() -> dict[str, int]:
    """HLO opcode name -> id, from ``features/data/hlo_opcodes.tsv`` (Kaggle numbering)."""
    text = resources.files("features").joinpath("data/hlo_opcodes.tsv").read_text()
    out: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip().isdigit():
            out[parts[1].strip()] = int(parts[0])
    return out


def opcode_id(name: str) -> int:
    return opcode_ids()[name]


def signed_log1p(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: compresses large ranges, keeps ``-1`` padding negative and distinct."""
    x = np.asarray(x, dtype=np.float32)
    return (np.sign(x) * np.log1p(np.abs(x))).astype(np.float32)


# ---- structure ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Csr:
    """Producers (operands) of every node, in the edge order of the file."""

    indptr: np.ndarray
    indices: np.ndarray

    def of(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node]:self.indptr[node + 1]]


def producers_csr(num_nodes: int, edge_index: np.ndarray) -> Csr:
    """Operands of each node (``edge_index`` rows are ``[consumer, producer]``), file order kept."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(e[:, 0], kind="stable")
    counts = np.bincount(e[:, 0], minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Csr(indptr, e[order, 1])


def topo_order(num_nodes: int, edge_index: np.ndarray) -> np.ndarray:
    """A topological order (producers first). Identity when the file is already ordered (SPEC §3)."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    if e.size == 0 or bool(np.all(e[:, 0] > e[:, 1])):
        return np.arange(num_nodes, dtype=np.int64)
    consumers = sp.csr_matrix((np.ones(len(e), np.int8), (e[:, 1], e[:, 0])), shape=(num_nodes,) * 2)
    indeg = np.bincount(e[:, 0], minlength=num_nodes)
    frontier = np.flatnonzero(indeg == 0)
    order: list[np.ndarray] = []
    while frontier.size:
        order.append(frontier)
        nxt = consumers[frontier].indices
        np.subtract.at(indeg, nxt, 1)
        frontier = np.unique(nxt[indeg[nxt] == 0])
    out = np.concatenate(order) if order else np.zeros(0, np.int64)
    if out.size != num_nodes:
        raise ValueError("edge_index has a cycle: not a dataflow graph")
    return out


def node_depths(num_nodes: int, edge_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest-path depth from the sources and to the sinks (both 0 at the ends)."""
    csr = producers_csr(num_nodes, edge_index)
    order = topo_order(num_nodes, edge_index)
    depth = np.zeros(num_nodes, np.int64)
    rdepth = np.zeros(num_nodes, np.int64)
    indptr, ind = csr.indptr, csr.indices
    for u in order:
        a, b = indptr[u], indptr[u + 1]
        if b > a:
            depth[u] = depth[ind[a:b]].max() + 1
    for u in order[::-1]:
        a, b = indptr[u], indptr[u + 1]
        if b > a:
            ops = ind[a:b]
            rdepth[ops] = np.maximum(rdepth[ops], rdepth[u] + 1)
    return depth, rdepth


def structure_features(num_nodes: int, edge_index: np.ndarray) -> np.ndarray:
    """(n, 5): log1p in-degree (operands), log1p out-degree (users), depth / max, reverse depth /
    max, log1p depth — computed on the *original* graph, before pruning."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    indeg = np.bincount(e[:, 0], minlength=num_nodes)
    outdeg = np.bincount(e[:, 1], minlength=num_nodes)
    depth, rdepth = node_depths(num_nodes, e)
    longest = max(1, int(depth.max(initial=0)))
    return np.stack([np.log1p(indeg), np.log1p(outdeg), depth / longest, rdepth / longest,
                     np.log1p(depth)], axis=1).astype(np.float32)


STRUCTURE_NAMES = ("log_in_degree", "log_out_degree", "depth_frac", "rdepth_frac", "log_depth")


# ---- pruning -----------------------------------------------------------------------------------
@dataclass
class PruneResult:
    """A pruned graph: ``kept`` original ids (sorted), ``edge_index_pyg`` (2, m) in new positions,
    source = producer, target = consumer; ``num_rewired`` edges added by rewiring."""

    kept: np.ndarray
    edge_index_pyg: np.ndarray
    num_rewired: int
    num_orig_edges: int

    def positions(self, orig_ids: np.ndarray) -> np.ndarray:
        """Positions in the pruned graph of original node ids (which must be kept)."""
        pos = np.searchsorted(self.kept, orig_ids)
        clipped = np.minimum(pos, len(self.kept) - 1)
        if np.any(pos >= len(self.kept)) or np.any(self.kept[clipped] != orig_ids):
            raise ValueError("node not kept by pruning")
        return pos


def k_hop_nodes(num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Boolean mask of nodes within ``hops`` undirected hops of ``seeds`` (hops < 0: all nodes)."""
    if hops < 0:
        return np.ones(num_nodes, bool)
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    keep = np.zeros(num_nodes, bool)
    keep[np.asarray(seeds, np.int64)] = True
    if hops == 0 or e.size == 0:
        return keep
    adj = sp.csr_matrix((np.ones(2 * len(e), np.int8),
                         (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])), shape=(num_nodes,) * 2)
    frontier = np.flatnonzero(keep)
    for _ in range(hops):
        nbrs = np.unique(adj[frontier].indices)
        frontier = nbrs[~keep[nbrs]]
        if frontier.size == 0:
            break
        keep[frontier] = True
    return keep


def rewire_edges(num_nodes: int, edge_index: np.ndarray, keep: np.ndarray,
                 max_sources: int = 0) -> set[tuple[int, int]]:
    """Pairs ``(producer, consumer)`` of kept nodes joined by a path whose inner nodes are all removed.

    One pass in topological order: ``sources[r]`` is the set of kept nodes reaching removed node ``r``
    through removed nodes only; a kept consumer of ``r`` inherits an edge from each of them.
    Sets are shared, not copied, along chains of single-operand removed nodes.

    ``max_sources > 0`` caps each set to the sources latest in topological order (the nearest
    ones): densely cross-linked removed regions would otherwise add O(kept^2) edges. With the
    cap, reachability between kept nodes is usually, but no longer provably, preserved.
    """
    csr = producers_csr(num_nodes, edge_index)
    sources: dict[int, frozenset[int]] = {}
    pairs: set[tuple[int, int]] = set()
    empty: frozenset[int] = frozenset()
    for u in topo_order(num_nodes, edge_index).tolist():
        ops = csr.of(u).tolist()
        removed_ops = [p for p in ops if not keep[p]]
        if keep[u]:
            for p in removed_ops:
                pairs.update((s, u) for s in sources.get(p, empty))
            continue
        inherited = [sources[p] for p in removed_ops if sources.get(p)]
        kept_ops = frozenset(p for p in ops if keep[p])
        if not kept_ops and len(inherited) == 1:
            sources[u] = inherited[0]
        elif kept_ops or inherited:
            merged = kept_ops.union(*inherited)
            if max_sources and len(merged) > max_sources:
                merged = frozenset(heapq.nlargest(max_sources, merged))
            sources[u] = merged
    return pairs


def prune_graph(num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int,
                rewire: bool = True, max_sources: int = 0) -> PruneResult:
    """Keep ``seeds`` (configurable nodes) and their ``hops``-hop neighbourhood; optionally rewire.

    ``hops < 0`` keeps the whole graph, and so does an empty ``seeds`` (a graph without
    configurable nodes would otherwise vanish). Every seed is always kept, and with ``rewire`` (and
    no ``max_sources`` cap, see :func:`rewire_edges`) the reachability between kept nodes equals
    that of the original graph.
    """
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    keep = k_hop_nodes(num_nodes, e, seeds, hops if len(seeds) else -1)
    kept = np.flatnonzero(keep)
    new_pos = np.full(num_nodes, -1, np.int64)
    new_pos[kept] = np.arange(len(kept))
    both = keep[e[:, 0]] & keep[e[:, 1]] if e.size else np.zeros(0, bool)
    src = new_pos[e[both, 1]]
    dst = new_pos[e[both, 0]]
    n_rewired = 0
    if rewire and not keep.all():
        pairs = rewire_edges(num_nodes, e, keep, max_sources)
        if pairs:
            rp = np.array(sorted(pairs), dtype=np.int64)
            existing = set(zip(src.tolist(), dst.tolist()))
            new = [(a, b) for a, b in zip(new_pos[rp[:, 0]].tolist(), new_pos[rp[:, 1]].tolist())
                   if (a, b) not in existing]
            if new:
                arr = np.array(new, dtype=np.int64)
                src, dst = np.r_[src, arr[:, 0]], np.r_[dst, arr[:, 1]]
                n_rewired = len(new)
    ei = np.stack([src, dst]).astype(np.int64) if len(src) else np.zeros((2, 0), np.int64)
    return PruneResult(kept=kept, edge_index_pyg=ei, num_rewired=n_rewired, num_orig_edges=int(len(e)))


# ---- -1 re-padding -----------------------------------------------------------------------------
def tensor_rank(node_feat: np.ndarray) -> np.ndarray:
    """Rank of each node's output = number of non-zero shape dims (scalars and tuples: 0)."""
    return np.count_nonzero(np.asarray(node_feat)[:, SHAPE_DIMS], axis=1).astype(np.int64)


def _pad_beyond(x: np.ndarray, start: int, width: int, rank: np.ndarray) -> None:
    """In place: columns ``start + i`` for ``i >= rank`` (per row) become -1."""
    cols = np.arange(width)
    mask = cols[None, :] >= np.minimum(rank, width)[:, None]
    block = x[:, start:start + width]
    block[mask] = -1.0


def operand_max_rank(rank: np.ndarray, csr: Csr) -> np.ndarray:
    """Largest rank among each node's operands (0 without operands)."""
    n = len(rank)
    counts = np.diff(csr.indptr)
    out = np.zeros(n, np.int64)
    if csr.indices.size:
        has = counts > 0
        out[has] = np.maximum.reduceat(rank[csr.indices], csr.indptr[:-1][has])
    return out


def repad_node_feat(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray) -> np.ndarray:
    """Copy of ``node_feat`` with ``-1`` in every per-dimension entry beyond the relevant rank.

    Ranks used per block (SPEC §4):
    - shape dims, minor_to_major: the output rank (non-zero shape dims);
    - ``dimensions``: max(output rank, operand ranks) — reduce/broadcast list operand dims;
    - window fields, reversal, conv spatial dim numbers: the window rank (non-zero window sizes);
      conv batch/feature dim numbers are -1 on nodes that are not convolutions;
    - slice start/stride/limit, dynamic-slice sizes, pad low/high: min(rank, 2) on slice /
      dynamic-slice / pad nodes, all -1 elsewhere.
    """
    x = np.array(node_feat, dtype=np.float32, copy=True)
    op = np.asarray(node_opcode, dtype=np.int64)
    n = x.shape[0]
    rank = tensor_rank(x)
    csr = producers_csr(n, edge_index)
    _pad_beyond(x, SHAPE_DIMS.start, MAX_RANK, rank)
    _pad_beyond(x, MINOR_TO_MAJOR.start, MAX_RANK, rank)
    _pad_beyond(x, DIMENSIONS.start, MAX_RANK, np.maximum(rank, operand_max_rank(rank, csr)))
    wrank = np.count_nonzero(x[:, WINDOW_SIZE], axis=1)
    for start in WINDOW_BLOCK_STARTS:
        _pad_beyond(x, start, MAX_RANK, wrank)
    _pad_beyond(x, WINDOW_REVERSAL.start, MAX_RANK, wrank)
    _pad_beyond(x, CONV_INPUT_SPATIAL.start, 4, wrank)
    _pad_beyond(x, CONV_KERNEL_SPATIAL.start, 4, wrank)
    ids = opcode_ids()
    not_conv = op != ids["convolution"]
    x[np.ix_(not_conv, CONV_SCALAR)] = -1.0
    two = np.minimum(rank, 2)
    zero = np.zeros(n, np.int64)
    for start in SLICE_BLOCKS:
        _pad_beyond(x, start, 2, np.where(op == ids["slice"], two, zero))
    _pad_beyond(x, DYN_SLICE_SIZES, 2, np.where(op == ids["dynamic-slice"], two, zero))
    for start in PAD_BLOCKS:
        _pad_beyond(x, start, 2, np.where(op == ids["pad"], two, zero))
    return x


def repad_tile_config(config_feat: np.ndarray) -> np.ndarray:
    """Tile config (c, 24): in each 6-dim bounds block, entries after the last non-zero one -> -1.

    Bounds are sizes (>= 1 where defined), so trailing zeros are beyond the kernel's rank; an
    all-zero block (e.g. input bounds) becomes all -1. Sums/products are kept.
    """
    x = np.array(config_feat, dtype=np.float32, copy=True)
    cols = np.arange(MAX_RANK)
    for start in (0, 8, 16):
        block = x[:, start:start + MAX_RANK]
        nz = block != 0
        last = np.where(nz.any(axis=1), MAX_RANK - 1 - np.argmax(nz[:, ::-1], axis=1), -1)
        block[cols[None, :] > last[:, None]] = -1.0
    return x


# ---- dot-general dimension inference ----------------------------------------------------------
def _dot_output(lhs: tuple[int, ...], rhs: tuple[int, ...], lb: tuple[int, ...], rb: tuple[int, ...],
                lc: tuple[int, ...], rc: tuple[int, ...]) -> tuple[int, ...]:
    lfree = [d for d in range(len(lhs)) if d not in lb and d not in lc]
    rfree = [d for d in range(len(rhs)) if d not in rb and d not in rc]
    return tuple([lhs[d] for d in lb] + [lhs[d] for d in lfree] + [rhs[d] for d in rfree])


def _dot_penalty(lr: int, rr: int, lb: tuple[int, ...], rb: tuple[int, ...], lc: tuple[int, ...],
                 rc: tuple[int, ...]) -> tuple[int, ...]:
    """Prefer the canonical matmul: leading batch dims, lhs contracting last, rhs contracting first
    after the batch dims (``[b, m, k] x [b, k, n]``)."""
    nb = len(lb)
    return (int(lb != tuple(range(nb))) + int(rb != tuple(range(nb))),
            int(lc != tuple(range(lr - len(lc), lr))),
            int(rc != tuple(range(nb, nb + len(rc)))),
            len(lb))


@functools.lru_cache(maxsize=4096)
def infer_dot_dims(out_shape: tuple[int, ...], lhs_shape: tuple[int, ...],
                   rhs_shape: tuple[int, ...]) -> DotDims | None:
    """Dot-general dimension numbers consistent with the three shapes, or None if none is.

    XLA's output is ``batch dims + lhs free dims + rhs free dims`` (free dims in increasing order);
    batch and contracting dims must agree in size between the operands. With several consistent
    solutions (e.g. square matrices) the canonical ``[b, m, k] x [b, k, n]`` one is preferred.
    """
    lr, rr, orank = len(lhs_shape), len(rhs_shape), len(out_shape)
    best: tuple[tuple[int, ...], DotDims] | None = None
    for nb in range(min(lr, rr) + 1):
        twice_nc = lr + rr - nb - orank
        if twice_nc < 0 or twice_nc % 2:
            continue
        nc = twice_nc // 2
        if nb + nc > lr or nb + nc > rr:
            continue
        for lb in itertools.combinations(range(lr), nb):
            for rb in itertools.permutations(range(rr), nb):
                if any(lhs_shape[a] != rhs_shape[b] for a, b in zip(lb, rb)):
                    continue
                if tuple(lhs_shape[d] for d in lb) != tuple(out_shape[:nb]):
                    continue
                lrest = [d for d in range(lr) if d not in lb]
                rrest = [d for d in range(rr) if d not in rb]
                for lc in itertools.combinations(lrest, nc):
                    for rc in itertools.permutations(rrest, nc):
                        if any(lhs_shape[a] != rhs_shape[b] for a, b in zip(lc, rc)):
                            continue
                        if _dot_output(lhs_shape, rhs_shape, lb, rb, lc, rc) != tuple(out_shape):
                            continue
                        key = _dot_penalty(lr, rr, lb, rb, lc, rc)
                        if best is None or key < best[0]:
                            best = (key, DotDims(lc, rc, lb, rb, tuple(lhs_shape), tuple(rhs_shape)))
    return None if best is None else best[1]


def shapes_of(node_feat: np.ndarray, rank: np.ndarray, nodes: Iterable[int]) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in node_feat[i, SHAPE_DIMS][:rank[i]]) for i in nodes]


DOT_CONV_NAMES = tuple(
    [f"dot_lhs_contract_{i}" for i in range(6)] + [f"dot_rhs_contract_{i}" for i in range(6)]
    + [f"dot_lhs_batch_{i}" for i in range(6)] + [f"dot_rhs_batch_{i}" for i in range(6)]
    + [f"operand0_dim_{i}" for i in range(6)] + [f"operand1_dim_{i}" for i in range(6)]
    + ["dot_dims_known", "dot_dims_exact", "dot_log_k", "dot_log_m", "dot_log_n", "dot_k_mod128"])


def _mask(dims: tuple[int, ...], rank: int) -> np.ndarray:
    m = np.full(MAX_RANK, -1.0, np.float32)
    m[:min(rank, MAX_RANK)] = 0.0
    for d in dims:
        if d < MAX_RANK:
            m[d] = 1.0
    return m


def _log_prod(shape: tuple[int, ...], dims: Iterable[int]) -> float:
    return float(np.log1p(np.prod([shape[d] for d in dims], dtype=np.float64)))


def dot_dims_for_graph(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray,
                       exact: dict[int, DotDims] | None = None) -> dict[int, tuple[DotDims, bool]]:
    """``{dot node id: (DotDims, is_exact)}``; inferred from shapes unless ``exact`` has the node.

    Operands are taken in file edge order (lhs first); if that order admits no solution the
    swapped order is tried. A dot with a repeated operand (``x . x``) has a single edge.
    """
    n = node_feat.shape[0]
    csr = producers_csr(n, edge_index)
    rank = tensor_rank(node_feat)
    out: dict[int, tuple[DotDims, bool]] = {}
    for u in np.flatnonzero(np.asarray(node_opcode) == opcode_id("dot")).tolist():
        if exact and u in exact:
            out[u] = (exact[u], True)
            continue
        ops = csr.of(u).tolist()
        if not ops:
            continue
        lhs_id, rhs_id = (ops[0], ops[1]) if len(ops) >= 2 else (ops[0], ops[0])
        o, lhs, rhs = shapes_of(node_feat, rank, (u, lhs_id, rhs_id))
        dims = infer_dot_dims(o, lhs, rhs) or infer_dot_dims(o, rhs, lhs)
        if dims is not None:
            out[u] = (dims, False)
    return out


def dot_conv_features(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray,
                      exact: dict[int, DotDims] | None = None) -> np.ndarray:
    """(n, 42) features named :data:`DOT_CONV_NAMES`; ``-1`` where not applicable.

    Dots: contracting/batch masks per operand dim (1 = in the set, 0 = not, -1 = beyond rank),
    operand shapes (signed log1p), log sizes of K (contracted), M, N (free dims), K % 128.
    Convolutions: operand shapes (input, kernel) only.
    """
    n = node_feat.shape[0]
    feats = np.full((n, len(DOT_CONV_NAMES)), -1.0, np.float32)
    rank = tensor_rank(node_feat)
    csr = producers_csr(n, edge_index)
    for u in np.flatnonzero(np.asarray(node_opcode) == opcode_id("convolution")).tolist():
        ops = csr.of(u).tolist()[:2]
        for j, shape in enumerate(shapes_of(node_feat, rank, ops)):
            feats[u, 24 + 6 * j:24 + 6 * j + len(shape)] = signed_log1p(np.array(shape[:6], np.float32))
    dot_nodes = np.flatnonzero(np.asarray(node_opcode) == opcode_id("dot"))
    feats[dot_nodes, 36:38] = 0.0
    for u, (d, is_exact) in dot_dims_for_graph(node_feat, node_opcode, edge_index, exact).items():
        lr, rr = len(d.lhs_shape), len(d.rhs_shape)
        feats[u, 0:6] = _mask(d.lhs_contracting, lr)
        feats[u, 6:12] = _mask(d.rhs_contracting, rr)
        feats[u, 12:18] = _mask(d.lhs_batch, lr)
        feats[u, 18:24] = _mask(d.rhs_batch, rr)
        for j, shape in enumerate((d.lhs_shape, d.rhs_shape)):
            width = min(len(shape), 6)
            feats[u, 24 + 6 * j:24 + 6 * j + width] = signed_log1p(np.array(shape[:6], np.float32))
        lfree = [i for i in range(lr) if i not in d.lhs_contracting and i not in d.lhs_batch]
        rfree = [i for i in range(rr) if i not in d.rhs_contracting and i not in d.rhs_batch]
        k = int(np.prod([d.lhs_shape[i] for i in d.lhs_contracting], dtype=np.int64))
        feats[u, 36:42] = (1.0, float(is_exact), _log_prod(d.lhs_shape, d.lhs_contracting),
                           _log_prod(d.lhs_shape, lfree), _log_prod(d.rhs_shape, rfree), (k % 128) / 128)
    return feats


# ---- lane alignment and log transforms --------------------------------------------------------
LANE_NAMES = tuple([f"dim{i}_mod128" for i in range(6)] + [f"dim{i}_div128" for i in range(6)]
                   + ["log_minor_dim", "minor_dim_mod128", "second_minor_mod8"])


def lane_features(node_feat_padded: np.ndarray) -> np.ndarray:
    """(n, 15): ``dim % 128 / 128`` and ``log1p(dim // 128)`` of each shape dim (TPU lanes), and the
    size / alignment of the most-minor (lane) and second-minor (sublane, % 8) dims of the default
    layout. ``-1`` beyond the rank. Expects -1-padded features (shape dims < 0 are absent)."""
    x = node_feat_padded
    dims = x[:, SHAPE_DIMS]
    present = dims > 0
    mod = np.where(present, np.mod(dims, 128) / 128.0, -1.0)
    div = np.where(present, np.log1p(np.floor_divide(np.maximum(dims, 0), 128)), -1.0)
    n = x.shape[0]
    m2m = x[:, MINOR_TO_MAJOR].astype(np.int64)
    rows = np.arange(n)
    minor = np.where(m2m[:, 0] >= 0, dims[rows, np.clip(m2m[:, 0], 0, 5)], -1.0)
    second = np.where(m2m[:, 1] >= 0, dims[rows, np.clip(m2m[:, 1], 0, 5)], -1.0)
    extra = np.stack([np.where(minor > 0, np.log1p(np.maximum(minor, 0)), -1.0),
                      np.where(minor > 0, np.mod(minor, 128) / 128.0, -1.0),
                      np.where(second > 0, np.mod(second, 8) / 8.0, -1.0)], axis=1)
    return np.concatenate([mod, div, extra], axis=1).astype(np.float32)


def log_transform_columns(node_feat: np.ndarray) -> np.ndarray:
    """Copy with :data:`LOG_COLUMNS` replaced by their signed log1p."""
    x = np.array(node_feat, dtype=np.float32, copy=True)
    x[:, LOG_COLUMNS] = signed_log1p(x[:, LOG_COLUMNS])
    return x


# ---- config deduplication ---------------------------------------------------------------------
def config_row_hashes(rows: np.ndarray) -> np.ndarray:
    """(c, 2) uint64: a 128-bit BLAKE2b digest of each flattened config row (equal rows always
    collide; distinct rows practically never do). Rows should share one dtype, e.g. int8."""
    flat = np.ascontiguousarray(rows).reshape(rows.shape[0], -1)
    out = np.empty((flat.shape[0], 2), np.uint64)
    raw = out.view(np.uint8).reshape(-1, 16)
    for i in range(flat.shape[0]):
        raw[i] = np.frombuffer(hashlib.blake2b(flat[i].data, digest_size=16).digest(), np.uint8)
    return out


def dedup_groups(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: ``first`` = sorted index of the first occurrence of each distinct row,
    ``inverse[i]`` = position in ``first`` of row ``i``'s group."""
    h = np.ascontiguousarray(hashes).view(np.dtype((np.void, hashes.dtype.itemsize * hashes.shape[1])))
    _, first, inverse = np.unique(h.reshape(-1), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank_of[inverse.reshape(-1)].astype(np.int64)


def group_mean(values: np.ndarray, inverse: np.ndarray, num_groups: int) -> np.ndarray:
    """Mean of ``values`` per group (for runtimes of duplicate configs)."""
    sums = np.bincount(inverse, weights=np.asarray(values, np.float64), minlength=num_groups)
    counts = np.bincount(inverse, minlength=num_groups)
    return sums / np.maximum(counts, 1)
