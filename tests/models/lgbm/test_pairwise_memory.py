"""Bounded memory of the explicit pairwise mode: pairs are never materialised as one matrix."""

from __future__ import annotations

import tracemalloc

import numpy as np

from tpurank.collections import get_collection
from tpurank.config import with_preset
from models.lgbm.config import LgbmConfig
from models.lgbm.data import Rows
from models.lgbm.pairwise import PairSequence, pair_matrix, pairwise_scores, sample_pairs
from models.lgbm.fit import fit_model

LAYOUT = get_collection("layout:xla:random")
F = 50  # pair rows: 2F float32 = 400 bytes


def _rows(n_graphs: int, n_configs: int, seed: int = 0) -> Rows:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_graphs * n_configs, F)).astype(np.float32)
    target = np.exp(X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=len(X)))
    return Rows(X=X, graph_code=np.repeat(np.arange(n_graphs), n_configs), config=np.tile(
        np.arange(n_configs), n_graphs), target=target, graphs=[f"g{k}" for k in range(n_graphs)],
        feature_names=[f"f_{k}" for k in range(F)])


def _peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_sequence_rows_equal_the_pair_matrix() -> None:
    rows = _rows(3, 40)
    a, b, _ = sample_pairs(rows.graph_code, rows.target, 100, np.random.default_rng(0))
    seq = PairSequence(rows.X, a, b, batch_size=7)
    whole = pair_matrix(rows.X, a, b)
    assert len(seq) == len(a)
    np.testing.assert_array_equal(seq[5:19], whole[5:19])
    np.testing.assert_array_equal(seq[3], whole[3])
    assert seq[3].dtype == np.float64  # LightGBM's bin sampler insists on float64 rows


def test_pairwise_training_memory_does_not_grow_with_the_pair_count(monkeypatch) -> None:
    from models.lgbm import fit

    monkeypatch.setattr(fit, "PAIR_BIN_SAMPLE", 5000)
    monkeypatch.setattr(fit, "MAX_PAIRS_TOTAL", 10**7)
    rows = _rows(10, 400)
    cfg = with_preset(LgbmConfig, "quick", num_boost_round=3, min_rounds=1, threads=1, folds=0)
    peaks = {}
    for pairs in (20_000, 200_000):  # 2,000 and 20,000 pairs per graph
        cfg.pairs_per_graph = pairs // 10
        peaks[pairs] = _peak_mb(lambda: fit_model("pairwise", rows, None, cfg, LAYOUT))
    matrix_mb = 200_000 * 2 * F * 4 / 2**20  # 76 MB: what one float32 pair matrix would take
    a, b, _ = sample_pairs(rows.graph_code, rows.target, 20_000, np.random.default_rng(0))
    assert _peak_mb(lambda: pair_matrix(rows.X, a, b)) > matrix_mb  # the old way, for scale
    assert peaks[200_000] < 20, peaks  # sample + one batch + 8-byte indices per pair
    assert peaks[200_000] < 0.3 * matrix_mb, peaks


def test_pairwise_scoring_memory_is_bounded_by_max_bytes() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5_000, F)).astype(np.float32)
    refs = X[:32]
    margin = lambda m: m[:, 0]  # noqa: E731  (a faster when its f_0 is larger)
    small = _peak_mb(lambda: pairwise_scores(margin, X, refs, max_bytes=4 << 20))
    scores = pairwise_scores(margin, X, refs, max_bytes=4 << 20)
    np.testing.assert_allclose(scores, pairwise_scores(margin, X, refs, batch_pairs=10**7))
    assert small < 16, small  # vs 5,000 x 32 pairs x 2 x 400 B = 122 MB evaluated at once
