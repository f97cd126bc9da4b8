"""Explicit pairwise mode: a binary classifier on feature differences of config pairs (sampling,
pair features and the Borda-style scoring back into a ranking: docs/lgbm.md, "How rows become a
ranking problem"). Higher score = predicted faster.

Pair features: ``[x_a - x_b, (x_a + x_b) / 2]``: the difference carries what distinguishes the
two configs, the mean the context (graph-level features vanish from the difference).

Memory: the pair matrix (2F float32 per pair) is never materialised whole. Training feeds
LightGBM a :class:`PairSequence` that computes pair rows batch by batch from the config rows
and two int32 index vectors (8 bytes per pair); scoring evaluates a bounded number of pairs at
a time (:func:`pairwise_scores`, ``max_bytes``).
"""

from __future__ import annotations

import numpy as np

import lightgbm as lgb

from models.lgbm.data import graph_runs

# Bytes of pair features (forward and backward matrices together) evaluated per predict call.
SCORE_BATCH_BYTES = 32 << 20


def pair_feature_names(names: list[str]) -> list[str]:
    """Names of the pair-matrix columns: ``diff__<name>`` then ``mean__<name>``."""
    return [f"diff__{n}" for n in names] + [f"mean__{n}" for n in names]


def sample_pairs(graph_code: np.ndarray, target: np.ndarray, pairs_per_graph: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample same-graph config pairs; returns row indices ``a``, ``b`` and label ``a faster``."""
    all_a, all_b = [], []
    for rows in graph_runs(np.asarray(graph_code)):
        n = len(rows)
        if n < 2:
            continue
        m = int(min(pairs_per_graph, n * (n - 1) // 2))
        i = rng.integers(0, n, size=m)
        j = rng.integers(0, n - 1, size=m)
        j = j + (j >= i)  # distinct from i, uniform over the others
        all_a.append(rows[i])
        all_b.append(rows[j])
    if not all_a:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.float32)
    a, b = np.concatenate(all_a), np.concatenate(all_b)
    ta, tb = target[a], target[b]
    keep = ta != tb
    a, b = a[keep], b[keep]
    return a, b, (target[a] < target[b]).astype(np.float32)


def pair_matrix(X: np.ndarray, a: np.ndarray, b: np.ndarray,
                X_b: np.ndarray | None = None) -> np.ndarray:
    """Pair features ``[x_a - x_b, (x_a + x_b) / 2]`` (``b`` indexes ``X_b`` when given)."""
    xa = X[a]
    xb = (X if X_b is None else X_b)[b]
    return np.concatenate([xa - xb, 0.5 * (xa + xb)], axis=1).astype(np.float32, copy=False)


class PairSequence(lgb.Sequence):
    """The pair matrix ``pair_matrix(X, a, b)`` as a LightGBM :class:`lightgbm.Sequence`.

    LightGBM reads a sample of single rows (bin boundaries, ``bin_construct_sample_cnt``) and
    then consecutive slices of ``batch_size`` rows, which it bins into its own compact
    (one byte per feature per row) storage; at no point is the float32 pair matrix whole.
    """

    def __init__(self, X: np.ndarray, a: np.ndarray, b: np.ndarray, batch_size: int = 4096) -> None:
        if len(a) != len(b):
            raise ValueError(f"PairSequence: {len(a)} first and {len(b)} second indices")
        self.X = X
        self.a = np.asarray(a, np.int32 if len(X) < 2**31 else np.int64)
        self.b = np.asarray(b, self.a.dtype)
        self.batch_size = max(1, int(batch_size))

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, idx: int | slice | list[int]) -> np.ndarray:
        if isinstance(idx, (int, np.integer)):  # bin sampling: LightGBM wants float64 rows
            return pair_matrix(self.X, self.a[idx:idx + 1], self.b[idx:idx + 1])[0].astype(np.float64)
        if isinstance(idx, (slice, list, np.ndarray)):
            return pair_matrix(self.X, self.a[idx], self.b[idx])
        raise TypeError(f"PairSequence index must be int, slice or list, got {type(idx).__name__}")


def pairwise_scores(predict_margin, X: np.ndarray, X_refs: np.ndarray,
                    batch_pairs: int = 0, max_bytes: int = SCORE_BATCH_BYTES) -> np.ndarray:
    """Score each row of ``X`` (one graph) against ``X_refs``; higher = predicted faster.

    ``predict_margin`` maps a pair matrix to raw margins (``booster.predict(..., raw_score=True)``).
    At most ``batch_pairs`` pairs (default: as many as fit ``max_bytes`` of forward plus
    backward pair features, at least one row's ``len(X_refs)`` pairs) are evaluated at once.
    """
    n, r = len(X), len(X_refs)
    if n == 0 or r == 0:
        return np.zeros(n, np.float64)
    scores = np.empty(n, np.float64)
    if batch_pairs <= 0:
        batch_pairs = max(1, max_bytes // (2 * 2 * X.shape[1] * 4))
    per_batch = max(1, batch_pairs // r)
    ref_idx = np.arange(r)
    for start in range(0, n, per_batch):
        rows = np.arange(start, min(n, start + per_batch))
        a = np.repeat(rows, r)
        b = np.tile(ref_idx, len(rows))
        forward = predict_margin(pair_matrix(X, a, b, X_refs))
        backward = predict_margin(pair_matrix(X_refs, b, a, X))
        margin = 0.5 * (np.asarray(forward) - np.asarray(backward))
        scores[rows] = margin.reshape(len(rows), r).mean(axis=1)
    return scores
