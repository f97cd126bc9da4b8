"""Layout cost model (vectorised over configs) (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Sequence
import numpy as np

from features.sample.constants import COPY_OVERHEAD_NS, FUSED_ELEMENTWISE, HBM_BYTES_PER_NS, NO_COST, OP_OVERHEAD_NS, PEAK_FLOP_PER_NS, PROPAGATING, TYPE_BYTES
from features.sample.hlo import FlatGraph, Node, row_major


PERMS: dict[int, list[tuple[int, ...]]] = {r: list(itertools.permutations(range(r)))
                                           for r in range(0, 7)}
PERM_ID: dict[int, dict[tuple[int, ...], int]] = {r: {p: i for i, p in enumerate(ps)}
                                                  for r, ps in PERMS.items()}


def desc_id(rank: int) -> int:
    return PERM_ID[rank][row_major(rank)]


def complete_layout(minor: Sequence[int], rank: int) -> tuple[int, ...]:
    """A layout given by its most-minor dims; the remaining dims follow in descending order."""
    return tuple(minor) + tuple(d for d in range(rank - 1, -1, -1) if d not in minor)


def _sublanes(dtype: str) -> int:
    return {1: 32, 2: 16}.get(TYPE_BYTES.get(dtype, 4), 8)


def _major_disorder(p: tuple[int, ...]) -> float:
    """Fraction of out-of-order pairs among the major dims (row-major = 0)."""
    pairs = list(itertools.combinations(p[2:], 2))
    return sum(a < b for a, b in pairs) / len(pairs) if pairs else 0.0


@lru_cache(maxsize=None)
def padded_bytes_table(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Effective bytes of ``shape`` stored in TPU tiles, for every layout (perm id) of its rank.

    Padding of the two most-minor dims to (sublanes, 128); major dims out of row-major order
    cost up to 6 % more (strided DMA descriptors, worse HBM locality)."""
    r = len(shape)
    nbytes = TYPE_BYTES.get(dtype, 4)
    if r == 0:
        return np.array([float(nbytes)])
    sub = _sublanes(dtype)
    vals = []
    for p in PERMS[r]:
        minor = -(-shape[p[0]] // 128) * 128
        second = -(-shape[p[1]] // sub) * sub if r >= 2 else 1
        rest = math.prod(shape[d] for d in p[2:])
        vals.append(float(minor * second * rest * nbytes) * (1.0 + 0.06 * _major_disorder(p)))
    return np.array(vals)


#: the most-minor and second-most-minor dim of every layout (perm id) of a rank; -1: none
MINOR = {r: np.array([p[0] for p in PERMS[r]]) for r in range(1, 7)}
SECOND = {r: np.array([p[1] if r > 1 else -1 for p in PERMS[r]]) for r in range(1, 7)}


def _copy_cost(shape: tuple[int, ...], dtype: str, a, b) -> np.ndarray:
    """Cost of a transposing copy from layout ``a`` to ``b`` (0 where they agree)."""
    pad = padded_bytes_table(shape, dtype)
    cost = COPY_OVERHEAD_NS + 1.3 * (pad[a] + pad[b]) / HBM_BYTES_PER_NS
    return np.where(np.asarray(a) != np.asarray(b), cost, 0.0)


def _mxu_pad(n: int) -> float:
    return (-(-n // 128) * 128) / n


class LayoutCostModel:
    """Runtime (ns) of a whole program for many layout configs at once."""

    def __init__(self, fg: FlatGraph, config_ids: np.ndarray) -> None:
        self.fg = fg
        self.slot_of = {int(n): j for j, n in enumerate(config_ids)}

    def runtimes(self, out_ids: np.ndarray, in_ids: np.ndarray, k_ids: np.ndarray) -> np.ndarray:
        """``*_ids``: (c, nc) perm ids; -1 = compiler default. Returns (c,) float ns."""
        fg = self.fg
        var: list = [0] * len(fg.nodes)  # actual output layout of every node
        total = np.zeros(out_ids.shape[0])
        for u, nd in enumerate(fg.nodes):
            r = len(nd.shape)
            ops = fg.operands[u]
            j = self.slot_of.get(u)
            if j is not None:
                var[u] = self._resolve(out_ids, j, desc_id(r)) if r else 0
            elif nd.op in PROPAGATING and ops and fg.nodes[ops[0]].shape == nd.shape:
                var[u] = var[ops[0]]
            else:
                var[u] = desc_id(r) if r else 0
            if u < fg.entry_start and nd.op in NO_COST:
                continue
            total = total + self._node_cost(u, nd, ops, var, j, in_ids, k_ids)
        return total

    @staticmethod
    def _resolve(raw_ids: np.ndarray, j: int | None, actual):
        """The layout config slot ``j`` asks for (-1: ``actual``); ``actual`` if not configurable."""
        return actual if j is None else np.where(raw_ids[:, j] < 0, actual, raw_ids[:, j])

    def _node_cost(self, u: int, nd: Node, ops: list[int], var: list, j: int | None,
                   in_ids: np.ndarray, k_ids: np.ndarray):
        fg = self.fg
        if nd.op in NO_COST:
            if nd.op == "tuple" and u in fg.roots:  # program outputs must be row-major
                return sum(_copy_cost(fg.nodes[o].shape, fg.nodes[o].dtype, var[o],
                                      desc_id(len(fg.nodes[o].shape)))
                           for o in ops if fg.nodes[o].shape)
            return 0.0
        pad_out = padded_bytes_table(nd.shape, nd.dtype)[var[u]]
        if nd.op in ("convolution", "dot", "reshape"):
            x = ops[0]
            sx = fg.nodes[x]
            in_v = self._resolve(in_ids, j, var[x])
            cost = _copy_cost(sx.shape, sx.dtype, var[x], in_v)
            pad_in = padded_bytes_table(sx.shape, sx.dtype)[in_v]
            if nd.op == "reshape":
                return cost + self._reshape_cost(nd, sx, in_v, var[u], pad_in, pad_out)
            w = ops[1] if len(ops) > 1 else x
            sw = fg.nodes[w]
            k_v = self._resolve(k_ids, j, var[w]) if nd.op == "convolution" else var[w]
            cost = cost + _copy_cost(sw.shape, sw.dtype, var[w], k_v)
            pad_w = padded_bytes_table(sw.shape, sw.dtype)[k_v]
            fn = self._conv_compute if nd.op == "convolution" else self._dot_compute
            t_c = fn(nd, sx, sw, in_v, k_v, var[u])
            t_m = (pad_in + pad_w + pad_out) / HBM_BYTES_PER_NS  # roofline, with little overlap
            return cost + (np.maximum(t_c, t_m) + 0.15 * np.minimum(t_c, t_m) + OP_OVERHEAD_NS)
        # memory-bound op: write + reads, elementwise ones fused
        frac = FUSED_ELEMENTWISE if nd.op in PROPAGATING else 1.0
        cost = OP_OVERHEAD_NS * frac + frac * pad_out / HBM_BYTES_PER_NS
        for i, o in enumerate(ops):
            so = fg.nodes[o]
            if not so.shape:
                continue
            read_v = var[o]
            if i == 0 and j is not None:  # other configurable ops (e.g. transpose): input slot
                read_v = self._resolve(in_ids, j, var[o])
                cost = cost + _copy_cost(so.shape, so.dtype, var[o], read_v)
            cost = cost + frac * padded_bytes_table(so.shape, so.dtype)[read_v] / HBM_BYTES_PER_NS
            if nd.op in PROPAGATING and i > 0 and so.shape == nd.shape:
                cost = cost + _copy_cost(so.shape, so.dtype, var[o], var[u])
        if nd.op == "reduce" and ops and fg.nodes[ops[0]].shape:
            src = fg.nodes[ops[0]]
            lane_red = np.isin(MINOR[len(src.shape)][var[ops[0]]], nd.attrs["dimensions"])
            pad_src = padded_bytes_table(src.shape, src.dtype)[var[ops[0]]]
            cost = cost + np.where(lane_red, 0.6 * pad_src / HBM_BYTES_PER_NS, 0.0)
        return cost

    @staticmethod
    def _reshape_cost(nd: Node, sx: Node, in_v, out_v, pad_in, pad_out):
        ri, ro = len(sx.shape), len(nd.shape)
        tiling_ok = bool(ri and ro and sx.shape[-1] == nd.shape[-1]
                         and (ri < 2 or ro < 2 or sx.shape[-2] == nd.shape[-2]
                              or (sx.shape[-2] % 8 == 0 and nd.shape[-2] % 8 == 0)))
        bitcast = (np.asarray(in_v) == desc_id(ri)) & (np.asarray(out_v) == desc_id(ro)) & tiling_ok
        copy = OP_OVERHEAD_NS + 1.3 * (pad_in + pad_out) / HBM_BYTES_PER_NS
        return np.where(bitcast, 0.0, copy)

    @staticmethod
    def _conv_compute(nd: Node, sx: Node, sw: Node, in_v, k_v, out_v):
        dn = nd.attrs["conv"]
        r = len(nd.shape)
        taps = math.prod(sw.shape[d] for d in dn["ksp"])
        cin, cout = sw.shape[dn["ki"]], nd.shape[dn["of"]]
        flops = 2.0 * math.prod(nd.shape) * taps * cin
        pen_in = np.where(MINOR[r][in_v] == dn["if_"], 1.0,
                          np.where(SECOND[r][in_v] == dn["if_"], 1.35, 1.8))
        pen_out = np.where(MINOR[r][out_v] == dn["of"], 1.0, 1.5)
        km, ks = MINOR[r][k_v], SECOND[r][k_v]
        pen_k = np.where((km == dn["ko"]) & (ks == dn["ki"]), 1.0,
                         np.where((km == dn["ki"]) & (ks == dn["ko"]), 1.12, 1.6))
        # the contraction runs over taps x input features (im2col-like), padded to the MXU
        return (flops * _mxu_pad(cin * taps) * _mxu_pad(cout) / PEAK_FLOP_PER_NS
                * pen_in * pen_out * pen_k)

    @staticmethod
    def _dot_compute(nd: Node, sx: Node, sw: Node, in_v, k_v, out_v):
        d = nd.attrs["dot"]
        ra, rb, ro = len(sx.shape), len(sw.shape), len(nd.shape)
        kdim = math.prod(sx.shape[i] for i in d["lc"])
        nfree = [i for i in range(rb) if i not in d["rc"] and i not in d["rb"]]
        ndim = math.prod(sw.shape[i] for i in nfree) if nfree else 1
        flops = 2.0 * math.prod(nd.shape) * kdim
        pen_a = np.where(np.isin(MINOR[ra][in_v], d["lc"]), 1.0,
                         np.where(np.isin(SECOND[ra][in_v], d["lc"]), 1.3, 1.7))
        pen_b = np.where(np.isin(SECOND[rb][k_v], d["rc"]) & np.isin(MINOR[rb][k_v], nfree), 1.0,
                         np.where(np.isin(MINOR[rb][k_v], d["rc"]), 1.1, 1.6))
        pen_o = np.where(MINOR[ro][out_v] == ro - 1, 1.0, 1.3) if ro else 1.0
        return (flops * _mxu_pad(kdim) * _mxu_pad(ndim) / PEAK_FLOP_PER_NS
                * pen_a * pen_b * pen_o)
