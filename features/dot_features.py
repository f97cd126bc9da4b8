"""Dot-general dimension numbers (:class:`DotDims`: inferred from shapes, docs/competition.md §7, or
read exactly from raw HLO protos by ``features.hlo``) and the per-node dot/conv features."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from features.columns import MAX_RANK, SHAPE_DIMS, opcode_ids, signed_log1p, tensor_rank
from features.pruning import producers_csr


@dataclass(frozen=True)
class DotDims:
    """Contracting and batch dimensions of a ``dot`` node (indices into the operand's logical
    shape, 0 = outermost, as in XLA's ``DotDimensionNumbers``), plus its operand shapes."""

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()
    lhs_shape: tuple[int, ...] = ()
    rhs_shape: tuple[int, ...] = ()


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
    for u in np.flatnonzero(np.asarray(node_opcode) == opcode_ids()["dot"]).tolist():
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
    for u in np.flatnonzero(np.asarray(node_opcode) == opcode_ids()["convolution"]).tolist():
        ops = csr.of(u).tolist()[:2]
        for j, shape in enumerate(shapes_of(node_feat, rank, ops)):
            feats[u, 24 + 6 * j:24 + 6 * j + len(shape)] = signed_log1p(np.array(shape[:6], np.float32))
    dot_nodes = np.flatnonzero(np.asarray(node_opcode) == opcode_ids()["dot"])
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
