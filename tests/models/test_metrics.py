"""The official metric: τ against scipy and a brute-force pair count; tile score by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from tpurank.collections import get_collection
from models.metrics import (final_score, graph_score, kendall_tau, score_collection,
                            tau_from_ranking, tile_score, tile_score_from_ranking)


def brute_force_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall τ-b from its definition: (C - D) / sqrt((n0 - n1)(n0 - n2))."""
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif dx == dy:
            concordant += 1
        else:
            discordant += 1
    denom = np.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denom if denom else 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=2, max_size=25))
def test_tau_matches_scipy_and_definition_with_ties(pairs):
    x = np.array([p[0] for p in pairs], float)
    y = np.array([p[1] for p in pairs], float)
    ours = kendall_tau(x, y)
    expected = brute_force_tau_b(x, y)
    assert ours == pytest.approx(expected, abs=1e-12)
    ref = kendalltau(x, y).statistic
    assert ours == pytest.approx(0.0 if np.isnan(ref) else ref, abs=1e-12)


def test_tau_extremes_and_degenerate():
    rt = np.array([3.0, 1.0, 2.0, 5.0])
    assert kendall_tau(rt, rt) == pytest.approx(1.0)
    assert kendall_tau(-rt, rt) == pytest.approx(-1.0)
    assert kendall_tau(np.ones(4), rt) == 0.0  # constant prediction: τ undefined -> 0
    assert kendall_tau(np.array([1.0]), np.array([2.0])) == 0.0
    with pytest.raises(ValueError, match="shape mismatch"):
        kendall_tau(np.ones(3), np.ones(4))


def test_tau_from_ranking_reads_a_permutation_fastest_first():
    rt = np.array([30.0, 10.0, 20.0, 40.0])
    assert tau_from_ranking(np.array([1, 2, 0, 3]), rt) == pytest.approx(1.0)
    assert tau_from_ranking(np.array([3, 0, 2, 1]), rt) == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    cost = rng.normal(size=50)
    rt = rng.normal(size=50) + cost
    assert tau_from_ranking(np.argsort(cost), rt) == pytest.approx(kendall_tau(cost, rt))


def test_tile_score_hand_computed():
    rt = np.array([5.0, 4.0, 10.0, 2.0, 8.0, 6.0, 3.0])  # best = 2.0 at index 3
    # predicted best 5 = indices 0,1,2,4,5 (costs) -> best among them 4.0 -> 2 - 4/2 = 0.0
    cost = np.array([0, 1, 2, 9, 3, 4, 8], float)
    assert tile_score(cost, rt) == pytest.approx(0.0)
    # index 6 (rt 3.0) in the top 5 -> 2 - 3/2 = 0.5
    cost[6] = -1
    assert tile_score(cost, rt) == pytest.approx(0.5)
    # the true best in the top 5 -> 1.0, whatever its position
    cost[3] = 0.5
    assert tile_score(cost, rt) == pytest.approx(1.0)
    assert tile_score_from_ranking([6, 0, 1, 2, 4], rt) == pytest.approx(0.5)
    assert tile_score_from_ranking([3], rt) == pytest.approx(1.0)
    # only the first 5 indices count
    assert tile_score_from_ranking([0, 1, 2, 4, 5, 3], rt) == pytest.approx(0.0)


def test_tile_score_fewer_configs_than_k_and_bad_runtime():
    assert tile_score(np.array([1.0, 0.0]), np.array([2.0, 4.0])) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        tile_score(np.array([1.0, 0.0]), np.array([0.0, 4.0]))


def test_collection_scores_and_final_mean():
    tile, layout = get_collection("tile:xla"), get_collection("layout:xla:random")
    rt = np.array([3.0, 1.0, 2.0])
    assert graph_score(tile, rt, rt) == 1.0
    assert graph_score(layout, -rt, rt) == pytest.approx(-1.0)
    res = score_collection(layout, {"a": rt, "b": -rt}, {"a": rt, "b": rt})
    assert res["score"] == pytest.approx(0.0) and res["n_graphs"] == 2
    with pytest.raises(KeyError, match="no predictions"):
        score_collection(layout, {"a": rt}, {"a": rt, "b": rt})
    assert final_score({"x": 0.5, "y": 1.0, "z": 0.0}) == pytest.approx(0.5)


def test_tile_score_rejects_a_prediction_of_the_wrong_length():
    with pytest.raises(ValueError, match="shape mismatch"):
        tile_score(np.zeros(4), np.ones(5))
