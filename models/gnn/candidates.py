"""The legal configs of a graph, for ``rank --hlo`` and ``search``: layouts per configurable node
(:class:`LayoutSpace`) and tile bounds per kernel (:class:`TileSpace`).

Layout encoding (docs/competition.md §5): per configurable node 18 values, the output tensor's
minor-to-major order in 0–5, the first operand's (input) in 6–11, the second operand's (kernel,
convolutions only) in 12–17; -1 where unset, an all -1 node being the compiler's default. Like the
real TPU records (docs/competition.md §9), ``minor2`` sets only the two most-minor dimensions of a
tensor; ``full`` sets whole permutations.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

MAX_RANK = 6
SPACES = ("auto", "minor2", "full")
TENSORS = ("out", "in", "ker")


@dataclass(frozen=True)
class NodeSpace:
    """The tensors one configurable node can lay out: their ranks (output, input[, kernel])."""

    node: int
    name: str
    opcode: str
    ranks: tuple[int, ...]


def _node_space(node: int, name: str, opcode: str, out_rank: int,
                operand_ranks: Sequence[int]) -> NodeSpace:
    """Output, operand 0, and operand 1 for convolutions."""
    ranks = [out_rank, *operand_ranks[:2 if opcode == "convolution" else 1]]
    return NodeSpace(int(node), name, opcode, tuple(min(int(r), MAX_RANK) for r in ranks))


def layout_text(m2m: Sequence[int]) -> str:
    return "{" + ",".join(str(int(v)) for v in m2m) + "}"


class LayoutSpace:
    """Legal layouts of every configurable node: per tensor, its minor-to-major choices (the
    empty tuple = compiler default, all -1). ``auto``: convolutions ``minor2``, others ``full``."""

    kind = "layout"

    def __init__(self, spaces: Sequence[NodeSpace], space: str = "auto") -> None:
        if space not in SPACES:
            raise ValueError(f"unknown layout space {space!r}; expected one of {SPACES}")
        self.spaces = list(spaces)
        self.minor2 = [space == "minor2" or (space == "auto" and ns.opcode == "convolution")
                       for ns in self.spaces]
        self.choices = [[[(), *itertools.permutations(range(r), min(r, 2) if m2 else r)]
                         if r else [()] for r in ns.ranks] for ns, m2 in zip(self.spaces, self.minor2)]
        self.movable = [j for j, ch in enumerate(self.choices) if any(len(c) > 1 for c in ch)]
        if not self.movable:
            raise ValueError("no configurable node has a tensor to lay out")

    @property
    def default(self) -> np.ndarray:
        return np.full((len(self.spaces), 18), -1, np.int8)

    def _set(self, cfg: np.ndarray, j: int, t: int, rng: np.random.Generator) -> None:
        ch = self.choices[j][t]
        cfg[j, 6 * t:6 * t + 6] = -1
        layout = ch[int(rng.integers(len(ch)))]
        cfg[j, 6 * t:6 * t + len(layout)] = layout

    def random(self, rng: np.random.Generator, n: int, p_change: float = 1.0) -> np.ndarray:
        """``n`` configs: each node changed with ``p_change`` (at least one), each of its tensors
        set to a uniform choice of its space (the default included)."""
        out = np.repeat(self.default[None], n, axis=0)
        for c in range(n):
            picked = [j for j in self.movable if rng.random() < p_change] or \
                [self.movable[int(rng.integers(len(self.movable)))]]
            for j in picked:
                for t in range(len(self.choices[j])):
                    self._set(out[c], j, t, rng)
        return out

    def distinct(self, n: int, seed: int = 0, p_change: float = 0.5) -> np.ndarray:
        """``rank --hlo``'s ``(c, nc, 18)`` float32 candidates, ``c <= n`` distinct, row 0 the
        default: each node changed with ``p_change`` (at least one) to a random permutation (its
        first two values for ``minor2``) of each of its tensors."""
        if n < 1:
            raise ValueError("need at least one candidate")
        rng = np.random.default_rng(seed)
        found = {self.default.tobytes(): self.default}
        for _ in range(50 * n):  # a small space may hold fewer
            if len(found) >= n:
                break
            cand = self.default.copy()
            picked = [j for j in self.movable if rng.random() < p_change] or \
                [int(rng.choice(self.movable))]
            for j in picked:
                for t, rank in enumerate(self.spaces[j].ranks):
                    layout = rng.permutation(rank)[:2 if self.minor2[j] else rank] if rank else []
                    cand[j, 6 * t:6 * t + len(layout)] = layout
            found.setdefault(cand.tobytes(), cand)
        return np.stack(list(found.values())).astype(np.float32)

    def mutate(self, rng: np.random.Generator, cfg: np.ndarray) -> None:
        """Change one node: one of its tensors, or (half the time) all of them."""
        j = self.movable[int(rng.integers(len(self.movable)))]
        tensors = [t for t, ch in enumerate(self.choices[j]) if len(ch) > 1]
        for t in tensors if rng.random() < 0.5 else [tensors[int(rng.integers(len(tensors)))]]:
            self._set(cfg, j, t, rng)

    @staticmethod
    def node_codes(cfgs: np.ndarray) -> np.ndarray:
        """(c, nc) one integer per node's 18 values (-1..5: base 7), to count differing nodes."""
        return ((np.asarray(cfgs, np.int64) + 1) * (7 ** np.arange(18, dtype=np.int64))).sum(-1)

    def crossover(self, rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where((rng.random(len(a)) < 0.5)[:, None], b, a)

    def describe(self, cfg: np.ndarray, max_nodes: int = 3) -> str:
        """Short text of the nodes a config changes, e.g. ``conv.3 out{1,0} in{3,0}``."""
        changed = [j for j in range(len(self.spaces)) if (cfg[j] >= 0).any()]
        parts = []
        for j in changed[:max_nodes]:
            blocks = [(TENSORS[t], cfg[j, 6 * t:6 * t + 6]) for t in range(len(self.spaces[j].ranks))]
            parts.append(" ".join([self.spaces[j].name] + [label + layout_text(b[b >= 0])
                                                           for label, b in blocks if (b >= 0).any()]))
        if len(changed) > max_nodes:
            parts.append(f"+{len(changed) - max_nodes} more")
        return "; ".join(parts) if parts else "(compiler default)"


class TileSpace:
    """Legal tile bounds: per used dimension (kernel 0–5, output 8–13, input 16–21) the powers of
    two up to the largest bound the kernel's given configs use, and those configs' own values.
    Such a space is small (a median of 72 configs on the samples): search scores it whole."""

    kind = "tile"
    BLOCKS = (0, 8, 16)

    def __init__(self, given: np.ndarray) -> None:
        given = np.asarray(given, np.float32)
        self.values: dict[int, np.ndarray] = {}
        for start in self.BLOCKS:
            for d in range(start, start + 6):
                top = float(given[:, d].max()) if len(given) else 0.0
                if top >= 1:
                    pows = 2.0 ** np.arange(int(math.log2(top)) + 1)
                    self.values[d] = np.unique(np.concatenate([pows, given[:, d][given[:, d] >= 1]]))
        if not self.values:
            raise ValueError("the kernel's configs set no tile bound")
        self.dims = sorted(self.values)
        self.default = given[0].copy() if len(given) else np.zeros(24, np.float32)

    @classmethod
    def encode(cls, cfg: np.ndarray) -> np.ndarray:
        for start in cls.BLOCKS:
            vals = cfg[..., start:start + 6]
            used = vals > 0
            cfg[..., start + 6] = vals.sum(-1)
            cfg[..., start + 7] = np.where(used.any(-1), np.where(used, vals, 1).prod(-1), 0)
        return cfg

    def size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def every(self) -> np.ndarray:
        """Every config of the space (one small enough to score whole)."""
        out = np.zeros((self.size(), 24), np.float32)
        out[:, self.dims] = np.array(list(itertools.product(*(self.values[d] for d in self.dims))))
        return self.encode(out)

    def random(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out = np.zeros((n, 24), np.float32)
        for d in self.dims:
            out[:, d] = self.values[d][rng.integers(len(self.values[d]), size=n)]
        return self.encode(out)

    def mutate(self, rng: np.random.Generator, cfg: np.ndarray) -> None:
        """Move one bound one or two steps along its legal values (or anywhere, 1 in 4)."""
        d = self.dims[int(rng.integers(len(self.dims)))]
        vals = self.values[d]
        i = int(np.searchsorted(vals, cfg[d]))
        i = int(rng.integers(len(vals))) if rng.random() < 0.25 else \
            int(np.clip(i + rng.choice((-2, -1, 1, 2)), 0, len(vals) - 1))
        cfg[d] = vals[i]
        self.encode(cfg)

    def crossover(self, rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.encode(np.where(rng.random(len(a)) < 0.5, b, a))


def npz_spaces(graph: Any) -> list[NodeSpace]:
    """Configurable nodes of a data graph: ranks from its shape features (21–26), operands in
    edge order (edge [u, v]: u consumes v), opcode names from ``data/hlo_opcodes.tsv``."""
    from features.sample.constants import OPCODE_IDS

    names = {v: k for k, v in OPCODE_IDS.items()}
    rank = (np.asarray(graph.node_feat)[:, 21:27] > 0).sum(1)
    operands: dict[int, list[int]] = {}
    for u, v in np.asarray(graph.edge_index).tolist():
        operands.setdefault(u, []).append(v)
    out = []
    for u in np.asarray(graph.node_config_ids).tolist():
        op = names.get(int(graph.node_opcode[u]), str(int(graph.node_opcode[u])))
        out.append(_node_space(u, f"{op}.{u}", op, rank[u], [rank[v] for v in operands.get(u, [])]))
    return out


def module_spaces(module: Any, extra_nodes: Sequence[int] = (), opcodes: Sequence[str] | None = None,
                  config_nodes: Sequence[int] | None = None) -> tuple[np.ndarray, list[NodeSpace], Any]:
    """``(ids, spaces, index)``: the configurable nodes of an HLO ``module``, their
    :class:`NodeSpace` and the module index. The nodes are ``config_nodes`` when given (a tuning
    record's ``config_index_to_node``: docs/competition.md §3 says to take the set from the data,
    not the opcode), else those with ``opcodes``; plus ``extra_nodes``."""
    from features.hlo import DEFAULT_CONFIGURABLE, configurable_nodes
    from features.hlo.convert import index_module, operand_shapes

    if config_nodes is not None:
        ids = configurable_nodes(module, (), list(config_nodes) + list(extra_nodes))
    else:
        ids = configurable_nodes(module, opcodes or DEFAULT_CONFIGURABLE, extra_nodes)
    if len(ids) == 0:
        raise ValueError(f"module {module.name!r} has no configurable node (opcodes "
                         f"{list(opcodes or DEFAULT_CONFIGURABLE)}); pass --nodes")
    index = index_module(module)
    insts = index.instructions
    return ids, [_node_space(n, insts[n].name, insts[n].opcode, len(insts[n].shape.dimensions),
                             [len(s) for s in operand_shapes(index, n)]) for n in ids.tolist()], index
