"""Pairwise mode: pair sampling, pair features and scoring pairs back into a ranking."""

from __future__ import annotations

import numpy as np

from models.lgbm.pairwise import pair_feature_names, pair_matrix, pairwise_scores, sample_pairs


def test_pairs_are_within_a_graph_distinct_and_correctly_labelled() -> None:
    rng = np.random.default_rng(0)
    codes = np.repeat(np.arange(4), [50, 2, 1, 30])
    target = rng.random(len(codes))
    target[[0, 1]] = 0.5  # a tie: never sampled as a pair
    a, b, label = sample_pairs(codes, target, 200, rng)
    assert np.all(codes[a] == codes[b])
    assert np.all(a != b)
    np.testing.assert_array_equal(label, (target[a] < target[b]).astype(np.float32))
    assert not np.any((a == 0) & (b == 1) | (a == 1) & (b == 0))
    assert 0.4 < label.mean() < 0.6, "random orientation keeps the classes balanced"
    per_graph = np.bincount(codes[a], minlength=4)
    assert per_graph[2] == 0  # a single config makes no pair
    assert per_graph[1] <= 1  # at most n(n-1)/2 pairs
    assert per_graph[0] <= 200 and per_graph[3] <= 200


def test_sampling_is_deterministic_with_a_seed() -> None:
    codes = np.repeat(np.arange(3), 40)
    target = np.random.default_rng(1).random(len(codes))
    p1 = sample_pairs(codes, target, 100, np.random.default_rng(7))
    p2 = sample_pairs(codes, target, 100, np.random.default_rng(7))
    for x, y in zip(p1, p2):
        np.testing.assert_array_equal(x, y)


def test_pair_matrix_is_difference_then_mean() -> None:
    X = np.array([[1.0, 10.0], [3.0, 20.0]], np.float32)
    M = pair_matrix(X, np.array([0]), np.array([1]))
    np.testing.assert_allclose(M, [[-2.0, -10.0, 2.0, 15.0]])
    assert pair_feature_names(["f_a", "f_b"]) == ["diff__f_a", "diff__f_b", "mean__f_a", "mean__f_b"]


def test_scores_recover_the_order_of_an_oracle_comparator() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)).astype(np.float32)
    refs = X[rng.choice(500, 16, replace=False)]

    def margin(pairs: np.ndarray) -> np.ndarray:  # "a faster than b" when x_a[0] > x_b[0]
        return np.tanh(pairs[:, 0])

    scores = pairwise_scores(margin, X, refs, batch_pairs=1000)  # several batches
    # a monotone comparator gives a monotone Borda score (ties allowed between refs)
    order = np.argsort(X[:, 0])
    assert np.all(np.diff(scores[order]) >= -1e-9)
    assert np.corrcoef(scores, X[:, 0])[0, 1] > 0.9
