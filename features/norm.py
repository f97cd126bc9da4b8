"""Node-feature (and tile config-feature) normalisation stats, fitted on train graphs only."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from tpurank.atomic import save_npz
from tpurank.collections import Collection, get_collection
from features.processed import norm_path

NORM_EPS = 1e-6


@dataclass
class NormStats:
    """Per-column mean/std (train only); ``config_*`` only for tile collections."""

    node_mean: np.ndarray
    node_std: np.ndarray
    node_names: list[str]
    config_mean: np.ndarray | None = None
    config_std: np.ndarray | None = None

    def key(self) -> str:
        h = hashlib.sha256()
        for a in (self.node_mean, self.node_std, self.config_mean, self.config_std):
            if a is not None:
                h.update(np.ascontiguousarray(a, np.float64).tobytes())
        h.update("|".join(self.node_names).encode())
        return h.hexdigest()[:16]

    def save(self, path: str | os.PathLike) -> None:
        arrays = {"node_mean": self.node_mean, "node_std": self.node_std,
                  "node_names": np.array(self.node_names)}
        if self.config_mean is not None:
            arrays.update(config_mean=self.config_mean, config_std=self.config_std)
        save_npz(path, **arrays)


def load_norm(features_dir: str | os.PathLike, collection: Collection | str) -> NormStats:
    """The normalisation stats saved by a build (``FEATURES/<slug>/norm.npz``)."""
    coll = get_collection(collection) if isinstance(collection, str) else collection
    path = norm_path(features_dir, coll)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no norm stats; run `python -m features build` with train")
    with np.load(path, allow_pickle=False) as d:
        return NormStats(d["node_mean"], d["node_std"], [str(s) for s in d["node_names"]],
                         d["config_mean"] if "config_mean" in d.files else None,
                         d["config_std"] if "config_std" in d.files else None)


def _moments(x: np.ndarray) -> np.ndarray:
    """(3, F): count, sum, sum of squares (float64)."""
    x = np.asarray(x, np.float64)
    return np.stack([np.full(x.shape[1], x.shape[0], np.float64), x.sum(0), (x * x).sum(0)])


def _fit(moments: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    total = sum(moments)
    count = np.maximum(total[0], 1.0)
    mean = total[1] / count
    std = np.sqrt(np.maximum(total[2] / count - mean ** 2, 0.0))
    return mean.astype(np.float32), np.where(std < NORM_EPS, 1.0, std).astype(np.float32)


def _apply(x: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None) -> np.ndarray:
    if mean is None or std is None:
        return x
    if x.shape[1] != len(mean):
        raise ValueError(f"norm stats have {len(mean)} columns, features {x.shape[1]}: "
                         "norm.npz is from a build with other transform parameters; rebuild")
    return ((x - mean) / std).astype(np.float32)
