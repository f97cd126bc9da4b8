"""Generated TpuGraphs-like sample data: ``python -m features.sample --out DIR --scale tiny|small``.

The generator writes a dataset in the exact Kaggle layout (SPEC §2–§5) so that every stage of the
pipeline can run, be tested and be scored without the 6 GB download:

    DIR/npz_all/npz/tile/xla/{train,valid,test}/<stem>.npz
    DIR/npz_all/npz/layout/{xla,nlp}/{default,random}/{train,valid,test}/<stem>.npz
    DIR/sample_submission.csv            one row per test graph (ID,TopConfigs)
    DIR/hidden/test_runtimes.npz         true targets of the test files, by submission ID
    DIR/.complete                        written last (the whole tree appears by one rename)

Test files carry ``config_runtime`` all zeros (tile normalizers kept), as on Kaggle; the true
targets (tile: runtime/normalizer, layout: runtime) are kept apart in ``hidden/``.

Graphs
------
Graphs are built op by op with a small HLO builder (:class:`HloBuilder`) from real model motifs,
with consistent shapes, and featurised exactly like the official featurizer (checked against the
reference arrays of ``data/real-tpu/reference``): per-dim entries beyond rank are 0, window /
slice / pad products default to 1, ``minor_to_major`` in 134–139, conv dimension numbers
``b01f_01io->b01f``, one small reducer computation per ``reduce`` placed before its caller, edges
``[consumer, producer]`` over unique operands plus caller -> root of each called computation,
nodes in topological order.

* ``nlp`` layout graphs: BERT-like encoder stacks — embeddings + layer norms (reduce / divide /
  rsqrt), Q/K/V dots on ``[B*S, H]``, reshapes to heads, transposes, batched attention dots,
  softmax parts (reduce-max, subtract, exp, reduce-sum, divide), GELU (or ReLU) feed-forward.
  Variants: pre-/post-LN, separate or fused QKV projection (sliced, K contracted on its last
  dim), with or without attention mask, ALBERT cross-layer weight sharing (one parameter feeds
  every layer), and training steps with the dense layers' backward dots (``x^T dY``, ``dY W^T``).
* ``xla`` layout graphs: mixed conv nets — ResNet-like (conv/BN/ReLU/residual, max-pool),
  UNet-like 2-D and 3-D (strided / transposed convolutions, concatenated skips) — plus a few
  transformer graphs. Batch norm is either the folded inference form or the training form.
  Training steps add the backward pass as JAX lowers it: ReLU masks (``select``),
  weight-gradient convolutions (``f01b_i01o->01bf``: batch contracted, so they want another
  layout than the forward conv reading the same activation), input-gradient convolutions with a
  ``reverse``d kernel (``b01f_01oi->b01f``) and SGD updates.
* ``tile`` kernels: single fused kernels (conv + epilogue, dot + bias + activation,
  elementwise chains, row reductions, transposing copies) as a fused body computation followed by
  the calling ``fusion`` node, like the real op-level records.

Configurable nodes are convolutions, dots and reshapes (``configurable_ops`` can add others, e.g.
transpose). Layout configs follow the real encoding: for convolutions only the two most-minor
dims are given (``[3, 0, -1, -1, -1, -1]``), for dots and reshapes full permutations, ``-1`` =
compiler default.

Cost model (what the runtimes mean)
-----------------------------------
A TPU-like analytical model, in nanoseconds, every term physically motivated:

* **Tiling/padding.** An array is stored in (8, 128) tiles over its two most-minor dims (16 for
  2-byte, 32 for 1-byte types): the minor dim is padded to 128 lanes, the second-minor to 8
  sublanes. Every memory-bound op costs ``padded bytes / HBM bandwidth``, so a layout whose minor
  dim is small (3 channels, batch 2, head dim 64) wastes bandwidth, and the same layout is cheap
  or expensive depending on the tensor's shape. Major dims out of row-major order add up to 6 %
  (strided DMA), a small effect that the *default* search mostly explores.
* **Layout propagation and copies.** Elementwise ops inherit the layout of their first operand,
  so one configured layout spreads through its elementwise neighbourhood (that whole chain pays
  its padding). Where a producer's actual layout disagrees with what a consumer asks for (a
  configured input layout, a second elementwise operand, the program output) a transposing copy
  is inserted (read + write of both layouts, 1.3x slower than streaming, plus a launch overhead).
  ``-1`` on an input slot means "take the operand as it is" (no copy).
* **Reshapes** are free bitcasts only when both sides are row-major and the minor dim (and the
  8-aligned second-minor) is unchanged; otherwise they are physical copies.
* **MXU efficiency (conv, dot).** FLOPs are padded to the 128x128 MXU on the contracting and
  output-feature dims (feature counts that are not multiples of 128 waste work). The contracting
  dim should be the minor dim of the input (second-minor costs 1.35x, else 1.8x), the output
  feature dim the minor dim of the output (else 1.5x), the kernel should have its two feature
  dims minor (out-feature minor best). Time = max(compute, memory) + 15 % of the smaller
  (imperfect overlap) + launch overhead. Reductions over the lane (minor) dim cost extra
  cross-lane work.
* **Tile kernels.** Tile extents come from ``output_bounds``/``kernel_bounds`` in tile units
  (128 lanes for the minor dim, 8 sublanes for the second-minor, elements otherwise, following the
  root's ``minor_to_major``). Cost = steps x per-step pipeline overhead + max(padded MXU work /
  peak x fill efficiency, bytes moved / DMA-efficiency-scaled bandwidth); tiles that do not divide
  the shape waste work; a double-buffered working set above the 16 MiB VMEM budget spills
  (steep penalty); tiny tiles lose DMA efficiency and MXU fill; the software pipeline exposes
  the first load / last store and overlaps poorly with few steps; two TensorCores (megacore)
  split the output tiles, so a single tile (or an odd count) leaves a core idle. So neither
  "biggest tile" nor "smallest tile" is a good rule.
* **Measurement noise.** Layout runtimes get 0.15 % log-normal noise (the duplicate runs in the
  real 3-D UNet record differ by 0.02–0.34 %); tile runtimes 0.5 %, each row measured on one of
  three machines whose speed (±4 %) also scales that row's normalizer (normalizers differ per row;
  runtime/normalizer stays consistent). The normalizer is the compiler-default tile's runtime.
  Config rows are shuffled (no positional leak: the default is not row 0).
* **Searches.** *random*: every configurable node gets random layouts (10 % left at -1), wide
  runtime spread. *default*: the compiler default (all -1) plus a few perturbed nodes per
  config, tightly clustered runtimes. Both contain duplicate configs (identical
  ``node_config_feat``, re-measured runtime).

Determinism: every graph draws from its own ``SeedSequence([seed, crc32(collection/split/idx)])``,
so the output is byte-identical for a seed and independent of generation order.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import math
import os
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from features.collections import COLLECTIONS, hidden_runtimes_path, npz_dir

# --------------------------------------------------------------------------------------------
# Constants: opcodes, element types, hardware
# --------------------------------------------------------------------------------------------

_OPCODE_TSV = Path(__file__).resolve().parent / "data" / "hlo_opcodes.tsv"


def _load_opcodes() -> dict[str, int]:
    ids: dict[str, int] = {}
    for line in _OPCODE_TSV.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip().isdigit():
            ids[parts[1].strip()] = int(parts[0])
    return ids


OPCODE_IDS = _load_opcodes()
ELEMENT_TYPES = ("invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16",
                 "f32", "f64", "bf16", "c64", "c128", "tuple", "opaque", "token")
TYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
              "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
#: ops whose output takes the layout of their first operand (layout propagation)
PROPAGATING = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum",
                         "exponential", "tanh", "rsqrt", "sqrt", "negate", "abs", "log",
                         "convert", "select", "compare", "power", "logistic", "clamp"})
NO_COST = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})

PEAK_FLOP_PER_NS = 1.2e5  # ~120 TFLOP/s
HBM_BYTES_PER_NS = 1.0e3  # ~1 TB/s
OP_OVERHEAD_NS = 350.0
COPY_OVERHEAD_NS = 900.0
FUSED_ELEMENTWISE = 0.35  # elementwise ops are fused: they pay a fraction of their bytes
VMEM_BUDGET = 16 * 2 ** 20
LAYOUT_NOISE = 0.0015
TILE_NOISE = 0.005
MACHINE_SPEED = (1.0, 1.04, 0.965)


@dataclass(frozen=True)
class ScaleSpec:
    """Sizes of one scale (see the README ``sample`` section)."""

    tile_counts: tuple[int, int, int]
    tile_nodes: tuple[int, int]
    tile_configs: tuple[int, int]
    layout_counts: tuple[int, int, int]
    nlp_nodes: tuple[int, int]
    xla_nodes: tuple[int, int]
    configurable: tuple[int, int]
    layout_configs: tuple[int, int]
    test_configs: int | None  # None: same range as train


SCALES: dict[str, ScaleSpec] = {
    "tiny": ScaleSpec((12, 4, 4), (5, 40), (15, 40), (4, 2, 2), (60, 300), (60, 300), (3, 12),
                      (24, 48), None),
    "small": ScaleSpec((160, 32, 32), (3, 60), (20, 120), (20, 6, 6), (300, 1500), (400, 2500),
                       (8, 60), (200, 600), 300),
}


# --------------------------------------------------------------------------------------------
# HLO builder and featurizer
# --------------------------------------------------------------------------------------------


@dataclass
class Node:
    op: str
    shape: tuple[int, ...]
    dtype: str = "f32"
    operands: tuple[int, ...] = ()
    attrs: dict = field(default_factory=dict)
    calls: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = None  # minor_to_major; None = row-major (descending)


def row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


class HloBuilder:
    """Builds computations op by op; :meth:`finalize` flattens them into a graph."""

    def __init__(self) -> None:
        self.comps: list[list[Node]] = []
        self.entry = self.new_comp()
        self.cur = self.entry
        #: forward convolutions (x, w, conv, activation or None, stride, lhs_dilation) when
        #: a training graph records them for its backward pass
        self.trace: list[tuple[int, int, int, int | None, int, int]] | None = None
        #: dense layers (x, w, dot) of a training transformer, for its backward pass
        self.dense_trace: list[tuple[int, int, int]] | None = None
        #: ALBERT-style cross-layer weight sharing: weights by (slot in layer, shape)
        self.shared: dict[tuple, int] | None = None
        self.layer_slot = 0

    # -- structure ------------------------------------------------------------------------
    def new_comp(self) -> int:
        self.comps.append([])
        return len(self.comps) - 1

    def add(self, op: str, shape: Sequence[int], operands: Sequence[int] = (), dtype: str = "f32",
            comp: int | None = None, calls: Sequence[int] = (),
            layout: Sequence[int] | None = None, **attrs) -> int:
        nodes = self.comps[self.cur if comp is None else comp]
        nodes.append(Node(op, tuple(int(s) for s in shape), dtype, tuple(operands), attrs,
                          tuple(calls), tuple(layout) if layout is not None else None))
        return len(nodes) - 1

    def node(self, i: int) -> Node:
        return self.comps[self.cur][i]

    def shape(self, i: int) -> tuple[int, ...]:
        return self.comps[self.cur][i].shape

    def dtype(self, i: int) -> str:
        return self.comps[self.cur][i].dtype

    def num_nodes(self) -> int:
        return sum(len(c) for c in self.comps)

    # -- ops ------------------------------------------------------------------------------
    def param(self, shape: Sequence[int], dtype: str = "f32", **kw) -> int:
        n = sum(1 for x in self.comps[self.cur] if x.op == "parameter")
        return self.add("parameter", shape, (), dtype, parameter_number=n, **kw)

    def const(self, shape: Sequence[int] = (), dtype: str = "f32") -> int:
        return self.add("constant", shape, (), dtype)

    def bcast(self, x: int, shape: Sequence[int], dims: Sequence[int]) -> int:
        return self.add("broadcast", shape, (x,), self.dtype(x), dimensions=tuple(dims))

    def scalar_bcast(self, shape: Sequence[int], dtype: str = "f32") -> int:
        return self.bcast(self.const((), dtype), shape, ())

    def ew(self, op: str, *xs: int, dtype: str | None = None) -> int:
        return self.add(op, self.shape(xs[0]), xs, dtype or self.dtype(xs[0]))

    def reshape(self, x: int, shape: Sequence[int]) -> int:
        assert math.prod(shape) == math.prod(self.shape(x)), (shape, self.shape(x))
        return self.add("reshape", shape, (x,), self.dtype(x))

    def transpose(self, x: int, perm: Sequence[int]) -> int:
        s = self.shape(x)
        return self.add("transpose", [s[p] for p in perm], (x,), self.dtype(x),
                        dimensions=tuple(perm))

    def dot(self, a: int, b: int, lc: Sequence[int], rc: Sequence[int], lb: Sequence[int] = (),
            rb: Sequence[int] = ()) -> int:
        sa, sb = self.shape(a), self.shape(b)
        out = [sa[i] for i in lb] + [sa[i] for i in range(len(sa)) if i not in lc and i not in lb]
        out += [sb[i] for i in range(len(sb)) if i not in rc and i not in rb]
        return self.add("dot", out, (a, b), self.dtype(a),
                        dot=dict(lc=tuple(lc), rc=tuple(rc), lb=tuple(lb), rb=tuple(rb)))

    def conv(self, x: int, w: int, stride: int = 1, pad: int | None = None,
             lhs_dilation: int = 1) -> int:
        """NHWC / NDHWC convolution with an HWIO kernel (``b01f_01io->b01f``)."""
        sx, sw = self.shape(x), self.shape(w)
        nsp = len(sx) - 2
        ks = sw[:nsp]
        pads = [k // 2 if pad is None else pad for k in ks]
        spatial = []
        for d in range(nsp):
            size = (sx[1 + d] - 1) * lhs_dilation + 1
            spatial.append((size + 2 * pads[d] - ks[d]) // stride + 1)
        win = dict(size=list(ks), stride=[stride] * nsp, pad_lo=pads, pad_hi=pads,
                   wdil=[1] * nsp, bdil=[lhs_dilation] * nsp)
        dn = dict(ib=0, if_=nsp + 1, isp=list(range(1, nsp + 1)), ki=nsp, ko=nsp + 1,
                  ksp=list(range(nsp)), ob=0, of=nsp + 1)
        return self.add("convolution", [sx[0], *spatial, sw[-1]], (x, w), self.dtype(x),
                        window=win, conv=dn, feature_group_count=1, batch_group_count=1)

    def conv_general(self, x: int, w: int, out_shape: Sequence[int], size: Sequence[int],
                     pad: int, dn: dict, wdil: int = 1, bdil: int = 1) -> int:
        """A convolution with explicit dimension numbers (backward-pass convolutions)."""
        nsp = len(size)
        win = dict(size=list(size), stride=[1] * nsp, pad_lo=[pad] * nsp, pad_hi=[pad] * nsp,
                   wdil=[wdil] * nsp, bdil=[bdil] * nsp)
        return self.add("convolution", out_shape, (x, w), self.dtype(x), window=win, conv=dn,
                        feature_group_count=1, batch_group_count=1)

    def reverse(self, x: int, dims: Sequence[int]) -> int:
        return self.add("reverse", self.shape(x), (x,), self.dtype(x), dimensions=tuple(dims))

    def reducer(self, kind: str = "add", dtype: str = "f32") -> int:
        c = self.new_comp()
        a = self.add("parameter", (), (), dtype, comp=c, parameter_number=0)
        b = self.add("parameter", (), (), dtype, comp=c, parameter_number=1)
        self.add(kind, (), (a, b), dtype, comp=c)
        return c

    def reduce(self, x: int, dims: Sequence[int], kind: str = "add") -> int:
        s, dt = self.shape(x), self.dtype(x)
        out = [v for i, v in enumerate(s) if i not in dims]
        init = self.const((), dt)
        return self.add("reduce", out, (x, init), dt, calls=(self.reducer(kind, dt),),
                        dimensions=tuple(dims))

    def reduce_window(self, x: int, k: int, stride: int) -> int:
        s, dt = self.shape(x), self.dtype(x)
        nsp = len(s) - 2
        out = [s[0]] + [(v - k) // stride + 1 for v in s[1:-1]] + [s[-1]]
        r = len(s)
        win = dict(size=[1] + [k] * nsp + [1], stride=[1] + [stride] * nsp + [1],
                   pad_lo=[0] * r, pad_hi=[0] * r, wdil=[1] * r, bdil=[1] * r)
        init = self.const((), dt)
        return self.add("reduce-window", out, (x, init), dt, calls=(self.reducer("maximum", dt),),
                        window=win)

    def concat(self, xs: Sequence[int], dim: int) -> int:
        s = list(self.shape(xs[0]))
        s[dim] = sum(self.shape(x)[dim] for x in xs)
        return self.add("concatenate", s, xs, self.dtype(xs[0]), dimensions=(dim,))

    def slice(self, x: int, starts: Sequence[int], limits: Sequence[int]) -> int:
        out = [hi - lo for lo, hi in zip(starts, limits)]
        return self.add("slice", out, (x,), self.dtype(x),
                        slice=dict(start=list(starts), stride=[1] * len(out), limit=list(limits)))

    def tuple_(self, xs: Sequence[int]) -> int:
        return self.add("tuple", (), xs, "tuple", tuple_size=len(xs))

    # -- flattening -----------------------------------------------------------------------
    def finalize(self) -> "FlatGraph":
        order: list[int] = []
        seen: set[int] = set()

        def visit(c: int) -> None:  # callees before callers (proto order is topological)
            if c in seen:
                return
            seen.add(c)
            for nd in self.comps[c]:
                for cc in nd.calls:
                    visit(cc)
            order.append(c)

        visit(self.entry)
        offset, start = {}, 0
        for c in order:
            offset[c] = start
            start += len(self.comps[c])
        nodes: list[Node] = []
        edges: list[tuple[int, int]] = []
        roots: list[int] = []
        for c in order:
            base = offset[c]
            for i, nd in enumerate(self.comps[c]):
                u = base + i
                for v in dict.fromkeys(nd.operands):
                    edges.append((u, base + v))
                for cc in nd.calls:
                    edges.append((u, offset[cc] + len(self.comps[cc]) - 1))
                nodes.append(nd)
            roots.append(base + len(self.comps[c]) - 1)
        big = [offset[c] for c in order if len(self.comps[c]) >= 4]
        splits = sorted({0, *big, len(nodes)})
        return FlatGraph(nodes, np.array(edges, np.int64).reshape(-1, 2), set(roots),
                         np.array(splits, np.int64), offset[self.entry])


@dataclass
class FlatGraph:
    nodes: list[Node]
    edges: np.ndarray  # (m, 2) [consumer, producer]
    roots: set[int]
    splits: np.ndarray
    entry_start: int

    def operands(self, u: int) -> list[int]:
        """Global indices of the operands of node ``u`` (entry-relative mapping)."""
        return self._ops[u]

    def __post_init__(self) -> None:
        self._ops: list[list[int]] = [[] for _ in self.nodes]
        for u, v in self.edges.tolist():
            self._ops[u].append(v)


def _put_dims(f: np.ndarray, start: int, values: Sequence[int], width: int = 6,
              agg: bool = True) -> None:
    vals = list(values)[:width]
    f[start:start + len(vals)] = vals
    if agg:
        f[start + width] = sum(vals)
        f[start + width + 1] = math.prod(vals)


def featurize(fg: FlatGraph) -> np.ndarray:
    """node_feat (n, 140) float32 following SPEC §4 and the reference arrays' conventions."""
    feat = np.zeros((len(fg.nodes), 140), np.float32)
    for i, nd in enumerate(fg.nodes):
        f = feat[i]
        f[0] = float(i in fg.roots)
        f[2 + ELEMENT_TYPES.index(nd.dtype)] = 1.0
        _put_dims(f, 21, nd.shape)
        f[29] = nd.attrs.get("tuple_size", 0)
        f[30] = nd.attrs.get("parameter_number", 0)
        f[31:31 + len(nd.attrs.get("dimensions", ()))] = nd.attrs.get("dimensions", ())
        win = nd.attrs.get("window")
        for k, key in enumerate(("size", "stride", "pad_lo", "pad_hi", "wdil", "bdil")):
            _put_dims(f, 37 + 8 * k, win[key] if win else ())
        if win:
            f[92] = len(win["size"])  # reversal false count (nothing reversed)
        dn = nd.attrs.get("conv")
        if dn:
            f[93], f[94] = dn["ib"], dn["if_"]
            f[95:95 + len(dn["isp"])] = dn["isp"]
            f[99], f[100] = dn["ki"], dn["ko"]
            f[101:101 + len(dn["ksp"])] = dn["ksp"]
            f[105], f[106] = dn["ob"], dn["of"]
            f[107] = nd.attrs.get("feature_group_count", 1)
            f[108] = nd.attrs.get("batch_group_count", 1)
        sl = nd.attrs.get("slice", {})
        for k, key in enumerate(("start", "stride", "limit")):
            _put_dims(f, 109 + 4 * k, sl.get(key, ())[:2], width=2)
        _put_dims(f, 121, nd.attrs.get("dyn_sizes", ()), width=2)
        pad = nd.attrs.get("pad", {})
        _put_dims(f, 125, pad.get("lo", ()), width=2)
        _put_dims(f, 129, pad.get("hi", ()), width=2)
        f[133] = nd.attrs.get("is_stable", 0)
        if nd.shape:
            lay = nd.layout or row_major(len(nd.shape))
            f[134:134 + len(lay)] = lay
    return feat


# --------------------------------------------------------------------------------------------
# Model motifs
# --------------------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, options: Sequence):
    return options[int(rng.integers(len(options)))]


def _batch_norm(b: HloBuilder, x: int, train: bool) -> int:
    s = b.shape(x)
    c = s[-1]
    r = len(s)
    scale, shift = b.param((c,)), b.param((c,))
    if train:
        axes = list(range(r - 1))
        cnt = b.scalar_bcast((c,))
        mean = b.ew("divide", b.reduce(x, axes), cnt)
        cen = b.ew("subtract", x, b.bcast(mean, s, (r - 1,)))
        var = b.ew("divide", b.reduce(b.ew("multiply", cen, cen), axes), cnt)
        inv = b.ew("rsqrt", b.ew("add", var, b.scalar_bcast((c,))))
        x = b.ew("multiply", cen, b.bcast(b.ew("multiply", inv, scale), s, (r - 1,)))
        return b.ew("add", x, b.bcast(shift, s, (r - 1,)))
    y = b.ew("multiply", x, b.bcast(scale, s, (r - 1,)))
    return b.ew("add", y, b.bcast(shift, s, (r - 1,)))


def _relu(b: HloBuilder, x: int) -> int:
    return b.ew("maximum", x, b.scalar_bcast(b.shape(x), b.dtype(x)))


def _conv_bn_relu(b: HloBuilder, x: int, cout: int, k: int, stride: int, train: bool,
                  act: bool = True, lhs_dilation: int = 1) -> int:
    nsp = len(b.shape(x)) - 2
    w = b.param([k] * nsp + [b.shape(x)[-1], cout], b.dtype(x))
    conv = b.conv(x, w, stride, lhs_dilation=lhs_dilation)
    y = _batch_norm(b, conv, train)
    y = _relu(b, y) if act else y
    if b.trace is not None:
        b.trace.append((x, w, conv, y if act else None, stride, lhs_dilation))
    return y


def _backward(b: HloBuilder, seed_grad: int, target: int) -> list[int]:
    """Backward pass of the traced convolutions, last first, as JAX lowers it: ReLU masks
    (select), weight-gradient convs (``f01b_i01o->01bf``), input-gradient convs with a reversed
    kernel (``b01f_01oi->b01f``) and SGD updates. Stops near ``target`` nodes."""
    updates: list[int] = []
    dy: int | None = None
    for x, w, conv, act, stride, lhs_dil in reversed(b.trace or []):
        if b.num_nodes() >= target - 30:
            break
        s, dt = b.shape(conv), b.dtype(conv)
        nsp = len(s) - 2
        if dy is None or b.shape(dy) != s:  # gradient from another branch: rescaled total
            src = seed_grad if dy is None else dy
            total = b.reduce(src, tuple(range(len(b.shape(src)))))
            dy = b.ew("multiply", b.bcast(total, s, ()), b.scalar_bcast(s, dt))
        if act is not None:
            mask = b.ew("compare", act, b.scalar_bcast(s, dt), dtype="pred")
            dy = b.add("select", s, (mask, dy, b.scalar_bcast(s, dt)), dt)
        ks = b.shape(w)
        k = ks[0]
        wgrad_dn = dict(ib=nsp + 1, if_=0, isp=list(range(1, nsp + 1)), ki=0, ko=nsp + 1,
                        ksp=list(range(1, nsp + 1)), ob=nsp, of=nsp + 1)
        dw = b.conv_general(x, dy, ks, s[1:-1], k // 2, wgrad_dn, wdil=stride)
        updates.append(b.ew("subtract", w, b.ew("multiply", dw, b.scalar_bcast(ks, dt))))
        if lhs_dil != 1:
            dy = None
            continue
        xs = b.shape(x)
        dgrad_dn = dict(ib=0, if_=nsp + 1, isp=list(range(1, nsp + 1)), ki=nsp + 1, ko=nsp,
                        ksp=list(range(nsp)), ob=0, of=nsp + 1)
        dy = b.conv_general(dy, b.reverse(w, range(nsp)), xs, ks[:nsp], k - 1 - k // 2,
                            dgrad_dn, bdil=stride)
    return updates


def _softmax(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    r = len(s)
    keep = tuple(range(r - 1))
    mx = b.bcast(b.reduce(x, (r - 1,), "maximum"), s, keep)
    e = b.ew("exponential", b.ew("subtract", x, mx))
    return b.ew("divide", e, b.bcast(b.reduce(e, (r - 1,)), s, keep))


def _classifier_head(b: HloBuilder, x: int, classes: int) -> int:
    s = b.shape(x)
    nsp = len(s) - 2
    pooled = b.ew("divide", b.reduce(x, tuple(range(1, nsp + 1))), b.scalar_bcast((s[0], s[-1])))
    w, bias = b.param((s[-1], classes)), b.param((classes,))
    logits = b.dot(pooled, w, (1,), (0,))
    logits = b.ew("add", logits, b.bcast(bias, b.shape(logits), (1,)))
    return _softmax(b, logits)


def build_resnet(b: HloBuilder, rng: np.random.Generator, target: int) -> list[int]:
    """ResNet/EfficientNet-like 2-D conv net; stops adding blocks near ``target`` nodes."""
    train = bool(rng.random() < 0.5)
    full_target = target
    if train:  # a training step: forward in about half the nodes, then the backward pass
        b.trace = []
        target = int(target * 0.6)
    batch = int(_pick(rng, [1, 2, 4, 8, 16, 32, 64]))
    size = int(_pick(rng, [32, 64, 96, 128, 224]))
    widths = _pick(rng, [(64, 128, 256, 512), (32, 64, 128, 256), (24, 40, 80, 112, 192),
                         (48, 96, 192, 384), (16, 32, 64, 128)])
    dtype = "bf16" if rng.random() < 0.4 else "f32"
    x = b.param((batch, size, size, 3), dtype)
    x = _conv_bn_relu(b, x, widths[0], int(_pick(rng, [3, 7])), 2, train)
    if rng.random() < 0.7 and b.shape(x)[1] >= 8:
        x = b.reduce_window(x, 3, 2)
    stage = 0
    per_stage = max(1, int(target / (len(widths) * 30)))
    blocks_in_stage = 0
    while b.num_nodes() < target - 60:
        cout = widths[min(stage, len(widths) - 1)]
        stride = 2 if blocks_in_stage == 0 and stage > 0 and b.shape(x)[1] >= 4 else 1
        y = _conv_bn_relu(b, x, cout, 3, stride, train)
        y = _conv_bn_relu(b, y, cout, 3, 1, train, act=False)
        if stride != 1 or b.shape(x)[-1] != cout:
            x = _conv_bn_relu(b, x, cout, 1, stride, train, act=False)
        x = _relu(b, b.ew("add", y, x))
        blocks_in_stage += 1
        if blocks_in_stage >= per_stage and stage < len(widths) - 1:
            stage, blocks_in_stage = stage + 1, 0
    probs = _classifier_head(b, x, int(_pick(rng, [10, 100, 1000])))
    if not train:
        return [probs]
    return [probs, *_backward(b, x, full_target)]


def build_unet(b: HloBuilder, rng: np.random.Generator, target: int, nsp: int) -> list[int]:
    """UNet-like encoder/decoder (2-D or 3-D) with transposed convs and concatenated skips."""
    train = bool(rng.random() < 0.6)
    full_target = target
    if train:
        b.trace = []
        target = int(target * 0.6)
    batch = int(_pick(rng, [1, 2, 4] if nsp == 3 else [2, 4, 8, 16]))
    size = int(_pick(rng, [16, 24, 32, 48, 64] if nsp == 3 else [64, 128, 160, 256]))
    base = int(_pick(rng, [16, 32, 48, 64]))
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    x = b.param([batch] + [size] * nsp + [int(_pick(rng, [1, 3, 4]))], dtype)
    label = x
    skips: list[int] = []
    width = base
    depth_budget = max(1, int(math.log2(size)) - 2)
    while True:
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        if len(skips) >= depth_budget or b.num_nodes() > target * 0.45:
            break
        skips.append(x)
        if rng.random() < 0.5:
            x = b.reduce_window(x, 2, 2)
        else:
            x = _conv_bn_relu(b, x, width, 3, 2, train)  # strided conv downsampling
        width *= 2
    while skips:
        skip = skips.pop()
        width //= 2
        x = _conv_bn_relu(b, x, width, 3, 1, train, lhs_dilation=2)  # transposed conv (x2)
        if b.shape(x)[1:-1] != b.shape(skip)[1:-1]:
            x = b.slice(x, [0] * len(b.shape(x)), list(b.shape(x)[:1]) + list(b.shape(skip)[1:-1])
                        + [b.shape(x)[-1]])
        x = b.concat([x, skip], len(b.shape(x)) - 1)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
    while b.num_nodes() < target - 30:  # refinement convs until the size target
        x = _conv_bn_relu(b, x, b.shape(x)[-1], 3, 1, train)
    w = b.param([1] * nsp + [b.shape(x)[-1], b.shape(label)[-1]], dtype)
    out = b.conv(x, w, 1)
    diff = b.ew("subtract", out, label)
    loss = b.reduce(b.ew("multiply", diff, diff), tuple(range(len(b.shape(diff)))))
    if not train:
        return [out, loss]
    return [out, loss, *_backward(b, x, full_target)]


def _layer_norm(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    r = len(s)
    keep = tuple(range(r - 1))
    n = b.scalar_bcast(s[:-1])
    mean = b.ew("divide", b.reduce(x, (r - 1,)), n)
    cen = b.ew("subtract", x, b.bcast(mean, s, keep))
    var = b.ew("divide", b.reduce(b.ew("multiply", cen, cen), (r - 1,)), n)
    inv = b.ew("rsqrt", b.ew("add", var, b.scalar_bcast(s[:-1])))
    y = b.ew("multiply", cen, b.bcast(inv, s, keep))
    y = b.ew("multiply", y, b.bcast(b.param((s[-1],)), s, (r - 1,)))
    return b.ew("add", y, b.bcast(b.param((s[-1],)), s, (r - 1,)))


def _dense(b: HloBuilder, x2: int, out: int) -> int:
    key = (b.layer_slot, b.shape(x2)[1], out)
    b.layer_slot += 1
    if b.shared is not None and key in b.shared:  # ALBERT: the same weights in every layer
        w, bias = b.shared[key]
    else:
        w, bias = b.param((b.shape(x2)[1], out), b.dtype(x2)), b.param((out,), b.dtype(x2))
        if b.shared is not None:
            b.shared[key] = (w, bias)
    y = b.dot(x2, w, (1,), (0,))
    if b.dense_trace is not None:
        b.dense_trace.append((x2, w, y))
    return b.ew("add", y, b.bcast(bias, b.shape(y), (1,)))


def _dense_backward(b: HloBuilder, seed_grad: int, target: int) -> list[int]:
    """Backward pass of the traced dense layers, last first: ``dW = x^T dY`` (dot contracting
    dim 0 of both), ``dX = dY W^T`` (contracting dim 1 of both) and SGD updates."""
    updates: list[int] = []
    dy: int | None = None
    for x2, w, y in reversed(b.dense_trace or []):
        if b.num_nodes() >= target - 20:
            break
        s, dt = b.shape(y), b.dtype(y)
        if dy is None or b.shape(dy) != s:  # gradient from another branch: rescaled total
            src = seed_grad if dy is None else dy
            total = b.reduce(src, tuple(range(len(b.shape(src)))))
            dy = b.ew("multiply", b.bcast(total, s, ()), b.scalar_bcast(s, dt))
        dw = b.dot(x2, dy, (0,), (0,))
        updates.append(b.ew("subtract", w, b.ew("multiply", dw, b.scalar_bcast(b.shape(w), dt))))
        dy = b.dot(dy, w, (1,), (1,))
    return updates


def _gelu(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    x3 = b.ew("multiply", b.ew("multiply", x, x), x)
    inner = b.ew("add", x, b.ew("multiply", x3, b.scalar_bcast(s)))
    t = b.ew("tanh", b.ew("multiply", inner, b.scalar_bcast(s)))
    return b.ew("multiply", b.ew("multiply", x, b.scalar_bcast(s)),
                b.ew("add", t, b.scalar_bcast(s)))


def _attention(b: HloBuilder, x: int, heads: int, fused_qkv: bool = False,
               masked: bool = True) -> int:
    """Multi-head self-attention. ``fused_qkv``: one dense to 3H, sliced into Q/K/V (K then
    contracts on its last dim); otherwise three denses with K transposed to (B, h, hd, S)."""
    bs, seq, hid = b.shape(x)
    hd = hid // heads
    x2 = b.reshape(x, (bs * seq, hid))
    if fused_qkv:
        qkv = b.transpose(b.reshape(_dense(b, x2, 3 * hid), (bs, seq, 3, heads, hd)),
                          (2, 0, 3, 1, 4))  # (3, B, h, S, hd)
        q, k, v = (b.reshape(b.slice(qkv, (i, 0, 0, 0, 0), (i + 1, bs, heads, seq, hd)),
                             (bs, heads, seq, hd)) for i in range(3))
        scores = b.dot(q, k, (3,), (3,), (0, 1), (0, 1))  # (B, h, S, S)
    else:
        def proj(perm: Sequence[int]) -> int:
            y = b.reshape(_dense(b, x2, hid), (bs, seq, heads, hd))
            return b.transpose(y, perm)

        q, k, v = proj((0, 2, 1, 3)), proj((0, 2, 3, 1)), proj((0, 2, 1, 3))
        scores = b.dot(q, k, (3,), (2,), (0, 1), (0, 1))  # (B, h, S, S)
    scores = b.ew("multiply", scores, b.scalar_bcast(b.shape(scores)))
    if masked:
        mask = b.param((bs, seq), "f32")
        scores = b.ew("add", scores, b.bcast(mask, b.shape(scores), (0, 3)))
    probs = _softmax(b, scores)
    ctx = b.dot(probs, v, (3,), (2,), (0, 1), (0, 1))  # (B, h, S, hd)
    ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3)), (bs * seq, hid))
    return b.reshape(_dense(b, ctx, hid), (bs, seq, hid))


def build_bert(b: HloBuilder, rng: np.random.Generator, target: int, shared: bool = False,
               train_prob: float = 0.3) -> list[int]:
    """BERT/ALBERT-like encoder stack; adds layers until ``target`` nodes. ``shared``: ALBERT's
    cross-layer weight sharing; a training step (probability ``train_prob``) adds the backward
    pass of the dense layers."""
    train = bool(rng.random() < train_prob)
    full_target = target
    if train:
        b.dense_trace = []
        target = int(target * 0.65)
    if shared:
        b.shared = {}
    batch = int(_pick(rng, [1, 2, 4, 8, 16, 32]))
    seq = int(_pick(rng, [64, 128, 256, 384, 512]))
    hid = int(_pick(rng, [128, 256, 312, 384, 512, 768, 1024]))
    heads = max(1, hid // int(_pick(rng, [32, 64, 64, 128])))
    while hid % heads:
        heads -= 1
    ffn = hid * int(_pick(rng, [2, 4, 4]))
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    x = b.param((batch, seq, hid), dtype)
    pos = b.param((seq, hid), dtype)
    x = _layer_norm(b, b.ew("add", x, b.bcast(pos, (batch, seq, hid), (1, 2))))
    pre_ln = bool(rng.random() < 0.35)  # pre-LN (x + f(LN(x))) or post-LN (LN(x + f(x)))
    fused = bool(rng.random() < 0.4)
    masked = bool(rng.random() < 0.8)
    act = _gelu if rng.random() < 0.8 else _relu

    def ffn_block(y: int) -> int:
        h = act(b, _dense(b, b.reshape(y, (batch * seq, hid)), ffn))
        return b.reshape(_dense(b, h, hid), (batch, seq, hid))

    while True:
        b.layer_slot = 0
        if pre_ln:
            x = b.ew("add", x, _attention(b, _layer_norm(b, x), heads, fused, masked))
            x = b.ew("add", x, ffn_block(_layer_norm(b, x)))
        else:
            x = _layer_norm(b, b.ew("add", x, _attention(b, x, heads, fused, masked)))
            x = _layer_norm(b, b.ew("add", x, ffn_block(x)))
        if b.num_nodes() >= target - 110:
            break
    b.layer_slot = 100
    cls = b.reshape(b.slice(x, (0, 0, 0), (batch, 1, hid)), (batch, hid))
    pooled = b.ew("tanh", _dense(b, cls, hid))
    probs = _softmax(b, _dense(b, pooled, int(_pick(rng, [2, 3, 10]))))
    if not train:
        return [probs]
    return [probs, *_dense_backward(b, probs, full_target)]


def build_layout_graph(source: str, rng: np.random.Generator, target: int) -> tuple[HloBuilder, str]:
    """One whole-program graph for the ``nlp`` or ``xla`` layout collections, with a family name."""
    b = HloBuilder()
    if source == "nlp":
        family = _pick(rng, ["bert", "albert", "electra", "roberta"])
        outs = build_bert(b, rng, target, shared=family == "albert")
    else:
        family = _pick(rng, ["resnet", "resnet", "efficientnet", "unet2d", "unet3d", "unet3d",
                             "transformer"])
        if family in ("resnet", "efficientnet"):
            outs = build_resnet(b, rng, target)
        elif family.startswith("unet"):
            outs = build_unet(b, rng, target, 3 if family == "unet3d" else 2)
        else:
            outs = build_bert(b, rng, target, train_prob=0.5)
    b.tuple_(outs)
    return b, family


# -- tile kernels ------------------------------------------------------------------------------


def build_tile_kernel(rng: np.random.Generator, target: int) -> tuple[HloBuilder, dict]:
    """A fused kernel: body computation (params ... root) then outer params and the fusion node.

    Returns the builder and a description used by the tile cost model.
    """
    b = HloBuilder()
    body = b.new_comp()
    b.cur = body
    kind = _pick(rng, ["conv", "conv", "dot", "dot", "elementwise", "reduce", "copy"])
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    info: dict = {"kind": kind, "dtype": dtype}
    if kind == "conv":
        n = int(_pick(rng, [1, 8, 16, 32, 64]))
        hw = int(_pick(rng, [7, 12, 14, 28, 56]))
        cin = int(_pick(rng, [3, 32, 64, 96, 128, 192, 256, 384, 512]))
        cout = int(_pick(rng, [32, 64, 128, 192, 256, 384, 512]))
        k = int(_pick(rng, [1, 3, 3, 5]))
        x, w = b.param((n, hw, hw, cin), dtype), b.param((k, k, cin, cout), dtype)
        y = b.conv(x, w)
        info.update(contract=k * k * cin, cin=cin, kernel_shape=(k, k, cin, cout))
    elif kind == "dot":
        m = int(_pick(rng, [128, 256, 512, 1024, 2048, 4096, 8192]))
        kk = int(_pick(rng, [64, 128, 256, 512, 768, 1024, 3072]))
        nn = int(_pick(rng, [64, 128, 256, 384, 768, 1024, 3072]))
        x, w = b.param((m, kk), dtype), b.param((kk, nn), dtype)
        y = b.dot(x, w, (1,), (0,))
        info.update(contract=kk, cin=kk, kernel_shape=(kk, nn))
    else:
        rank = int(_pick(rng, [3, 4] if kind == "reduce" else [2, 3, 4]))
        shape = [int(_pick(rng, [2, 8, 16, 32, 64, 128, 256, 384, 512, 1024])) for _ in range(rank)]
        y = b.param(shape, dtype)
        if kind == "copy":
            perm = list(rng.permutation(rank))
            y = b.transpose(y, perm) if perm != list(range(rank)) else b.ew("negate", y)
        info.update(contract=0, cin=0, kernel_shape=())
    ops = ["multiply", "add", "maximum", "subtract", "exponential", "tanh", "convert", "select"]
    while b.num_nodes() < target - 4:
        op = _pick(rng, ops)
        s = b.shape(y)
        if op in ("multiply", "add", "maximum", "subtract"):
            other = b.param(s[-1:], b.dtype(y)) if rng.random() < 0.5 else b.const((), b.dtype(y))
            dims = (len(s) - 1,) if b.shape(other) else ()
            y = b.ew(op, y, b.bcast(other, s, dims))
        elif op == "select":
            pred = b.ew("compare", y, b.scalar_bcast(s, b.dtype(y)), dtype="pred")
            y = b.add("select", s, (pred, y, b.scalar_bcast(s, b.dtype(y))), b.dtype(y))
        elif op == "convert":
            y = b.ew("convert", b.ew("convert", y, dtype="f32"), dtype=b.dtype(y))
        else:
            y = b.ew(op, y)
    if kind == "reduce":
        y = b.reduce(y, (len(b.shape(y)) - 1,))
        info["reduce"] = True
    root = y
    rank = len(b.shape(root))
    layout = row_major(rank)
    if kind == "conv" and rng.random() < 0.5 and rank == 4:
        layout = (3, 0, 2, 1)  # feature minor, batch second-minor (as in real conv kernels)
    for nd in b.comps[body]:  # layout assignment already ran: same-rank arrays share it
        if len(nd.shape) == rank and nd.op != "parameter":
            nd.layout = layout
    info["out_shape"] = b.shape(root)
    info["layout"] = layout
    info["in_bytes"] = sum(math.prod(nd.shape) * TYPE_BYTES.get(nd.dtype, 4)
                           for nd in b.comps[body] if nd.op == "parameter")
    # outer computation: one parameter per body parameter, then the fusion node (root)
    b.cur = b.entry
    outer = [b.param(nd.shape, nd.dtype) for nd in b.comps[body] if nd.op == "parameter"]
    b.add("fusion", info["out_shape"], outer, b.comps[body][root].dtype, calls=(body,),
          layout=layout)
    return b, info


# --------------------------------------------------------------------------------------------
# Layout cost model (vectorised over configs)
# --------------------------------------------------------------------------------------------

PERMS: dict[int, list[tuple[int, ...]]] = {r: list(itertools.permutations(range(r)))
                                           for r in range(0, 7)}
PERM_ID: dict[int, dict[tuple[int, ...], int]] = {r: {p: i for i, p in enumerate(ps)}
                                                  for r, ps in PERMS.items()}


def desc_id(rank: int) -> int:
    return PERM_ID[rank][row_major(rank)]


def complete_layout(minor: Sequence[int], rank: int) -> tuple[int, ...]:
    """A layout given by its most-minor dims; the remaining dims follow in descending order."""
    rest = [d for d in range(rank - 1, -1, -1) if d not in minor]
    return tuple(minor) + tuple(rest)


def _sublanes(dtype: str) -> int:
    return {1: 32, 2: 16}.get(TYPE_BYTES.get(dtype, 4), 8)


_PAD_CACHE: dict[tuple, np.ndarray] = {}


def _major_disorder(p: tuple[int, ...]) -> float:
    """Fraction of out-of-order pairs among the major dims (row-major = 0)."""
    major = p[2:]
    k = len(major)
    if k < 2:
        return 0.0
    inv = sum(1 for i in range(k) for j in range(i + 1, k) if major[i] < major[j])
    return inv / (k * (k - 1) / 2)


def padded_bytes_table(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Effective bytes of ``shape`` stored in TPU tiles, for every layout (perm id) of its rank.

    Padding of the two most-minor dims to (sublanes, 128); major dims out of row-major order
    cost up to 6 % more (strided DMA descriptors, worse HBM locality)."""
    key = (shape, dtype)
    if key not in _PAD_CACHE:
        r = len(shape)
        nbytes = TYPE_BYTES.get(dtype, 4)
        if r == 0:
            _PAD_CACHE[key] = np.array([float(nbytes)])
        else:
            sub = _sublanes(dtype)
            vals = []
            for p in PERMS[r]:
                minor = -(-shape[p[0]] // 128) * 128
                second = -(-shape[p[1]] // sub) * sub if r >= 2 else 1
                rest = math.prod(shape[d] for d in p[2:])
                vals.append(float(minor * second * rest * nbytes)
                            * (1.0 + 0.06 * _major_disorder(p)))
            _PAD_CACHE[key] = np.array(vals)
    return _PAD_CACHE[key]


def _minor_table(rank: int, pos: int) -> np.ndarray:
    return np.array([p[pos] if len(p) > pos else -1 for p in PERMS[rank]])


MINOR = {r: _minor_table(r, 0) for r in range(1, 7)}
SECOND = {r: _minor_table(r, 1) for r in range(1, 7)}

def _copy_cost(shape: tuple[int, ...], dtype: str, a, b) -> np.ndarray:
    """Cost of a transposing copy from layout ``a`` to ``b`` (0 where they agree)."""
    pad = padded_bytes_table(shape, dtype)
    cost = COPY_OVERHEAD_NS + 1.3 * (pad[a] + pad[b]) / HBM_BYTES_PER_NS
    return np.where(np.asarray(a) != np.asarray(b), cost, 0.0)


def _roofline(t_compute, t_mem):
    return np.maximum(t_compute, t_mem) + 0.15 * np.minimum(t_compute, t_mem) + OP_OVERHEAD_NS


def _mxu_pad(n: int) -> float:
    return (-(-n // 128) * 128) / n


class LayoutCostModel:
    """Runtime (ns) of a whole program for many layout configs at once."""

    def __init__(self, fg: FlatGraph, config_ids: np.ndarray) -> None:
        self.fg = fg
        self.config_ids = [int(i) for i in config_ids]
        self.slot_of = {n: j for j, n in enumerate(self.config_ids)}

    def runtimes(self, out_ids: np.ndarray, in_ids: np.ndarray, k_ids: np.ndarray) -> np.ndarray:
        """``*_ids``: (c, nc) perm ids; -1 = compiler default. Returns (c,) float ns."""
        fg = self.fg
        c = out_ids.shape[0]
        var: list = [0] * len(fg.nodes)  # actual output layout of every node
        total = np.zeros(c)
        for u, nd in enumerate(fg.nodes):
            r = len(nd.shape)
            ops = fg.operands(u)[:len(dict.fromkeys(nd.operands))]
            j = self.slot_of.get(u)
            if j is not None:
                raw = out_ids[:, j]
                var[u] = np.where(raw < 0, desc_id(r), raw) if r else 0
            elif nd.op in PROPAGATING and ops and fg.nodes[ops[0]].shape == nd.shape:
                var[u] = var[ops[0]]
            else:
                var[u] = desc_id(r) if r else 0
            if u < fg.entry_start and nd.op in NO_COST:
                continue
            total = total + self._node_cost(u, nd, ops, var, j, in_ids, k_ids)
        return total

    def _resolve(self, raw_ids: np.ndarray | None, j: int | None, actual):
        if j is None or raw_ids is None:
            return actual
        raw = raw_ids[:, j]
        return np.where(raw < 0, actual, raw)

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
            return cost + _roofline(t_c, (pad_in + pad_w + pad_out) / HBM_BYTES_PER_NS)
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


# --------------------------------------------------------------------------------------------
# Layout config searches
# --------------------------------------------------------------------------------------------


@dataclass
class SlotSpace:
    """The layout choices of one configurable node."""

    node: int
    op: str
    out_rank: int
    in_rank: int
    k_rank: int  # 0 when the node has no kernel slot
    two_minor: bool  # conv: only the two most-minor dims are specified
    shapes: tuple[tuple[int, ...], ...] = ()  # (out, in, kernel) shapes
    dtype: str = "f32"


def _slot_spaces(fg: FlatGraph, ids: np.ndarray) -> list[SlotSpace]:
    spaces = []
    for u in ids.tolist():
        nd = fg.nodes[u]
        ops = fg.operands(u)
        conv = nd.op == "convolution"
        k_shape = fg.nodes[ops[1]].shape if conv else ()
        spaces.append(SlotSpace(u, nd.op, len(nd.shape), len(fg.nodes[ops[0]].shape),
                                len(k_shape), conv,
                                (nd.shape, fg.nodes[ops[0]].shape, k_shape), nd.dtype))
    return spaces


def _layout_choices(rank: int, two_minor: bool) -> np.ndarray:
    """Perm ids a random search draws from (conv: any ordered pair of most-minor dims)."""
    if two_minor and rank > 2:
        pairs = itertools.permutations(range(rank), 2)
        return np.array([PERM_ID[rank][complete_layout(p, rank)] for p in pairs])
    return np.arange(len(PERMS[rank]))


def _random_layouts(rng: np.random.Generator, rank: int, two_minor: bool, n: int) -> np.ndarray:
    """``n`` random layouts (perm ids); 10 % are left at -1 (compiler default)."""
    if rank == 0:
        return np.full(n, -1)
    choices = _layout_choices(rank, two_minor)
    ids = choices[rng.integers(len(choices), size=n)]
    return np.where(rng.random(n) < 0.1, -1, ids)


_NEAR_CACHE: dict[tuple, list[int]] = {}


def _near_default_layout(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
                         two_minor: bool) -> int:
    """A layout the compiler's own search would try: mostly the row-major minor dim kept and the
    others reordered; never one that pads the tensor by more than 25 % over row-major."""
    rank = len(shape)
    if rank < 2:
        return -1 if rank == 0 else 0
    keep_minor = bool(rng.random() < 0.8)  # mostly the minor dim is kept
    key = (shape, dtype, two_minor, keep_minor)
    if key not in _NEAR_CACHE:
        pad = padded_bytes_table(shape, dtype)
        limit = 1.25 * pad[desc_id(rank)]
        ok = [i for i, p in enumerate(PERMS[rank])
              if i != desc_id(rank) and pad[i] <= limit
              and (not two_minor or rank <= 2 or p == complete_layout(p[:2], rank))]
        kept = [i for i in ok if PERMS[rank][i][0] == rank - 1]
        _NEAR_CACHE[key] = kept if keep_minor and kept else ok
    cands = _NEAR_CACHE[key]
    return int(cands[int(rng.integers(len(cands)))]) if cands else -1


def sample_layout_configs(rng: np.random.Generator, spaces: list[SlotSpace], n: int,
                          search: str) -> np.ndarray:
    """(n, nc, 3) perm ids (out, in, kernel), -1 = default; includes duplicate configs."""
    nc = len(spaces)
    cfg = np.full((n, nc, 3), -1, np.int64)
    ranks = [(s.out_rank, s.in_rank, s.k_rank) for s in spaces]
    if search == "random":
        for j, s in enumerate(spaces):
            for t in range(3):
                if ranks[j][t]:
                    cfg[:, j, t] = _random_layouts(rng, ranks[j][t], s.two_minor, n)
    else:  # default search: config 0 is the pure default, the others a few changes from it
        for c in range(1, n):
            for j in rng.permutation(nc)[:int(rng.geometric(0.55))]:
                s = spaces[int(j)]
                t = int(rng.integers(3 if s.k_rank else 2))
                cfg[c, j, t] = _near_default_layout(rng, s.shapes[t], s.dtype, s.two_minor)
    # duplicates: re-measured copies of earlier configs (identical features)
    n_dup = max(1, int(round(n * float(rng.uniform(0.03, 0.1))))) if n >= 10 else 0
    for c in rng.choice(np.arange(1, n), size=n_dup, replace=False):
        cfg[c] = cfg[int(rng.integers(c))]
    return cfg


def encode_layout(perm_id: int, rank: int, two_minor: bool) -> list[int]:
    if perm_id < 0 or rank == 0:
        return [-1] * 6
    p = PERMS[rank][perm_id]
    vals = list(p[:2]) if two_minor and rank > 2 else list(p)
    return vals + [-1] * (6 - len(vals))


def encode_node_config_feat(cfg: np.ndarray, spaces: list[SlotSpace]) -> np.ndarray:
    n, nc, _ = cfg.shape
    out = np.full((n, nc, 18), -1, np.float32)
    cache: dict[tuple, list[int]] = {}
    for j, s in enumerate(spaces):
        ranks = (s.out_rank, s.in_rank, s.k_rank)
        for t in range(3):
            if not ranks[t]:
                continue
            col = cfg[:, j, t]
            for v in np.unique(col).tolist():
                key = (v, ranks[t], s.two_minor)
                if key not in cache:
                    cache[key] = encode_layout(v, ranks[t], s.two_minor)
                out[col == v, j, 6 * t:6 * t + 6] = cache[key]
    return out


# --------------------------------------------------------------------------------------------
# Tile cost model
# --------------------------------------------------------------------------------------------


def _tile_units(info: dict) -> list[int]:
    """Elements per bound unit for each output dim: 128 (minor), sublanes (second-minor), 1."""
    shape, layout = info["out_shape"], info["layout"]
    units = [1] * len(shape)
    if shape:
        units[layout[0]] = 128
        if len(shape) > 1:
            units[layout[1]] = _sublanes(info["dtype"])
    return units


def _default_tile(info: dict) -> tuple[list[int], list[int]]:
    """The compiler's heuristic tile: grow dims minor-first while a quarter of VMEM suffices."""
    shape, layout = info["out_shape"], info["layout"]
    units = _tile_units(info)
    in_per_out = 0.0 if info["contract"] else info["in_bytes"] / max(1, math.prod(shape))
    per_elem = 2.0 * (TYPE_BYTES[info["dtype"]] + 4.0 + 4.0 * bool(info["contract"]) + in_per_out)
    ob = [1] * len(shape)
    elems = 1.0
    for d in layout:
        cap = max(1, -(-shape[d] // units[d]))
        best = 1
        for v in (cap, 64, 32, 16, 8, 4, 2, 1):
            if v <= cap and elems * v * units[d] * per_elem <= VMEM_BUDGET / 4:
                best = v
                break
        ob[d] = best
        elems *= best * units[d]
    ks = info["kernel_shape"]
    kb = []
    for d, s in enumerate(ks[:6]):
        unit = 128 if d == len(ks) - 1 else (8 if d == len(ks) - 2 else 1)
        cap = max(1, -(-s // unit))
        kb.append(min(cap, 32) if d == len(ks) - 2 else min(cap, 2) if d == len(ks) - 1 else cap)
    return ob, kb


def sample_tile_configs_default(info: dict) -> np.ndarray:
    """(1, 24) config_feat of the compiler's default tile (what normalizers are measured with)."""
    ob, kb = _default_tile(info)
    feats = np.zeros((1, 24), np.float32)
    for start, vals in ((0, kb), (8, ob)):
        feats[0, start:start + len(vals)] = vals
        feats[0, start + 6] = sum(vals)
        feats[0, start + 7] = math.prod(vals) if vals else 0
    return feats


def sample_tile_configs(rng: np.random.Generator, info: dict, n: int) -> np.ndarray:
    """(n, 24) tile config_feat; row 0 is the compiler default."""
    shape = info["out_shape"]
    units = _tile_units(info)
    feats = np.zeros((n, 24), np.float32)
    kshape = info["kernel_shape"]
    ob0, kb0 = _default_tile(info)
    ocap = [max(1, -(-s // units[d])) for d, s in enumerate(shape[:6])]
    kcap = [max(1, -(-s // (128 if d == len(kshape) - 1 else 8 if d == len(kshape) - 2 else 1)))
            for d, s in enumerate(kshape[:6])]

    steps = (-3, -2, -2, -1, -1, 0, 0, 0, 1, 1, 2, 2)

    def scaled(v: int, cap: int) -> int:  # the autotuner explores powers of two around v
        step = steps[int(rng.integers(len(steps)))]
        return int(min(cap, max(1, round(v * 2.0 ** step))))

    seen: set[tuple[int, ...]] = set()
    for c in range(n):
        ob, kb = ob0, kb0
        for _ in range(6 if c else 0):  # prefer configs not tried yet
            ob = [scaled(v, cap) for v, cap in zip(ob0, ocap)]
            kb = [scaled(v, cap) for v, cap in zip(kb0, kcap)]
            if tuple(ob + kb) not in seen:
                break
        seen.add(tuple(ob + kb))
        for start, vals in ((0, kb), (8, ob)):
            feats[c, start:start + len(vals)] = vals
            feats[c, start + 6] = sum(vals)
            feats[c, start + 7] = math.prod(vals) if vals else 0
    n_dup = int(round(n * float(rng.uniform(0.0, 0.08))))
    for c in rng.choice(np.arange(1, n), size=min(n_dup, n - 1), replace=False):
        feats[c] = feats[int(rng.integers(c))]
    return feats


def tile_runtime(info: dict, feats: np.ndarray) -> np.ndarray:
    """True runtime (ns) of a fused kernel for each tile config row."""
    shape = np.array(info["out_shape"], float)
    r = len(shape)
    units = np.array(_tile_units(info), float)
    nbytes = TYPE_BYTES[info["dtype"]]
    ob = np.maximum(feats[:, 8:8 + r].astype(float), 1.0)
    ext = np.minimum(ob * units, np.maximum(np.ceil(shape / units) * units, 1))
    n_tiles_d = np.ceil(shape / ext)
    n_tiles = n_tiles_d.prod(axis=1)
    padded_out = (n_tiles_d * ext).prod(axis=1)  # elements incl. tile padding waste
    tile_elems = ext.prod(axis=1)
    lane_ext = ext[:, info["layout"][0]] if r else np.ones(len(feats))
    contract = info["contract"]
    if contract:
        ks = info["kernel_shape"]
        kb = np.maximum(feats[:, 0:len(ks)].astype(float), 1.0)
        kunits = np.array([1.0] * (len(ks) - 2) + [8.0, 128.0])
        kext = np.minimum(kb * kunits, np.array(ks, float))
        cin_tile = kext[:, -2]
        steps = np.ceil(info["cin"] / cin_tile)
        k_pad = steps * cin_tile / info["cin"]
        spatial = np.prod(kext[:, :-2], axis=1) if len(ks) > 2 else 1.0
        taps = math.prod(ks[:-2]) if len(ks) > 2 else 1
        tap_steps = taps / spatial
        rows = tile_elems / lane_ext
        fill = np.minimum(1.0, lane_ext / 128.0) * np.minimum(1.0, rows / 128.0) ** 0.3
        flops = 2.0 * padded_out * contract * k_pad * _mxu_pad(int(ks[-1]))
        t_compute = flops / PEAK_FLOP_PER_NS / fill
        in_tile = rows * cin_tile * spatial * nbytes
        w_tile = spatial * cin_tile * kext[:, -1] * nbytes
        total_steps = n_tiles * steps * tap_steps
        bytes_moved = total_steps * (in_tile + w_tile) + padded_out * nbytes
        ws = 2.0 * (in_tile + w_tile) + tile_elems * 4.0
    else:
        in_per_out = info["in_bytes"] / max(1.0, float(np.prod(shape)))
        total_steps = n_tiles
        bytes_moved = padded_out * (nbytes + in_per_out) * (2.0 if info.get("reduce") else 1.0)
        t_compute = padded_out * 2.0 / (PEAK_FLOP_PER_NS / 16)  # VPU
        ws = 2.0 * tile_elems * (nbytes + in_per_out)
        if info["kind"] == "copy":  # transposing copy: short lane runs cost DMA efficiency
            bytes_moved = bytes_moved * (1.0 + 128.0 / np.maximum(lane_ext, 8.0))
    step_bytes = bytes_moved / np.maximum(total_steps, 1.0)
    dma_eff = step_bytes / (step_bytes + 16384.0)
    t_mem = bytes_moved / HBM_BYTES_PER_NS / dma_eff
    spill = np.where(ws > VMEM_BUDGET, 1.0 + 2.5 * (ws / VMEM_BUDGET - 1.0), 1.0)
    # software pipeline: loads of step i+1 overlap compute of step i, but the first load and the
    # last store are exposed, and with few steps the overlap is poor
    steps = np.maximum(total_steps, 1.0)
    body = np.maximum(t_compute, t_mem) + np.minimum(t_compute, t_mem) / steps
    exposed = (step_bytes + tile_elems * nbytes) / HBM_BYTES_PER_NS
    # megacore: two TensorCores split the (parallel) output tiles; one tile leaves a core idle
    balance = np.ceil(n_tiles / 2.0) / (n_tiles / 2.0)
    return (total_steps * 350.0 / 2.0 * balance + body * balance + exposed
            + OP_OVERHEAD_NS) * spill


# --------------------------------------------------------------------------------------------
# Dataset assembly
# --------------------------------------------------------------------------------------------


def _rng(seed: int, *key: object) -> np.random.Generator:
    h = zlib.crc32("/".join(map(str, key)).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, h]))


def _int_dtype(rng: np.random.Generator) -> type:
    return np.int32 if rng.random() < 0.3 else np.int64  # real files mix int32 and int64


def _graph_arrays(fg: FlatGraph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    it = _int_dtype(rng)
    ops = np.array([OPCODE_IDS[nd.op] for nd in fg.nodes], it)
    return {"node_feat": featurize(fg), "node_opcode": ops, "edge_index": fg.edges.astype(it)}


def _choose_configurable(fg: FlatGraph, rng: np.random.Generator, lo: int, hi: int,
                         ops: frozenset[str]) -> np.ndarray:
    cands = [u for u in range(fg.entry_start, len(fg.nodes))
             if fg.nodes[u].op in ops and fg.nodes[u].shape]
    if not cands:
        raise RuntimeError("graph has no configurable node")
    k = min(len(cands), int(rng.integers(lo, hi + 1)))
    return np.sort(rng.choice(cands, size=k, replace=False))


@dataclass
class LayoutGraph:
    stem: str
    fg: FlatGraph
    base: dict[str, np.ndarray]


def make_layout_file(lg: LayoutGraph, search: str, n_configs: int, spec: ScaleSpec,
                     rng: np.random.Generator,
                     configurable_ops: frozenset[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Arrays of one layout npz and the true runtimes (ns, float)."""
    ids = _choose_configurable(lg.fg, rng, *spec.configurable, configurable_ops)
    spaces = _slot_spaces(lg.fg, ids)
    cfg = sample_layout_configs(rng, spaces, n_configs, search)
    cfg = cfg[rng.permutation(n_configs)]  # no positional leak (the pure default is not first)
    model = LayoutCostModel(lg.fg, ids)
    true = model.runtimes(cfg[:, :, 0], cfg[:, :, 1], cfg[:, :, 2])
    measured = true * np.exp(rng.normal(0.0, LAYOUT_NOISE, size=len(true)))
    it = _int_dtype(rng)
    splits = lg.fg.splits.astype(np.int64)
    arrays = dict(lg.base)
    arrays.update(
        node_config_ids=ids.astype(it),
        node_config_feat=encode_node_config_feat(cfg, spaces),
        config_runtime=np.round(measured).astype(np.int64),
        node_splits=splits.reshape(1, -1) if rng.random() < 0.5 else splits,
    )
    return arrays, arrays["config_runtime"].astype(np.float64)


def make_tile_file(rng: np.random.Generator, spec: ScaleSpec) -> tuple[str, dict, np.ndarray]:
    b, info = build_tile_kernel(rng, int(rng.integers(spec.tile_nodes[0], spec.tile_nodes[1] + 1)))
    fg = b.finalize()
    n = int(rng.integers(spec.tile_configs[0], spec.tile_configs[1] + 1))
    feats = sample_tile_configs(rng, info, n)
    feats = feats[rng.permutation(n)]  # the default row is not at a fixed position
    true = tile_runtime(info, feats)
    default_true = float(tile_runtime(info, sample_tile_configs_default(info))[0])
    machine = rng.integers(len(MACHINE_SPEED), size=n)
    speed = np.array(MACHINE_SPEED)[machine]
    runtime = np.round(true * speed * np.exp(rng.normal(0.0, TILE_NOISE, n))).astype(np.int64)
    norm = np.round(default_true * speed).astype(np.int64)
    arrays = _graph_arrays(fg, rng)
    arrays.update(config_feat=feats, config_runtime=runtime, config_runtime_normalizers=norm,
                  node_splits=fg.splits.astype(np.int64))
    return info["kind"], arrays, runtime / norm


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _split_counts(counts: tuple[int, int, int]) -> dict[str, int]:
    return dict(zip(("train", "valid", "test"), counts))


def _write_tile(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list) -> None:
    coll = next(c for c in COLLECTIONS if c.is_tile)
    for split, count in _split_counts(spec.tile_counts).items():
        for i in range(count):
            rng = _rng(seed, coll.name, split, i)
            kind, arrays, target = make_tile_file(rng, spec)
            stem = f"{kind}_{i:04d}_{zlib.crc32(f'{seed}{split}{i}'.encode()):08x}"
            if split == "test":
                hidden[coll.submission_id(stem)] = target.astype(np.float64)
                arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                rows.append((coll.submission_id(stem), "0;1;2;3;4"))
            _save(coll.split_dir(root, split) / f"{stem}.npz", arrays)


def _sized_layout_graph(source: str, rng: np.random.Generator, node_range: tuple[int, int],
                        spec: ScaleSpec, configurable_ops: frozenset[str]) -> tuple[FlatGraph, str]:
    """A layout graph whose size is within (about) ``node_range`` and that has enough
    configurable candidates; redraws (deterministically) when a model family misses."""
    lo, hi = node_range
    for _ in range(30):
        target = int(rng.integers(lo, hi + 1))
        b, family = build_layout_graph(source, rng, target)
        fg = b.finalize()
        n_cands = sum(1 for u in range(fg.entry_start, len(fg.nodes))
                      if fg.nodes[u].op in configurable_ops and fg.nodes[u].shape)
        if lo <= len(fg.nodes) <= 1.2 * hi and n_cands >= spec.configurable[0]:
            return fg, family
    return fg, family


def _write_layout(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list,
                  configurable_ops: frozenset[str]) -> None:
    for source in ("xla", "nlp"):
        node_range = spec.nlp_nodes if source == "nlp" else spec.xla_nodes
        for split, count in _split_counts(spec.layout_counts).items():
            for i in range(count):
                rng = _rng(seed, "layout", source, split, i)
                fg, family = _sized_layout_graph(source, rng, node_range, spec, configurable_ops)
                stem = f"{family}_{i:03d}_{zlib.crc32(f'{seed}{source}{split}{i}'.encode()):08x}"
                lg = LayoutGraph(stem, fg, _graph_arrays(fg, rng))
                for search in ("default", "random"):
                    coll = next(c for c in COLLECTIONS
                                if c.source == source and c.search == search)
                    srng = _rng(seed, coll.name, split, i)
                    lo, hi = spec.layout_configs
                    n = spec.test_configs if split == "test" and spec.test_configs else \
                        int(srng.integers(lo, hi + 1))
                    arrays, target_rt = make_layout_file(lg, search, n, spec, srng,
                                                         configurable_ops)
                    if split == "test":
                        sid = coll.submission_id(stem)
                        hidden[sid] = target_rt
                        arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                        rows.append((sid, ";".join(map(str, range(n)))))
                    _save(coll.split_dir(root, split) / f"{stem}.npz", arrays)


def generate_dataset(out_dir: str | os.PathLike, scale: str = "tiny", seed: int = 0,
                     configurable_ops: Sequence[str] = ("convolution", "dot", "reshape")) -> Path:
    """Write a complete sample dataset (Kaggle layout) to ``out_dir`` and return its path.

    The tree is written into a temporary sibling directory and renamed into place with
    ``.complete`` already inside, so an interrupted run leaves nothing half-written. An existing
    ``out_dir`` is replaced only if it is empty or a previous sample (has ``.complete`` or
    ``npz_all``).
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {sorted(SCALES)}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not ((out / ".complete").exists()
                                                     or (out / "npz_all").exists()):
        raise FileExistsError(f"{out} exists and is not a generated sample; refusing to replace")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        spec = SCALES[scale]
        hidden: dict[str, np.ndarray] = {}
        rows: list[tuple[str, str]] = []
        ops = frozenset(configurable_ops)
        _write_tile(tmp, spec, seed, hidden, rows)
        _write_layout(tmp, spec, seed, hidden, rows, ops)
        hp = hidden_runtimes_path(tmp)
        hp.parent.mkdir(parents=True, exist_ok=True)
        with open(hp, "wb") as fh:
            np.savez(fh, **hidden)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["ID", "TopConfigs"])
        w.writerows(sorted(rows))
        (tmp / "sample_submission.csv").write_text(buf.getvalue())
        (tmp / ".complete").write_text(f"scale={scale} seed={seed}\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m features.sample",
                                description="Write the generated TpuGraphs-like sample dataset.")
    p.add_argument("--out", required=True, help="output data root (Kaggle layout)")
    p.add_argument("--scale", default="tiny", choices=sorted(SCALES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configurable-ops", default="convolution,dot,reshape",
                   help="comma-separated opcodes that may be configurable in layout graphs")
    a = p.parse_args(argv)
    t0 = time.time()
    out = generate_dataset(a.out, a.scale, a.seed,
                           tuple(s.strip() for s in a.configurable_ops.split(",") if s.strip()))
    n = sum(1 for _ in npz_dir(out).rglob("*.npz"))
    print(f"wrote {n} graph files to {out} ({a.scale}, seed {a.seed}) in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
