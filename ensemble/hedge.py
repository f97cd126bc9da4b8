"""Tile top-5 portfolio: a kernel's five submitted configs drawn from several rankings (issue 22;
docs/ensemble.md, "Tile top-5 portfolio"). Every model gets one slot (its top pick) and the model
with the better tile criterion the rest (4 + 1 for two); the models take turns adding their best
config not already taken, and the weighted average orders the configs after the five, so one
model's blind spot for a kernel cannot fill all five slots. The rules before it lost out of fold
(``benchmarks/hedge.json``; BENCHMARKS.md, "Tile top-5 portfolio").
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from models.metrics import TILE_TOP_K, tile_score

from ensemble.weights import Criterion, blend_costs


def slot_sequence(counts: Sequence[int]) -> list[int]:
    """The member of each slot, interleaved: next is the member with the largest share of its
    slots still to fill (ties: more slots, then the earlier member). (3, 2) -> 0, 1, 0, 1, 0."""
    counts = [int(c) for c in counts]
    left = list(counts)
    out: list[int] = []
    for _ in range(sum(counts)):
        m = max((i for i in range(len(counts)) if left[i] > 0),
                key=lambda i: (left[i] / counts[i], counts[i], -i))
        out.append(m)
        left[m] -= 1
    return out


def portfolio_top(orders: Sequence[np.ndarray], counts: Sequence[int]) -> list[int]:
    """The portfolio's picks: in :func:`slot_sequence` order each member adds its best config not
    already picked. ``orders``: each member's configs, fastest first."""
    picks: list[int] = []
    pos = [0] * len(orders)
    for m in slot_sequence(counts):
        order = orders[m]
        while pos[m] < len(order) and int(order[pos[m]]) in picks:
            pos[m] += 1
        if pos[m] < len(order):
            picks.append(int(order[pos[m]]))
    return picks


def portfolio_costs(members: Sequence[np.ndarray], counts: Sequence[int],
                    rest: np.ndarray) -> np.ndarray:
    """Costs whose ranking is the portfolio's picks first, then every other config in the order
    of ``rest`` (the weighted average), so every consumer of costs (scores, submission rows)
    sees the portfolio's top five."""
    picks = portfolio_top([np.argsort(np.asarray(c, dtype=np.float64), kind="stable") for c in members],
                          counts)
    order = np.argsort(np.asarray(rest, dtype=np.float64), kind="stable")
    order = np.concatenate([np.asarray(picks, dtype=np.int64), order[~np.isin(order, picks)]])
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(len(order), dtype=np.float64)
    return out


def hedged_counts(values: Sequence[float], k: int = TILE_TOP_K) -> list[int]:
    """One slot for every model (its top pick), the rest to the model with the highest
    ``values`` (ties: the earlier); two models 4 + 1. With more models than ``k`` slots, the
    ``k`` highest get one each."""
    order = [int(m) for m in np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")]
    counts = [0] * len(order)
    for m in order[:k]:
        counts[m] = 1
    counts[order[0]] += max(0, k - len(order))
    return counts


def hedged_slots(normed: Sequence[Mapping[str, np.ndarray]], truth: Mapping[str, np.ndarray],
                 criterion: Criterion, stems: Sequence[str]) -> list[int]:
    """The slots of the models (by each one's ``criterion`` of its own top-5 score on ``stems``)
    and of their average (none: it orders the rest). Nothing is searched but which model is
    better, so on every kernel the answer holds each model's top pick and scores at least what
    the better model's top 4 scores."""
    return hedged_counts([float(criterion.value(np.array([tile_score(m[s], truth[s]) for s in stems])))
                          for m in normed]) + [0]


def blend_or_portfolio(normed: Sequence[Mapping[str, np.ndarray]], weights: Sequence[float],
                       stems: Sequence[str], counts: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """The blend's costs of ``stems``: the weighted average, or (``counts``: the slots of each
    model and of the average) the portfolio of the models and their average."""
    average = blend_costs(normed, weights, stems)
    if counts is None:
        return average
    return {s: portfolio_costs([*(m[s] for m in normed), average[s]], counts, average[s]) for s in stems}
