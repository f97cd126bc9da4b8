"""HLO builder and featurizer (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence
import numpy as np

from features.hlo.node_features import NO_CONV, InstructionFacts, features_matrix
from features.sample.constants import ELEMENT_TYPES


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
        self.n_params: Counter[int] = Counter()  # parameters added so far, by computation

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

    def shape(self, i: int) -> tuple[int, ...]:
        return self.comps[self.cur][i].shape

    def dtype(self, i: int) -> str:
        return self.comps[self.cur][i].dtype

    def num_nodes(self) -> int:
        return sum(len(c) for c in self.comps)

    # -- ops ------------------------------------------------------------------------------
    def param(self, shape: Sequence[int], dtype: str = "f32") -> int:
        self.n_params[self.cur] += 1
        return self.add("parameter", shape, (), dtype, parameter_number=self.n_params[self.cur] - 1)

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

    def conv(self, x: int, w: int, stride: int = 1, lhs_dilation: int = 1) -> int:
        """NHWC / NDHWC 'same' convolution with an HWIO kernel (``b01f_01io->b01f``)."""
        sx, sw = self.shape(x), self.shape(w)
        nsp = len(sx) - 2
        ks = sw[:nsp]
        spatial = [((sx[1 + d] - 1) * lhs_dilation + 1 + 2 * (ks[d] // 2) - ks[d]) // stride + 1
                   for d in range(nsp)]
        dn = dict(ib=0, if_=nsp + 1, isp=list(range(1, nsp + 1)), ki=nsp, ko=nsp + 1,
                  ksp=list(range(nsp)), ob=0, of=nsp + 1)
        return self.conv_general(x, w, [sx[0], *spatial, sw[-1]], ks, [k // 2 for k in ks], dn,
                                 stride=stride, bdil=lhs_dilation)

    def conv_general(self, x: int, w: int, out_shape: Sequence[int], size: Sequence[int],
                     pads: Sequence[int], dn: dict, stride: int = 1, wdil: int = 1,
                     bdil: int = 1) -> int:
        """A convolution with explicit dimension numbers and per-dim padding."""
        nsp = len(size)
        win = dict(size=list(size), stride=[stride] * nsp, pad_lo=list(pads), pad_hi=list(pads),
                   wdil=[wdil] * nsp, bdil=[bdil] * nsp)
        return self.add("convolution", out_shape, (x, w), self.dtype(x), window=win, conv=dn,
                        feature_group_count=1, batch_group_count=1)

    def reverse(self, x: int, dims: Sequence[int]) -> int:
        return self.add("reverse", self.shape(x), (x,), self.dtype(x), dimensions=tuple(dims))

    def _reducing(self, op: str, x: int, out: Sequence[int], kind: str, **attrs) -> int:
        """``op`` of ``x`` from an init constant, calling a new ``kind`` reducer computation."""
        dt = self.dtype(x)
        init = self.const((), dt)
        c = self.new_comp()
        a, b = (self.add("parameter", (), (), dt, comp=c, parameter_number=i) for i in range(2))
        self.add(kind, (), (a, b), dt, comp=c)
        return self.add(op, out, (x, init), dt, calls=(c,), **attrs)

    def reduce(self, x: int, dims: Sequence[int], kind: str = "add") -> int:
        out = [v for i, v in enumerate(self.shape(x)) if i not in dims]
        return self._reducing("reduce", x, out, kind, dimensions=tuple(dims))

    def reduce_window(self, x: int, k: int, stride: int) -> int:
        s = self.shape(x)
        nsp = len(s) - 2
        out = [s[0]] + [(v - k) // stride + 1 for v in s[1:-1]] + [s[-1]]
        r = len(s)
        win = dict(size=[1] + [k] * nsp + [1], stride=[1] + [stride] * nsp + [1],
                   pad_lo=[0] * r, pad_hi=[0] * r, wdil=[1] * r, bdil=[1] * r)
        return self._reducing("reduce-window", x, out, "maximum", window=win)

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
        offset = dict(zip(order, itertools.accumulate((len(self.comps[c]) for c in order), initial=0)))
        nodes: list[Node] = []
        edges: list[tuple[int, int]] = []
        operands: list[list[int]] = []
        roots: list[int] = []
        for c in order:
            base = offset[c]
            for i, nd in enumerate(self.comps[c]):
                u = base + i
                operands.append([base + v for v in dict.fromkeys(nd.operands)])
                edges += [(u, v) for v in operands[-1]]
                edges += [(u, offset[cc] + len(self.comps[cc]) - 1) for cc in nd.calls]
                nodes.append(nd)
            roots.append(base + len(self.comps[c]) - 1)
        splits = sorted({0, *(offset[c] for c in order if len(self.comps[c]) >= 4), len(nodes)})
        return FlatGraph(nodes, np.array(edges, np.int64).reshape(-1, 2), operands, set(roots),
                         np.array(splits, np.int64), offset[self.entry])


@dataclass
class FlatGraph:
    nodes: list[Node]
    edges: np.ndarray  # (m, 2) [consumer, producer]: the operands, then called computations' roots
    operands: list[list[int]]  # global indices of each node's distinct operands
    roots: set[int]
    splits: np.ndarray
    entry_start: int


def node_facts(fg: FlatGraph, i: int) -> InstructionFacts:
    """What the shared featurizer encodes about generated node ``i`` (``features.hlo.node_features``)."""
    nd = fg.nodes[i]
    a = nd.attrs
    win = a.get("window")
    dn = a.get("conv")
    sl = a.get("slice", {})
    return InstructionFacts(
        is_root=i in fg.roots,
        element_slot=ELEMENT_TYPES.index(nd.dtype),
        dims=nd.shape,
        tuple_size=a.get("tuple_size", 0),
        parameter_number=a.get("parameter_number", 0),
        dimensions=a.get("dimensions", ()),
        window=win,
        reversal=[False] * len(win["size"]) if win else (),  # nothing generated is reversed
        conv=(dn["ib"], dn["if_"], dn["isp"], dn["ki"], dn["ko"], dn["ksp"], dn["ob"], dn["of"])
        if dn else NO_CONV,
        feature_group_count=a.get("feature_group_count", 1) if dn else 0,
        batch_group_count=a.get("batch_group_count", 1) if dn else 0,
        slice_start=sl.get("start", ()), slice_stride=sl.get("stride", ()),
        slice_limit=sl.get("limit", ()),
        minor_to_major=(nd.layout or row_major(len(nd.shape))) if nd.shape else (),
    )


def featurize(fg: FlatGraph) -> np.ndarray:
    """node_feat (n, 140) float32 following docs/competition.md §4: the featurizer of ``features.hlo`` itself."""
    return features_matrix(node_facts(fg, i) for i in range(len(fg.nodes)))
