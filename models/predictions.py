"""The common prediction format every model writes and the ensemble reads.

One file per (run, collection, split), ``PREDS/<run>/<collection-slug>/<split>.npz``: keys are
graph stems, values float32 *costs* (**lower = predicted faster**), one per config of the source
file, in its order (valid/test rows are never deduplicated).

A model trained with several seeds writes one run per seed, ``<model>@seed<k>``
(:func:`run_name`); reading model ``gnn`` (:func:`read_model_predictions`) averages every run's
per-graph normalised costs (:func:`normalise_costs`): seeds average first, then models blend.

A run trained on ``--folds K`` (:mod:`models.cv`) also writes ``oof.npz`` (every labelled graph,
by the fold model that did not see it), ``oof-config.npz`` (optional: each oof entry's source
config index, as train rows may be deduplicated or subsampled), ``oof-target.npz``,
``valid.npz`` (the valid graphs' OOF costs), ``test-fold<k>.npz`` and ``test.npz`` (their
average, :func:`average_folds`). The ensemble fits its blend on ``oof`` (:func:`read_oof`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.atomic import save_npz
from tpurank.collections import Collection


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


SEED_SEPARATOR = "@seed"
OOF_SPLIT = "oof"
OOF_CONFIG_SPLIT = "oof-config"


def fold_split(k: int) -> str:
    """Prediction-split name of fold model ``k`` on the test graphs: ``test-fold<k>``."""
    return f"test-fold{int(k)}"


def fold_splits(preds_dir: str | os.PathLike, run: str, collection: Collection) -> list[str]:
    """The ``test-fold<k>`` splits a run wrote for a collection, by fold number."""
    d = Path(preds_dir) / run / collection.slug
    found = [(int(m.group(1)), m.group(0)) for p in (d.glob("test-fold*.npz") if d.is_dir() else [])
             if (m := re.fullmatch(r"test-fold(\d+)", p.stem))]
    return [name for _, name in sorted(found)]
NORMALISATIONS = ("rank", "minmax", "zscore")


def run_name(model: str, seed: int | None = None) -> str:
    """Directory name of one model run: ``gnn@seed3`` (or ``gnn`` without a seed)."""
    return model if seed is None else f"{model}{SEED_SEPARATOR}{int(seed)}"


def model_runs(preds_dir: str | os.PathLike, model: str) -> list[str]:
    """All runs of ``model`` under ``preds_dir``: ``model`` itself and ``model@seed<k>``, sorted.

    ``model`` may itself be a run name (``gnn@seed0``): then only that run matches.
    """
    root = Path(preds_dir)
    if not root.is_dir():
        return []
    pattern = re.compile(re.escape(model) + r"(" + re.escape(SEED_SEPARATOR) + r"\d+)?")
    runs = [d.name for d in root.iterdir() if d.is_dir() and pattern.fullmatch(d.name)]
    return sorted(runs, key=lambda r: (len(r), r))


def normalise_costs(cost: np.ndarray, method: str = "minmax") -> np.ndarray:
    """Put one graph's costs on a common scale so models (and seeds) can be averaged.

    ``rank``: average ranks scaled to [0, 1] (robust to outliers; a Borda count when averaged);
    ``minmax``: (c - min) / (max - min); ``zscore``: (c - mean) / std. A constant cost maps to
    zeros. Lower stays faster in all three.
    """
    cost = np.asarray(cost, dtype=np.float64).reshape(-1)
    n = cost.size
    if n and cost.max() == cost.min():
        return np.zeros(n)
    if method == "rank":
        from scipy.stats import rankdata

        return (rankdata(cost) - 1.0) / (n - 1)
    if method == "minmax":
        return (cost - cost.min()) / (cost.max() - cost.min()) if n else np.zeros(0)
    if method == "zscore":
        std = cost.std() if n else 0.0
        return (cost - cost.mean()) / std if std > 0 else np.zeros(n)
    raise ValueError(f"unknown normalisation {method!r}; expected one of {NORMALISATIONS}")


def read_model_predictions(preds_dir: str | os.PathLike, model: str, collection: Collection,
                           split: str, norm: str = "minmax") -> dict[str, np.ndarray]:
    """Seed-averaged costs of ``model``: each run's graph costs normalised, then averaged.

    Raises FileNotFoundError (naming the runs looked for) when no run has this file, and
    ValueError when runs disagree on the graphs or on a graph's config count.
    """
    runs = model_runs(preds_dir, model)
    paths = [predictions_path(preds_dir, r, collection, split) for r in runs]
    paths = [p for p in paths if p.is_file()]
    if not paths:
        raise FileNotFoundError(
            f"no predictions of model {model!r} for {collection.name}/{split} under {preds_dir} "
            f"(looked for {model}/ and {model}{SEED_SEPARATOR}<k>/ holding "
            f"{collection.slug}/{split}.npz; run the model's predict step first)")
    return average_runs([read_predictions(p) for p in paths], norm, [str(p) for p in paths])


def _average(runs: Sequence[Mapping[str, np.ndarray]], norm: str,
             names: Sequence[str]) -> dict[str, np.ndarray]:
    """Each graph's costs normalised per run, then averaged over the runs; ValueError naming the
    run when the runs disagree on the graphs or on a graph's config count."""
    total: dict[str, np.ndarray] = {}
    for name, preds in zip(names, runs):
        if total and set(preds) != set(total):
            diff = sorted(set(preds) ^ set(total))
            raise ValueError(f"{name} predicts other graphs than {names[0]} (e.g. {diff[:3]})")
        for stem, cost in preds.items():
            normed = normalise_costs(cost, norm)
            if stem in total and total[stem].shape != normed.shape:
                raise ValueError(f"{name}: graph {stem!r} has {normed.size} costs, {names[0]} has "
                                 f"{total[stem].size} (different config counts)")
            total[stem] = total.get(stem, 0.0) + normed
    return {stem: cost / len(runs) for stem, cost in total.items()}


def average_runs(runs: Sequence[Mapping[str, np.ndarray]], norm: str = "minmax",
                 names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Several runs' (seeds') costs of the same graphs averaged (:func:`_average`; what the blend
    reads of a model, :func:`read_model_predictions`); ``names`` name the runs in errors."""
    names = list(names) if names is not None else [f"run {i}" for i in range(len(runs))]
    # rounded to float32 (the file precision) so that equal averages tie exactly, whatever the
    # order of float64 additions
    return {stem: cost.astype(np.float32).astype(np.float64)
            for stem, cost in _average(runs, norm, names).items()}


def average_folds(fold_costs: list[dict[str, np.ndarray]], norm: str = "zscore") -> dict[str, np.ndarray]:
    """The fold ensemble of one run: each fold model's costs normalised per graph (``zscore`` by
    default), then averaged (:func:`_average`), by sorted graph stem."""
    if not fold_costs:
        raise ValueError("no fold predictions to average")
    averaged = _average(fold_costs, norm, [f"fold {k}" for k in range(len(fold_costs))])
    return {stem: averaged[stem] for stem in sorted(averaged)}


def write_fold_average(preds_dir: str | os.PathLike, run: str, collection: Collection,
                       folds: int) -> Path:
    """Write ``test.npz`` of ``run`` as the average of its ``folds`` ``test-fold<k>.npz`` files
    (FileNotFoundError naming the first missing one). Returns the path written."""
    paths = [predictions_path(preds_dir, run, collection, fold_split(k)) for k in range(folds)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: missing fold prediction ({len(missing)} of {folds} "
                                "missing)")
    path = predictions_path(preds_dir, run, collection, "test")
    write_predictions(path, average_folds([read_predictions(p) for p in paths]))
    return path


def read_oof(preds_dir: str | os.PathLike, run: str,
             collection: Collection) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{stem: (config indices, costs)}`` of a run's OOF predictions. Indices come from
    ``oof-config.npz`` when the run wrote one (ValueError naming the graph when its lengths
    disagree with the costs), else they are ``0..c-1``."""
    costs = read_predictions(predictions_path(preds_dir, run, collection, OOF_SPLIT))
    index_path = predictions_path(preds_dir, run, collection, OOF_CONFIG_SPLIT)
    index: dict[str, np.ndarray] = {}
    if index_path.is_file():
        with np.load(index_path, allow_pickle=False) as data:
            index = {k: data[k].astype(np.int64).reshape(-1) for k in data.files}
    out = {}
    for stem, cost in costs.items():
        idx = index[stem] if stem in index else np.arange(cost.size)
        if idx.size != cost.size:
            raise ValueError(f"{index_path}: graph {stem!r} lists {idx.size} config indices for "
                             f"{cost.size} OOF costs")
        out[stem] = (idx, cost)
    return out
