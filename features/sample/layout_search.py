"""Layout config searches (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
import numpy as np

from features.sample.hlo import FlatGraph
from features.sample.layout_cost import PERMS, PERM_ID, complete_layout, desc_id, padded_bytes_table


@dataclass
class SlotSpace:
    """The layout choices of one configurable node."""

    shapes: tuple[tuple[int, ...], ...]  # (out, in, kernel); kernel () when there is no slot
    dtype: str
    two_minor: bool  # conv: only the two most-minor dims are specified

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.shapes)


def _slot_spaces(fg: FlatGraph, ids: np.ndarray) -> list[SlotSpace]:
    spaces = []
    for u in ids.tolist():
        nd, ops = fg.nodes[u], fg.operands[u]
        conv = nd.op == "convolution"
        k_shape = fg.nodes[ops[1]].shape if conv else ()
        spaces.append(SlotSpace((nd.shape, fg.nodes[ops[0]].shape, k_shape), nd.dtype, conv))
    return spaces


def _random_layouts(rng: np.random.Generator, rank: int, two_minor: bool, n: int) -> np.ndarray:
    """``n`` random layouts (perm ids; conv: any ordered pair of most-minor dims); 10 % are left
    at -1 (compiler default)."""
    if two_minor and rank > 2:
        pairs = itertools.permutations(range(rank), 2)
        choices = np.array([PERM_ID[rank][complete_layout(p, rank)] for p in pairs])
    else:
        choices = np.arange(len(PERMS[rank]))
    ids = choices[rng.integers(len(choices), size=n)]
    return np.where(rng.random(n) < 0.1, -1, ids)


@lru_cache(maxsize=None)
def _near_layouts(shape: tuple[int, ...], dtype: str, two_minor: bool, keep_minor: bool) -> list[int]:
    """Layouts other than row-major that pad the tensor at most 25 % more; ``keep_minor``: only
    those keeping the row-major minor dim, when there are any."""
    rank = len(shape)
    pad = padded_bytes_table(shape, dtype)
    ok = [i for i, p in enumerate(PERMS[rank])
          if i != desc_id(rank) and pad[i] <= 1.25 * pad[desc_id(rank)]
          and (not two_minor or rank <= 2 or p == complete_layout(p[:2], rank))]
    kept = [i for i in ok if PERMS[rank][i][0] == rank - 1]
    return kept if keep_minor and kept else ok


def _near_default_layout(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
                         two_minor: bool) -> int:
    """A layout the compiler's own search would try: mostly (80 %) the row-major minor dim kept and
    the others reordered; never one that pads the tensor by more than 25 % over row-major."""
    if len(shape) < 2:
        return -1 if not shape else 0
    cands = _near_layouts(shape, dtype, two_minor, bool(rng.random() < 0.8))
    return int(cands[int(rng.integers(len(cands)))]) if cands else -1


def sample_layout_configs(rng: np.random.Generator, spaces: list[SlotSpace], n: int,
                          search: str) -> np.ndarray:
    """(n, nc, 3) perm ids (out, in, kernel), -1 = default; includes duplicate configs."""
    nc = len(spaces)
    cfg = np.full((n, nc, 3), -1, np.int64)
    if search == "random":
        for j, s in enumerate(spaces):
            for t, rank in enumerate(s.ranks):
                if rank:
                    cfg[:, j, t] = _random_layouts(rng, rank, s.two_minor, n)
    else:  # default search: config 0 is the pure default, the others a few changes from it
        for c in range(1, n):
            for j in rng.permutation(nc)[:int(rng.geometric(0.55))]:
                s = spaces[int(j)]
                t = int(rng.integers(3 if s.ranks[2] else 2))
                cfg[c, j, t] = _near_default_layout(rng, s.shapes[t], s.dtype, s.two_minor)
    # duplicates: re-measured copies of earlier configs (identical features)
    n_dup = max(1, int(round(n * float(rng.uniform(0.03, 0.1))))) if n >= 10 else 0
    for c in rng.choice(np.arange(1, n), size=n_dup, replace=False):
        cfg[c] = cfg[int(rng.integers(c))]
    return cfg


@lru_cache(maxsize=None)
def encode_layout(perm_id: int, rank: int, two_minor: bool) -> list[int]:
    if perm_id < 0 or rank == 0:
        return [-1] * 6
    p = PERMS[rank][perm_id]
    vals = list(p[:2]) if two_minor and rank > 2 else list(p)
    return vals + [-1] * (6 - len(vals))


def encode_node_config_feat(cfg: np.ndarray, spaces: list[SlotSpace]) -> np.ndarray:
    n, nc, _ = cfg.shape
    out = np.full((n, nc, 18), -1, np.float32)
    for j, s in enumerate(spaces):
        for t, rank in enumerate(s.ranks):
            if not rank:
                continue
            col = cfg[:, j, t]
            for v in np.unique(col).tolist():
                out[col == v, j, 6 * t:6 * t + 6] = encode_layout(v, rank, s.two_minor)
    return out
