"""Tile top-5 portfolio: a slot for each model and the rest to the better, interleaved and
de-duplicated, fitted out of fold."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.blend import nested_blend
from ensemble.hedge import (blend_or_portfolio, hedged_counts, hedged_slots, portfolio_costs,
                            portfolio_top, slot_sequence)
from ensemble.weights import Criterion, GraphScorer, blend_costs
from models.metrics import tile_score, tile_score_from_ranking
from models.predictions import normalise_costs
from tpurank.collections import get_collection

TILE = get_collection("tile:xla")


def test_slot_interleaving():
    assert slot_sequence([3, 2]) == [0, 1, 0, 1, 0]
    assert slot_sequence([1, 1, 3]) == [2, 0, 1, 2, 2]
    assert slot_sequence([0, 5]) == [1] * 5
    assert slot_sequence([1, 4, 0]) == [1, 0, 1, 1, 1]  # 4 + 1: the better model first


def test_members_take_their_best_config_not_already_taken():
    a = np.array([4, 0, 1, 2, 3])  # member orders, fastest first
    b = np.array([4, 1, 0, 2, 3])
    assert portfolio_top([a, b], [3, 2]) == [4, 1, 0, 2, 3]  # b's 4 is taken: its next is 1
    assert portfolio_top([a, b], [5, 0]) == a.tolist()
    assert portfolio_top([a[:2], b[:2]], [3, 2]) == [4, 1, 0]  # orders shorter than the shares


def test_when_one_model_ranks_the_best_configs_last_the_top5_keeps_the_others_best():
    """The issue's case: model 'blind' ranks this kernel's best configs last, and carries most
    of the weight in the average, so the average's top 5 holds none of them; every portfolio
    that gives 'good' a slot still submits good's best picks."""
    rng = np.random.default_rng(0)
    runtime = rng.uniform(1.0, 6.0, size=60)
    best = np.argsort(runtime)[:3]
    good = normalise_costs(runtime + 0.01 * rng.normal(size=60))
    blind = normalise_costs(-runtime)  # the best configs last
    weights = [0.3, 0.7]  # good, blind
    average = blend_costs([{"k": good}, {"k": blind}], weights, ["k"])["k"]
    assert not set(np.argsort(average, kind="stable")[:5]) & set(best)
    assert tile_score(average, runtime) < 0
    for counts in ([1, 2, 2], [2, 0, 3], [1, 0, 4]):  # slots of good, blind, the average
        costs = blend_or_portfolio([{"k": good}, {"k": blind}], weights, ["k"], counts)["k"]
        top5 = np.argsort(costs, kind="stable")[:5]
        assert set(np.argsort(good, kind="stable")[:counts[0]]) <= set(top5)
        assert best[0] in top5 and tile_score(costs, runtime) == pytest.approx(1.0)


def test_portfolio_costs_put_the_picks_first_then_the_rest_in_blend_order():
    a = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    b = a[::-1].copy()
    rest = np.array([0.7, 0.6, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    costs = portfolio_costs([a, b], [3, 2], rest)
    order = np.argsort(costs, kind="stable")
    assert order[:5].tolist() == [0, 7, 1, 6, 2]
    assert order[5:].tolist() == [3, 4, 5]  # in rest's order
    assert sorted(order.tolist()) == list(range(8))


def _kernels(n: int, seed: int = 0):
    """'a' is sharp on most kernels but blind on every fifth; 'b' is never blind but noisier."""
    rng = np.random.default_rng(seed)
    truth, a, b = {}, {}, {}
    for g in range(n):
        rt = rng.uniform(1, 6, size=50)
        truth[f"k{g}"] = rt
        a[f"k{g}"] = normalise_costs(-rt if g % 5 == 0 else rt + 0.05 * rng.normal(size=50))
        b[f"k{g}"] = normalise_costs(rt + 1.0 * rng.normal(size=50))
    return truth, a, b


def test_nested_hedge_fits_each_fold_without_it():
    truth, a, b = _kernels(18, seed=1)
    fold_of = {s: i % 3 for i, s in enumerate(sorted(truth))}
    crit = Criterion(0.5, 0.2)
    nested = nested_blend(TILE, [a, b], truth, fold_of, 0.1, (0.0, 1.0), GraphScorer(TILE, [a, b], truth),
                          crit, hedge=True)
    assert sorted(nested.costs) == sorted(truth) and set(nested.slots) == {"0", "1", "2"}
    for k in range(3):
        fit_on = sorted(s for s in truth if fold_of[s] != k)
        assert nested.slots[str(k)] == hedged_slots([a, b], truth, crit, fit_on)
        w = nested.fits[str(k)].weights
        for s in (s for s in truth if fold_of[s] == k):
            np.testing.assert_array_equal(nested.costs[s], blend_or_portfolio([a, b], w, [s], nested.slots[str(k)])[s])
            np.testing.assert_array_equal(nested.average[s], blend_costs([a, b], w, [s])[s])


def test_hedged_slots_one_per_model_the_rest_to_the_better():
    assert hedged_counts([0.9, 0.95]) == [1, 4] and hedged_counts([0.9, 0.9]) == [4, 1]
    assert hedged_counts([0.1, 0.3, 0.2]) == [1, 3, 1] and hedged_counts([1.0]) == [5]
    assert hedged_counts([0.5] * 6) == [1, 1, 1, 1, 1, 0]
    truth, a, b = _kernels(20)  # 'a' is blind on every fifth kernel, 'b' never: by the tail b is better
    slots = hedged_slots([a, b], truth, Criterion(1.0, 0.2), sorted(truth))
    assert slots == [1, 4, 0]
    # each model's picks are in the answer: at least the better model's top 4 and the other's top 1
    for stem in truth:
        def score(counts):
            orders = [np.argsort(m[stem], kind="stable") for m in (a, b)]
            return tile_score_from_ranking(np.array(portfolio_top(orders, counts[:2])), truth[stem])
        assert score(slots) >= score([0, 4, 0]) - 1e-12 and score(slots) >= score([1, 0, 0]) - 1e-12
