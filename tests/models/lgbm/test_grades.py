"""Relevance grades: quantile bins of the within-graph runtime rank, fastest = highest grade."""

from __future__ import annotations

import numpy as np
import pytest

from models.lgbm.data import Rows, runtime_grades


def test_fastest_gets_highest_grade_and_order_is_monotone() -> None:
    rng = np.random.default_rng(0)
    target = rng.lognormal(size=300)
    grades = runtime_grades(target, 10)
    assert grades[np.argmin(target)] == 9
    assert grades[np.argmax(target)] == 0
    order = np.argsort(target)
    assert np.all(np.diff(grades[order]) <= 0), "a slower config never gets a higher grade"


def test_bins_are_equal_count_whatever_the_distribution() -> None:
    target = np.exp(np.linspace(0, 20, 1000))  # extremely skewed runtimes
    counts = np.bincount(runtime_grades(target, 10), minlength=10)
    assert counts.min() >= 99 and counts.max() <= 101


def test_ties_share_a_grade() -> None:
    target = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 5.0])
    grades = runtime_grades(target, 4)
    assert grades[1] == grades[4]
    assert grades[0] == grades[2]
    assert grades[1] > grades[3] > grades[0] >= grades[5]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_small_graphs(n: int) -> None:
    grades = runtime_grades(np.arange(n, dtype=float), 30)
    assert len(grades) == n
    assert np.all((grades >= 0) & (grades < 30))
    if n:
        assert grades[0] == 29


def test_grades_are_computed_per_graph() -> None:
    # graph 1 is 1000x slower overall; its fastest config must still get the top grade
    target = np.array([1.0, 2.0, 3.0, 1000.0, 2000.0, 3000.0])
    rows = Rows(X=np.zeros((6, 1), np.float32), graph_code=np.array([0, 0, 0, 1, 1, 1]),
                config=np.array([0, 1, 2, 0, 1, 2]), target=target, graphs=["a", "b"],
                feature_names=["f_x"])
    grades = rows.grades(3)
    np.testing.assert_array_equal(grades[:3], grades[3:])
    assert list(grades[:3]) == [2, 1, 0]
