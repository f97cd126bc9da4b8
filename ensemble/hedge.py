"""Tile top-5 hedging: spread the five submitted configs of a kernel over predicted tile-count
groups (issue 12).

The tile score only looks at the best true runtime among the five configs submitted. When a
ranker is sure about one tiling it fills all five slots with near-copies of it (same number of
tiles, other minor choices), and when that tiling is the wrong one the kernel scores badly even
if the true best config sits at predicted rank 6–14. Hedging keeps the ranker's order but takes
at most ``per_group`` configs from one *tile-count group* (configs whose kernel tile bounds cut
the output into the same number of tiles, :func:`features.tabular.tile_count_groups`) into the
top five; the rest of the ranking is unchanged.

``per_group`` is one small integer applied after the models and the blend; it is fitted on no
graph's runtimes and is chosen by the out-of-fold comparison in
``tests/bench/bench_hedge.py`` (BENCHMARKS.md, "Tile top-5 hedging").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models.metrics import TILE_TOP_K


def hedged_order(cost: np.ndarray, groups: np.ndarray, per_group: int, k: int = TILE_TOP_K) -> np.ndarray:
    """All configs fastest-first: the first ``k`` in cost order with at most ``per_group`` of one
    group (topped up in cost order when there are fewer groups than that allows), then the rest
    in cost order. ``per_group`` <= 0 or >= ``k``: plain cost order."""
    order = np.argsort(np.asarray(cost, dtype=np.float64), kind="stable")
    groups = np.asarray(groups)
    if len(groups) != len(order):
        raise ValueError(f"{len(groups)} tile-count groups for {len(order)} configs")
    if per_group <= 0 or per_group >= k or len(order) <= k:
        return order
    taken: dict[int, int] = {}
    picks: list[int] = []
    for i in order.tolist():
        g = int(groups[i])
        if taken.get(g, 0) < per_group:
            picks.append(i)
            taken[g] = taken.get(g, 0) + 1
            if len(picks) == k:
                break
    if len(picks) < k:  # too few groups: fill with the next configs in cost order
        chosen = set(picks)
        picks += [i for i in order.tolist() if i not in chosen][:k - len(picks)]
    head = np.asarray(picks, dtype=np.int64)
    rest = order[~np.isin(order, head)]
    return np.concatenate([head, rest])


def hedged_costs(cost: np.ndarray, groups: np.ndarray, per_group: int, k: int = TILE_TOP_K) -> np.ndarray:
    """Costs whose ranking is :func:`hedged_order` (the position of each config), so every
    consumer of costs (scores, submission rows) sees the hedged top ``k``."""
    order = hedged_order(cost, groups, per_group, k)
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(len(order), dtype=np.float64)
    return out


def graph_groups(path: str | Path) -> np.ndarray:
    """Tile-count group of every source config of the tile graph at ``path``."""
    from features.io import load_graph
    from features.tabular import tile_count_groups

    return tile_count_groups(load_graph(path))


def hedge_collection(costs: dict[str, np.ndarray], paths: dict[str, Path],
                     per_group: int) -> dict[str, np.ndarray]:
    """:func:`hedged_costs` of every graph's costs (over all its source configs)."""
    return {stem: hedged_costs(cost, graph_groups(paths[stem]), per_group)
            for stem, cost in costs.items()}
