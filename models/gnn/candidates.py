"""Candidate layouts for the configurable nodes of a new program (used by ``rank --hlo``).

Encoding (docs/competition.md §5): per configurable node 18 values, the output tensor's minor-to-major order in
0–5, the first operand's (input) in 6–11, the second operand's (kernel, convolutions only) in
12–17; -1 where unset. An all -1 node means "compiler's default layout"; candidate 0 is the all
-1 config. Like the real TPU records (docs/competition.md §9), the default search space sets only the two most
minor dimensions of each tensor (``space="minor2"``); ``space="full"`` sets whole permutations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from features.io import LAYOUT_CONFIG_DIM

MAX_RANK = 6
SPACES = ("minor2", "full")


@dataclass(frozen=True)
class NodeSpace:
    """The tensors one configurable node can lay out: their ranks (output, input[, kernel])."""

    node: int
    name: str
    opcode: str
    ranks: tuple[int, ...]


def node_spaces(instructions: Sequence, operand_ranks: Sequence[Sequence[int]],
                nodes: Sequence[int]) -> list[NodeSpace]:
    """Tensor ranks per configurable node: output, operand 0, and operand 1 for convolutions."""
    out = []
    for node in nodes:
        inst = instructions[node]
        ranks = [len(inst.shape.dimensions)]
        ops = list(operand_ranks[node])
        if ops:
            ranks.append(ops[0])
        if inst.opcode == "convolution" and len(ops) > 1:
            ranks.append(ops[1])
        out.append(NodeSpace(int(node), inst.name, inst.opcode,
                             tuple(min(r, MAX_RANK) for r in ranks)))
    return out


def _random_layout(rng: np.random.Generator, rank: int, space: str) -> list[int]:
    if rank == 0:
        return []
    perm = rng.permutation(rank).tolist()
    return perm if space == "full" else perm[:2]


def sample_candidates(spaces: Sequence[NodeSpace], n: int, seed: int = 0,
                      space: str = "minor2", p_change: float = 0.5) -> np.ndarray:
    """``(c, nc, 18)`` float32 distinct candidates, ``c <= n``; row 0 is the compiler default.

    Each other candidate changes every node with probability ``p_change`` (at least one node) to
    a random layout of each of its tensors.
    """
    if space not in SPACES:
        raise ValueError(f"unknown layout space {space!r}; expected one of {SPACES}")
    if n < 1:
        raise ValueError("need at least one candidate")
    rng = np.random.default_rng(seed)
    nc = len(spaces)
    default = np.full((nc, LAYOUT_CONFIG_DIM), -1, np.int8)
    found = [default]
    seen = {default.tobytes()}
    changeable = [i for i, ns in enumerate(spaces) if any(r > 0 for r in ns.ranks)]
    tries = 0
    while len(found) < n and changeable and tries < 50 * n:  # a small space may hold fewer
        tries += 1
        cand = default.copy()
        picked = [i for i in changeable if rng.random() < p_change] or [int(rng.choice(changeable))]
        for i in picked:
            for t, rank in enumerate(spaces[i].ranks):
                layout = _random_layout(rng, rank, space)
                cand[i, 6 * t:6 * t + len(layout)] = layout
        key = cand.tobytes()
        if key not in seen:
            seen.add(key)
            found.append(cand)
    return np.stack(found).astype(np.float32)


def describe(config: np.ndarray, spaces: Sequence[NodeSpace], max_nodes: int = 3) -> str:
    """Short text of the nodes a config changes, e.g. ``conv.3 out{1,0} in{3,0}``."""
    parts = []
    changed = [i for i in range(len(spaces)) if (config[i] >= 0).any()]
    for i in changed[:max_nodes]:
        tensors = []
        for t, label in enumerate(("out", "in", "ker")[:len(spaces[i].ranks)]):
            vals = [int(v) for v in config[i, 6 * t:6 * t + 6] if v >= 0]
            if vals:
                tensors.append(label + "{" + ",".join(map(str, vals)) + "}")
        parts.append(f"{spaces[i].name} " + " ".join(tensors))
    if len(changed) > max_nodes:
        parts.append(f"+{len(changed) - max_nodes} more")
    return "; ".join(parts) if parts else "(compiler default)"
