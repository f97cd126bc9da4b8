"""A second, independently written cost physics for the sample generator (``--physics alt``).

Why: a ranker tuned on runtimes from one cost model can learn that model rather than anything that
carries over to a TPU; a modelling change is kept only when it helps under both physics. It shares
only the config encoding and opcode classes with ``layout_cost``/``tile_cost`` and draws no random
numbers, so the graphs and configs of a seed are the same under both physics. The machine it
models: docs/data.md, "A second cost physics".
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from features.sample.constants import NO_COST as FREE, PROPAGATING as ELEMENTWISE, TYPE_BYTES
from features.sample.hlo import FlatGraph, Node
from features.sample.layout_cost import PERM_ID, PERMS, LayoutCostModel, complete_layout, desc_id
from features.sample.tile_cost import tile_runtime

# ---- the alt machine -------------------------------------------------------------------------
LANES = 64
ROW_BYTES = 64
BURST = 256
BANK_STRIDE = 4096
BANK_PENALTY = 1.15
HBM_BYTES_PER_NS = 1.6e3
CACHE_BYTES = 24 * 2 ** 20
CACHE_SPEEDUP = 2.5
PEAK_FLOP_PER_NS = 2.0e5
F32_RATE = 0.25
ARRAY = 256
OVERLAP = 0.6
LAUNCH_NS = 1200.0
COPY_LAUNCH_NS = 1500.0
FUSED_FRACTION = 0.25
LOCAL_BYTES = 8 * 2 ** 20
BUFFERS = 3
STEP_NS = 250.0
TILE_LAUNCH_NS = 2000.0
TILE_BURST = 512


def _nbytes(dtype: str) -> int:
    return TYPE_BYTES.get(dtype, 4)


def _ceil(x: float, m: int) -> int:
    return int(-(-x // m) * m)


@lru_cache(maxsize=None)
def stored_bytes(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Bytes moved to stream an array in each layout: tile padding, burst waste, bank conflicts."""
    b = _nbytes(dtype)
    if not shape:
        return np.array([float(b)])
    rows = max(1, ROW_BYTES // b)
    out = []
    for p in PERMS[len(shape)]:
        transferred = _ceil(_ceil(shape[p[0]], LANES) * b, BURST)  # lane-padded minor run, in bursts
        second = _ceil(shape[p[1]], rows) if len(p) > 1 else 1
        rest = math.prod(shape[d] for d in p[2:]) if len(p) > 2 else 1
        total = float(transferred * second * rest)
        if len(p) > 1 and transferred % BANK_STRIDE == 0 and second >= 8:
            total *= BANK_PENALTY
        out.append(total)
    return np.array(out)


def _table(shape: tuple[int, ...], dtype: str, ids) -> np.ndarray:
    return stored_bytes(shape, dtype)[np.asarray(ids)]


def _overlap(compute, memory):
    return compute + memory - OVERLAP * np.minimum(compute, memory)


def _bandwidth(working_set) -> np.ndarray:
    return np.where(np.asarray(working_set) <= CACHE_BYTES, HBM_BYTES_PER_NS * CACHE_SPEEDUP,
                    HBM_BYTES_PER_NS)


def _pairwise(fn, a, b) -> np.ndarray:
    """``fn(a_id, b_id)`` over broadcast id arrays, each distinct pair computed once."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    pairs, inv = np.unique(np.stack([a.ravel(), b.ravel()], 1), axis=0, return_inverse=True)
    vals = np.array([fn(int(x), int(y)) for x, y in pairs])
    return vals[inv.reshape(-1)].reshape(a.shape)


def _copy_ns(factor: float, src: tuple[tuple[int, ...], str], a: int,
             dst: tuple[tuple[int, ...], str], b: int) -> float:
    """A relayouting copy from ``src`` (shape, dtype) in layout ``a`` to ``dst`` in ``b``:
    ``factor`` x the stored bytes read and written, plus a launch."""
    moved = stored_bytes(*src)[a] + stored_bytes(*dst)[b]
    return float(factor * moved / _bandwidth(moved) + COPY_LAUNCH_NS)


def _relayout(src: tuple[tuple[int, ...], str], dst: tuple[tuple[int, ...], str], perm, a, b
              ) -> np.ndarray:
    """ns of a copy transposing by ``perm`` from ``src`` in layout ids ``a`` to ``dst`` in ``b``
    (arrays broadcast); free where the physical order does not change."""
    r = len(dst[0])

    def one(x: int, y: int) -> float:
        pa, pb = PERMS[r][x], tuple(perm[d] for d in PERMS[r][y])  # physical orders, in src dims
        if r < 2 or pa == pb:
            return 0.0
        # same minor dim: a plain copy; the two minor dims swapped: x1.25; else x2
        factor = 1.0 if pa[0] == pb[0] else 1.25 if (pa[0], pa[1]) == (pb[1], pb[0]) else 2.0
        return _copy_ns(factor, src, x, dst, y)

    return _pairwise(one, a, b)


def copy_cost(shape: tuple[int, ...], dtype: str, a, b) -> np.ndarray:
    """ns to relayout an array from layout ids ``a`` to ``b`` (arrays broadcast)."""
    return _relayout((shape, dtype), (shape, dtype), range(len(shape)), a, b)


def _pad_array(d) -> np.ndarray:
    """Systolic-array padding of contraction / output-feature extents (work units)."""
    return np.where(d <= 128, 2.0 * np.ceil(d / 128) * 128, np.ceil(d / ARRAY) * ARRAY)


def _rate(dtype: str) -> float:
    return PEAK_FLOP_PER_NS * (F32_RATE if _nbytes(dtype) >= 4 else 1.0)


@lru_cache(maxsize=None)
def _factor_table(rank: int, best: tuple[int, ...], good: tuple[int, ...], good_f: float,
                  other_f: float, pos: int = 0) -> np.ndarray:
    """Per layout: 1 when the dim at physical position ``pos`` (0 = minor) is in ``best``,
    ``good_f`` when in ``good``, else ``other_f``."""
    at_pos = (p[pos] if pos < len(p) else -1 for p in PERMS[rank])
    return np.array([1.0 if d in best else good_f if d in good else other_f for d in at_pos])


# ---- layout graphs ---------------------------------------------------------------------------
def _default_id(nd: Node) -> int:
    r = len(nd.shape)
    return PERM_ID[r][tuple(nd.layout)] if nd.layout is not None and len(nd.layout) == r else desc_id(r)


class AltLayoutCostModel:
    """Runtimes (ns) of layout configs of one graph under the alt physics.

    Same interface as the TPU model: ``AltLayoutCostModel(fg, config_ids).runtimes(out, in, k)``
    with ``(c, nc)`` layout ids per configurable node (-1 = compiler default: the node's own
    layout, else row-major, for outputs; "as it is" for inputs).
    """

    def __init__(self, fg: FlatGraph, config_ids: np.ndarray) -> None:
        self.fg = fg
        self.slot = {int(u): j for j, u in enumerate(np.asarray(config_ids).reshape(-1).tolist())}

    def runtimes(self, out_ids: np.ndarray, in_ids: np.ndarray, k_ids: np.ndarray) -> np.ndarray:
        fg = self.fg
        lay: list = [0] * len(fg.nodes)
        total = np.zeros(out_ids.shape[0])
        for u in range(fg.entry_start, len(fg.nodes)):
            nd = fg.nodes[u]
            ops = fg.operands[u]
            j = self.slot.get(u)
            if j is not None:
                cost = self._configured(nd, ops, lay, u, out_ids[:, j], in_ids[:, j], k_ids[:, j])
            else:
                cost = self._plain(nd, ops, lay, u)
            total = total + cost
        return total + self._outputs(lay)

    # -- node kinds --------------------------------------------------------------------------
    def _requested(self, v: int, actual, req) -> tuple[np.ndarray, np.ndarray]:
        """(layout the op reads, copy cost to get it) for operand ``v``."""
        nd = self.fg.nodes[v]
        if len(nd.shape) < 2:
            return np.asarray(actual), np.zeros(())
        want = np.where(req < 0, actual, req)
        return want, copy_cost(nd.shape, nd.dtype, actual, want)

    def _configured(self, nd: Node, ops: list[int], lay: list, u: int, out, req_in, req_k):
        lay[u] = np.where(out < 0, _default_id(nd), out) if nd.shape else 0
        x, extra = self._requested(ops[0], lay[ops[0]], req_in)
        w = lay[ops[1]] if len(ops) > 1 else 0
        if nd.op == "convolution":
            w, extra_k = self._requested(ops[1], lay[ops[1]], req_k)
            extra = extra + extra_k
        return extra + self._compute(nd, ops, lay, x, w, lay[u])

    def _plain(self, nd: Node, ops: list[int], lay: list, u: int):
        same = [v for v in ops if self.fg.nodes[v].shape == nd.shape] if nd.op in ELEMENTWISE else []
        copies = 0.0
        if same and len(nd.shape) >= 2:  # elementwise: the layout most same-shape operands have
            cand = np.stack(np.broadcast_arrays(*[np.asarray(lay[v]) for v in same]), 0)
            votes = (cand[:, None] == cand[None, :]).sum(axis=1) * len(same) + np.arange(
                len(same)).reshape((-1,) + (1,) * (cand.ndim - 1))
            lay[u] = np.take_along_axis(cand, votes.argmax(axis=0)[None], 0)[0]
            copies = sum(copy_cost(nd.shape, self.fg.nodes[v].dtype, lay[v], lay[u]) for v in same)
        else:
            lay[u] = _default_id(nd)
        if nd.op in FREE:
            return 0.0
        if nd.op == "broadcast" or nd.op in ELEMENTWISE:  # fused: a share of the write
            out = _table(nd.shape, nd.dtype, lay[u])
            return copies + FUSED_FRACTION * out / _bandwidth(out)
        return self._compute(nd, ops, lay, lay[ops[0]] if ops else 0,
                             lay[ops[1]] if len(ops) > 1 else 0, lay[u])

    def _compute(self, nd: Node, ops: list[int], lay: list, x, w, out):
        """Cost of a node reading operand 0 in layout ``x``, operand 1 in ``w``, writing ``out``."""
        fg = self.fg
        if nd.op == "dot":
            return _dot_cost(nd, fg.nodes[ops[0]], fg.nodes[ops[1]], x, w, out)
        if nd.op == "convolution":
            return _conv_cost(nd, fg.nodes[ops[0]], fg.nodes[ops[1]], x, w, out)
        if nd.op == "reshape":
            return _reshape_cost(nd, fg.nodes[ops[0]], x, out)
        if nd.op == "transpose":
            sx = fg.nodes[ops[0]]
            return _relayout((sx.shape, sx.dtype), (nd.shape, nd.dtype), nd.attrs["dimensions"], x, out)
        if nd.op == "reduce":
            return _reduce_cost(nd, fg.nodes[ops[0]], x, out)
        return _memory_op(nd, [fg.nodes[v] for v in ops], [x] + [lay[v] for v in ops[1:]], out)

    def _outputs(self, lay: list):
        fg = self.fg
        root = len(fg.nodes) - 1
        outs = fg.operands[root] if fg.nodes[root].op == "tuple" else [root]
        return sum((copy_cost(fg.nodes[v].shape, fg.nodes[v].dtype, lay[v], desc_id(len(fg.nodes[v].shape)))
                    for v in outs if len(fg.nodes[v].shape) >= 2), 0.0)


def _memory_op(nd: Node, operands: list[Node], lays: list, out) -> np.ndarray:
    """Ops that only move data: read the operands in their layouts, write the output."""
    moved = sum((_table(o.shape, o.dtype, a) for o, a in zip(operands, lays)), np.zeros(()))
    moved = moved + _table(nd.shape, nd.dtype, out)
    return moved / _bandwidth(moved) + LAUNCH_NS


def _dot_cost(nd: Node, sx: Node, sw: Node, x, w, out) -> np.ndarray:
    lc, rc, lb, rb = (nd.attrs["dot"][k] for k in ("lc", "rc", "lb", "rb"))
    m_dims = [d for d in range(len(sx.shape)) if d not in lc and d not in lb]
    n_dims = [d for d in range(len(sw.shape)) if d not in rc and d not in rb]
    batch = math.prod(sx.shape[d] for d in lb)
    m = math.prod(sx.shape[d] for d in m_dims)
    k = math.prod(sx.shape[d] for d in lc)
    n = math.prod(sw.shape[d] for d in n_dims)
    work = 2.0 * batch * _ceil(m, 8) * _pad_array(k) * _pad_array(n) / _rate(nd.dtype)
    rx, rw, ro = len(sx.shape), len(sw.shape), len(nd.shape)
    extra, f_x = 0.0, 1.0
    if rx >= 2:
        minor_ok = _factor_table(rx, lc, (), 1.0, 0.0)
        second_ok = _factor_table(rx, lc, (), 1.15, 0.0, pos=1)
        f_x = np.where(minor_ok[np.asarray(x)] > 0, 1.0, second_ok[np.asarray(x)])
        needs = f_x == 0.0
        target = PERM_ID[rx][complete_layout(lc[-1:], rx)]  # last contracting dim minor
        extra = np.where(needs, copy_cost(sx.shape, sx.dtype, x, target), 0.0)
        f_x = np.where(needs, 1.0, f_x)
    f_w = 1.0
    if rw >= 2:
        best = np.array([1.0 if p[0] in n_dims and p[1] in rc else 1.1 if p[0] in rc else 1.4
                         for p in PERMS[rw]])
        f_w = best[np.asarray(w)]
    f_o = 1.0
    if ro >= 1:
        n_out = tuple(range(len(lb) + len(m_dims), ro))
        m_out = tuple(range(len(lb), len(lb) + len(m_dims)))
        f_o = _factor_table(ro, n_out, m_out, 1.3, 2.0)[np.asarray(out)]
    xb, wb, ob = _table(sx.shape, sx.dtype, x), _table(sw.shape, sw.dtype, w), _table(nd.shape, nd.dtype, out)
    memory = (xb + wb + ob * f_o) / _bandwidth(xb + wb + ob)
    return _overlap(work * f_x * f_w, memory) + LAUNCH_NS + extra


def _conv_cost(nd: Node, sx: Node, sw: Node, x, w, out) -> np.ndarray:
    r = len(nd.shape)
    ib, i_f, ki, ko, ob, of, ksp = (nd.attrs["conv"][k]
                                    for k in ("ib", "if_", "ki", "ko", "ob", "of", "ksp"))
    cin, cout = sx.shape[i_f], max(1, nd.shape[of])
    spatial = math.prod(nd.shape) / cout
    work = 2.0 * spatial * _pad_array(cout) * _ceil(cin, 64) * math.prod(sw.shape[d] for d in ksp)
    work /= _rate(nd.dtype)
    f_x = _factor_table(len(sx.shape), (i_f,), (ib,), 1.3 if sx.shape[ib] >= 64 else 2.5, 1.8)[np.asarray(x)]
    kt = np.array([1.0 if p[0] == ko and p[1] == ki else 1.2 if p[0] == ki else 1.6
                   for p in PERMS[len(sw.shape)]])
    f_w = kt[np.asarray(w)]
    f_o = _factor_table(r, (of,), (ob,), 1.2 if nd.shape[ob] >= 64 else 2.0, 1.7)[np.asarray(out)]
    moved = _table(sx.shape, sx.dtype, x) + _table(sw.shape, sw.dtype, w) + _table(nd.shape, nd.dtype, out)
    return _overlap(work * f_x * f_w * f_o, moved / _bandwidth(moved)) + LAUNCH_NS


def _reshape_cost(nd: Node, sx: Node, x, out) -> np.ndarray:
    ri, ro = len(sx.shape), len(nd.shape)
    rows = max(1, ROW_BYTES // _nbytes(nd.dtype))

    def one(a: int, b: int) -> float:
        bitcast = (a == desc_id(ri) and b == desc_id(ro)
                   and (ri == 0 or ro == 0 or sx.shape[-1] == nd.shape[-1])
                   and (min(ri, ro) < 2 or sx.shape[-2] == nd.shape[-2]
                        or (sx.shape[-2] % rows == 0 and nd.shape[-2] % rows == 0)))
        return 0.0 if bitcast else _copy_ns(1.5, (sx.shape, sx.dtype), a, (nd.shape, nd.dtype), b)

    return _pairwise(one, x, out)


def _reduce_cost(nd: Node, sx: Node, x, out) -> np.ndarray:
    dims = nd.attrs["dimensions"]
    ri = len(sx.shape)
    f = 1.0
    if ri >= 2:  # minor dim reduced: lane tree x1.1; else second-minor reduced: strided x1.3
        second = _factor_table(ri, (), dims, 1.3, 1.0, pos=1)[np.asarray(x)]
        f = np.where(_factor_table(ri, dims, (), 1.0, 0.0)[np.asarray(x)] > 0, 1.1, second)
    xb, obytes = _table(sx.shape, sx.dtype, x), _table(nd.shape, nd.dtype, out)
    return (xb * f + obytes) / _bandwidth(xb + obytes) + LAUNCH_NS


# ---- tile kernels ----------------------------------------------------------------------------
def alt_tile_runtime(info: dict, feats: np.ndarray) -> np.ndarray:
    """True runtime (ns) of a fused kernel for each tile config row, alt physics."""
    feats = np.asarray(feats)
    shape = np.array(info["out_shape"], np.float64)
    b = float(_nbytes(info["dtype"]))
    n = feats.shape[0]
    if shape.size == 0:
        return np.full(n, TILE_LAUNCH_NS + STEP_NS)
    unit = np.ones(len(shape))  # output tile extents (elements) from output_bounds (format units)
    unit[list(info["layout"])[:2]] = (128.0, 8.0)[:len(shape)]
    ext = np.minimum(np.maximum(feats[:, 8:8 + len(shape)].astype(np.float64), 1.0) * unit, shape)
    steps = np.prod(np.ceil(shape / ext), axis=1)
    tile = np.prod(ext, axis=1)
    minor = ext[:, list(info["layout"])[0]]
    rows = tile / minor
    contract = float(info["contract"])
    if contract:
        ks = tuple(info["kernel_shape"])
        cin = float(info["cin"]) or contract
        k_bound = np.maximum(feats[:, len(ks) - 2].astype(np.float64), 1.0) if len(ks) >= 2 else \
            np.full(n, cin / 8)
        k_slice = contract / cin * np.minimum(cin, k_bound * 8.0)
        ksteps = np.ceil(contract / k_slice)
        compute = 2.0 * np.ceil(rows / 8) * 8 * _pad_array(minor) * _pad_array(k_slice) / _rate(info["dtype"])
        load = (rows * k_slice + k_slice * minor) * b
        partial = np.where(ksteps > 1, 2.0 * tile * 4.0, 0.0)  # f32 partial sums re-read/written
        store = tile * b / ksteps
        grid = steps * ksteps
    else:
        in_per_out = float(info["in_bytes"]) / max(1.0, float(np.prod(shape)))
        compute = tile / 1024.0 * (2.0 if info.get("reduce") else 1.0)
        load = tile * in_per_out * (1.3 if info.get("kind") == "copy" else 1.0)
        partial = np.zeros(n)
        store = tile * b
        grid = steps
    dma_eff = np.minimum(1.0, minor * b / TILE_BURST) ** 0.5
    per_step_bytes = load + store + 0.25 * partial
    working = BUFFERS * (load + tile * b)
    spill = np.maximum(0.0, working - LOCAL_BYTES)
    memory = per_step_bytes / (HBM_BYTES_PER_NS * dma_eff) + 2.0 * spill / HBM_BYTES_PER_NS
    per_step = np.maximum(compute, memory) + STEP_NS
    fill = (load + store) / (HBM_BYTES_PER_NS * dma_eff)  # first load and last store exposed
    return TILE_LAUNCH_NS + grid * per_step + fill


# ---- choosing a physics ----------------------------------------------------------------------
_MODELS = {"tpu": (LayoutCostModel, tile_runtime), "alt": (AltLayoutCostModel, alt_tile_runtime)}
PHYSICS: tuple[str, ...] = tuple(_MODELS)


def cost_models(physics: str = "tpu") -> tuple[type, object]:
    """(layout cost model class, tile runtime function) of a physics: ``tpu`` (the generator's
    own, ``layout_cost``/``tile_cost``) or ``alt`` (this module)."""
    if physics not in _MODELS:
        raise ValueError(f"unknown physics {physics!r}; expected one of {PHYSICS}")
    return _MODELS[physics]
