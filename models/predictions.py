"""The common prediction format every model writes and the ensemble reads.

One file per (model, collection, split)::

    PREDS/<model>/<collection-slug>/<split>.npz     # keys: graph stems; values: float32 (c,)

Each value holds one *cost* per config, in the config order of the source npz file:
**lower cost = predicted faster**. A graph's ranking is ``np.argsort(cost, kind="stable")``.
Training-split deduplication never applies to valid/test predictions: their arrays always have
one entry per config of the original file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from features.atomic import save_npz
from features.collections import Collection


def predictions_path(preds_dir: str | os.PathLike, model: str, collection: Collection,
                     split: str) -> Path:
    return Path(preds_dir) / model / collection.slug / f"{split}.npz"


def write_predictions(path: str | os.PathLike, costs: dict[str, np.ndarray]) -> None:
    """Atomically write per-graph cost arrays (lower = faster)."""
    arrays = {}
    for stem, cost in costs.items():
        cost = np.asarray(cost, dtype=np.float32).reshape(-1)
        if not np.all(np.isfinite(cost)):
            raise ValueError(f"{path}: non-finite predicted cost for graph {stem!r}")
        arrays[stem] = cost
    save_npz(path, **arrays)


def read_predictions(path: str | os.PathLike) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no predictions file (run the model's predict step first)")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k].astype(np.float64) for k in data.files}


def ranking(cost: np.ndarray) -> np.ndarray:
    """Config indices from predicted fastest to slowest (stable for ties)."""
    return np.argsort(np.asarray(cost), kind="stable")
