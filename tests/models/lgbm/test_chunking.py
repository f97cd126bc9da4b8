"""Query groups: graphs with more rows than the group limit are split into balanced chunks."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np

from models.lgbm.data import chunk_groups, runtime_grades


def _codes(sizes: list[int]) -> np.ndarray:
    return np.concatenate([np.full(n, g) for g, n in enumerate(sizes)]).astype(np.int64)


def test_every_row_once_and_each_chunk_from_one_graph() -> None:
    codes = _codes([5, 1000, 37, 250])
    order, sizes = chunk_groups(codes, 100, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(len(codes)))
    assert sizes.sum() == len(codes) and sizes.max() <= 100
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for k in range(len(sizes)):
        chunk = order[bounds[k]:bounds[k + 1]]
        assert len(set(codes[chunk].tolist())) == 1


def test_chunks_are_balanced() -> None:
    order, sizes = chunk_groups(_codes([1001]), 500, np.random.default_rng(0))
    assert sorted(sizes.tolist()) == [333, 334, 334]  # not 500 + 500 + 1


def test_small_graph_is_one_group_and_seed_is_deterministic() -> None:
    codes = _codes([30, 70])
    a = chunk_groups(codes, 100, np.random.default_rng(5))
    b = chunk_groups(codes, 100, np.random.default_rng(5))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert a[1].tolist() == [30, 70]


def test_lightgbm_accepts_a_graph_larger_than_its_query_limit() -> None:
    n = 10_500  # LightGBM refuses queries of more than 10,000 rows
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    label = runtime_grades(X[:, 0], 10)
    order, sizes = chunk_groups(np.zeros(n, np.int64), 10_000, rng)
    assert len(sizes) == 2
    params = {"objective": "lambdarank", "verbosity": -1, "num_threads": 1,
              "lambdarank_truncation_level": 5, "label_gain": list(range(10))}
    booster = lgb.train(params, lgb.Dataset(X[order], label=label[order], group=sizes), 2)
    assert booster.current_iteration() == 2
