"""Tile top-5 portfolio: slots shared among member rankings, interleaved and de-duplicated, fitted
and scored out of fold."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.hedge import (PortfolioScorer, fit_portfolio, hedge_portfolio, hedged_counts,
                            nested_portfolio, portfolio_blend, portfolio_costs, portfolio_top,
                            slot_counts, slot_options, slot_sequence)
from ensemble.weights import Criterion, blend_costs
from models.metrics import tile_score
from models.predictions import normalise_costs


def test_slot_counts_and_interleaving():
    assert slot_counts([0.6, 0.4]).tolist() == [3, 2]
    assert slot_counts([1.0, 0.0, 0.0]).tolist() == [5, 0, 0]
    assert slot_counts([1, 1, 1]).tolist() == [2, 2, 1] and slot_counts([0.5, 0.5]).sum() == 5
    assert slot_sequence([3, 2]) == [0, 1, 0, 1, 0]
    assert slot_sequence([1, 1, 3]) == [2, 0, 1, 2, 2]
    assert slot_sequence([0, 5]) == [1] * 5
    assert len(slot_options(3)) == 21 and (slot_options(3).sum(axis=1) == 5).all()
    with pytest.raises(ValueError, match="positive sum"):
        slot_counts([0.0, 0.0])


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
        costs = portfolio_blend([{"k": good}, {"k": blind}], weights, counts, ["k"])["k"]
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


def test_fit_portfolio_maximises_the_criterion_over_every_slot_option():
    truth, a, b = _kernels(20)
    members = [a, b, blend_costs([a, b], [0.5, 0.5], sorted(truth))]
    fit = fit_portfolio(members, ["a", "b", "blend"], truth, Criterion())
    scorer = PortfolioScorer(members, truth)
    options = slot_options(3)
    means = scorer.matrix(options, sorted(truth)).mean(axis=1)
    assert fit.options[",".join(map(str, fit.counts))] == pytest.approx(means.max())
    assert fit.counts[0] > 0 and fit.counts[0] + fit.counts[1] + fit.counts[2] == 5
    assert len(fit.options) == 21


def test_nested_portfolio_fits_each_fold_without_it():
    truth, a, b = _kernels(18, seed=1)
    fold_of = {s: i % 3 for i, s in enumerate(sorted(truth))}
    weights = {str(k): [0.5, 0.5] for k in range(3)}
    members = [a, b, blend_costs([a, b], [0.5, 0.5], sorted(truth))]
    for rule, fit in (("hedged", lambda fit_on: hedge_portfolio(members, ["a", "b", "blend"], truth,
                                                                Criterion(), 2, stems=fit_on)),
                      ("fitted", lambda fit_on: fit_portfolio(members, ["a", "b", "blend"], truth,
                                                              Criterion(), stems=fit_on))):
        nested = nested_portfolio([a, b], ["a", "b"], truth, fold_of, weights, Criterion(), rule=rule)
        assert sorted(nested.costs) == sorted(truth) and set(nested.counts) == {"0", "1", "2"}
        for k in range(3):
            fit_on = [s for s in truth if fold_of[s] != k]
            assert nested.counts[str(k)] == fit(fit_on).counts
    models_only = nested_portfolio([a, b], ["a", "b"], truth, fold_of, weights, Criterion(),
                                   with_blend=False)
    assert all(len(c) == 2 for c in models_only.counts.values())


def test_the_guard_keeps_the_blend_unless_the_slots_pay_on_left_out_kernels():
    """One kernel alone prefers a slot for model 'a' (the blend ranks its best config 6th): the
    fitted option wins in-sample on that kernel only, so left out it is not chosen and the
    guard keeps the blend alone. Where 'a' helps on many kernels the fitted option stays."""
    rng = np.random.default_rng(4)
    truth, a, blend = {}, {}, {}
    for g in range(12):
        rt = rng.uniform(1, 6, size=30)
        rank = np.empty(30)
        rank[np.argsort(rt)] = np.arange(30.0)  # 0 = the best config
        truth[f"k{g}"] = rt
        blend[f"k{g}"] = np.where(rank == 0, 5.5, rank) if g == 0 else rank  # kernel 0: best 6th
        a[f"k{g}"] = rank if g == 0 else -rank  # elsewhere 'a' ranks the worst configs first
    fit = fit_portfolio([a, blend], ["a", "blend"], truth, Criterion())
    assert fit.options["1,4"] > fit.options["0,5"]  # in-sample the slot for 'a' pays
    assert fit.kept_preferred and fit.counts == [0, 5] and fit.loo < fit.preferred + 1e-3
    unguarded = fit_portfolio([a, blend], ["a", "blend"], truth, Criterion(), guard=False)
    assert unguarded.counts != [0, 5]
    truth, a, b = _kernels(20)
    members = [a, b, blend_costs([a, b], [0.5, 0.5], sorted(truth))]
    kept = fit_portfolio(members, ["a", "b", "blend"], truth, Criterion())
    assert not kept.kept_preferred and kept.loo > kept.preferred


class _FoldOptions:
    """Portfolio scores by a rule on the GNN's slots and the kernel's fold: its picks help a
    little on folds 1 and 2 and cost more on fold 0 (one fold model weak on all its kernels)."""

    def __init__(self, fold_of: dict[str, int]) -> None:
        self.fold_of = fold_of

    def matrix(self, options: np.ndarray, stems) -> np.ndarray:
        return np.array([[1.0 - 0.03 * o[0] if self.fold_of[s] == 0 else 1.0 + 0.02 * o[0]
                          for s in stems] for o in options])


def test_the_guard_held_out_by_fold_keeps_the_blend_when_one_fold_does_not_repay():
    fold_of = {f"k{f}{i}": f for f in range(3) for i in range(10)}
    truth = {s: np.arange(3.0) for s in fold_of}
    members = [{}, {}, {}]
    scorer = _FoldOptions(fold_of)
    by_graph = fit_portfolio(members, ["gnn", "lgbm", "blend"], truth, Criterion(), scorer=scorer)
    assert by_graph.counts == [5, 0, 0] and not by_graph.kept_preferred
    by_fold = fit_portfolio(members, ["gnn", "lgbm", "blend"], truth, Criterion(), scorer=scorer,
                            groups=fold_of)
    assert by_fold.counts == [0, 0, 5] and by_fold.kept_preferred
    assert by_fold.loo == pytest.approx((0.85 + 1.0 + 1.0) / 3)


def test_hedged_slots_one_per_model_the_rest_to_the_better():
    assert hedged_counts([0.9, 0.95]) == [1, 4] and hedged_counts([0.9, 0.9]) == [4, 1]
    assert hedged_counts([0.1, 0.3, 0.2]) == [1, 3, 1] and hedged_counts([1.0]) == [5]
    assert hedged_counts([0.5] * 6) == [1, 1, 1, 1, 1, 0]
    # the better model's slots given, the others share the rest (the benchmark's 3 + 2)
    assert hedged_counts([0.9, 0.95], lead=3) == [2, 3] and hedged_counts([0.9, 0.9], lead=3) == [3, 2]
    assert hedged_counts([0.1, 0.3, 0.2], lead=2) == [1, 2, 2] and hedged_counts([1.0], lead=3) == [5]
    with pytest.raises(ValueError, match="lead"):
        hedged_counts([0.1, 0.2], lead=6)
    truth, a, b = _kernels(20)  # 'a' is blind on every fifth kernel, 'b' never: by the tail b is better
    members = [a, b, blend_costs([a, b], [0.5, 0.5], sorted(truth))]
    fit = hedge_portfolio(members, ["a", "b", "blend"], truth, Criterion(1.0, 0.2), 2)
    assert fit.counts == [1, 4, 0] and fit.rule == "hedged" and fit.options["b"] > fit.options["a"]
    # each model's picks are in the answer: at least the better model's top 4 and the other's top 1
    scorer = PortfolioScorer(members, truth)
    for stem in truth:
        assert scorer.score(fit.counts, stem) >= scorer.score([0, 4, 0], stem) - 1e-12
        assert scorer.score(fit.counts, stem) >= scorer.score([1, 0, 0], stem) - 1e-12
    with pytest.raises(ValueError, match="portfolio rule"):
        nested_portfolio([a, b], ["a", "b"], truth, {s: 0 for s in truth}, {}, Criterion(), rule="x")
