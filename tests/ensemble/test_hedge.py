"""Tile top-5 hedging: at most ``per_group`` of the submitted five from one tile-count group."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.hedge import hedged_costs, hedged_order


def test_hedge_spreads_the_top5_over_groups_and_keeps_the_order():
    cost = np.arange(10, dtype=float)  # config i is the i-th best prediction
    groups = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3, 4])
    order = hedged_order(cost, groups, per_group=2)
    assert order[:5].tolist() == [0, 1, 4, 5, 6]  # two of group 0, two of 1, then group 2
    assert order[5:].tolist() == [2, 3, 7, 8, 9]  # the rest in cost order
    assert sorted(order.tolist()) == list(range(10))
    assert hedged_order(cost, groups, per_group=1)[:5].tolist() == [0, 4, 6, 7, 9]


def test_hedge_off_or_too_few_groups_falls_back_to_cost_order():
    cost = np.array([0.3, 0.1, 0.2, 0.5, 0.4, 0.0])
    plain = np.argsort(cost, kind="stable")
    assert np.array_equal(hedged_order(cost, np.zeros(6), per_group=0), plain)
    assert np.array_equal(hedged_order(cost, np.zeros(6), per_group=5), plain)
    # one group, at most 2 from it: the top 5 is topped up in cost order
    assert hedged_order(cost, np.zeros(6), per_group=2)[:5].tolist() == plain[:5].tolist()
    with pytest.raises(ValueError, match="groups for 6 configs"):
        hedged_order(cost, np.zeros(5), per_group=2)


def test_hedged_costs_rank_like_the_hedged_order():
    rng = np.random.default_rng(0)
    cost, groups = rng.normal(size=40), rng.integers(0, 4, size=40)
    hedged = hedged_costs(cost, groups, per_group=1)
    assert np.array_equal(np.argsort(hedged, kind="stable"), hedged_order(cost, groups, 1))
    top = np.argsort(hedged, kind="stable")[:5]
    assert len(set(groups[top[:4]].tolist())) == 4  # four groups: one each, then topped up


def test_tile_count_groups_of_a_generated_kernel(tiny_root):
    from features.io import discover, load_graph
    from features.tabular import tile_count_groups
    from tpurank.collections import get_collection

    gf = discover(tiny_root, [get_collection("tile:xla")], ["train"])[0]
    g = load_graph(gf.path)
    groups = tile_count_groups(g)
    assert groups.shape == (len(np.asarray(g.config_feat)),) and groups.min() == 0
    assert 1 < groups.max() + 1 <= len(groups)
