"""Grouped K-fold cross-validation of the LightGBM ranker (``--folds K >= 2``) over
:func:`models.cv.fold_plan`'s folds: fold model ``k`` trains on ``plan.training(k)`` (train and
valid tabular rows), early-stops (and, with ``--mode auto``, picks its mode) on
``plan.inner_valid(k)``, never on a held-out graph, and predicts ``plan.held_out(k)`` and the test
split. ``M/fold<k>/`` (``M`` = the model dir) holds each fold's model and ``done.json`` (a killed
run resumes fold by fold); ``M/folds.json`` what each fold model saw.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from tpurank.atomic import remove_dead_temporaries, save_npz, write_json
from tpurank.collections import Collection
from features.processed import tabular_path
from models.cv import LABELLED_SPLITS as LABELLED, Key, fold_plan, write_fold_manifest
from models.lgbm.config import LgbmConfig
from models.lgbm.data import Rows, by_config, concat_rows, feature_columns, load_rows, read_keys
from models.lgbm.model import RankerModel
from models.lgbm.runstate import (DONE_FILE, LEDGER_FILE, Slicer, candidates, fit_candidates,
                                  is_current, read_done, record, score_common, summarise, write_done)
from models.predictions import (fold_split, predictions_path, read_predictions, write_fold_average,
                                write_predictions)

FOLDS_FILE = "folds.json"
HELD_OUT_FILE = "held_out.npz"


def fold_dir(cfg: LgbmConfig, collection: Collection, k: int) -> Path:
    return cfg.model_dir(collection) / f"fold{k}"


def _files(cfg: LgbmConfig, collection: Collection,
           keys: list[Key]) -> Iterator[tuple[str, Path, set[str]]]:
    """``(split, tabular file, stems)`` of the graphs ``keys`` ((split, stem) pairs), per file."""
    by_split: dict[str, set[str]] = {}
    for split, stem in keys:
        by_split.setdefault(split, set()).add(stem)
    for split, stems in sorted(by_split.items()):
        path = tabular_path(cfg.features_dir(), collection, split)
        if path.is_file():
            yield split, path, stems


def load_graphs(cfg: LgbmConfig, collection: Collection, keys: list[Key], max_per_graph: int,
                seed: int, names: list[str]) -> Rows | None:
    """Graded rows of the graphs ``keys`` ((split, stem) pairs) of ``collection``."""
    parts = []
    for split, path, stems in _files(cfg, collection, keys):
        rows = load_rows(path, max_per_graph, seed + LABELLED.index(split), names, graphs=stems)
        if len(rows) and rows.target is not None:
            parts.append(rows)
    return concat_rows(parts) if parts else None


def predict_graphs(model: RankerModel, cfg: LgbmConfig, collection: Collection,
                   keys: list[Key]) -> dict[str, np.ndarray]:
    """Costs of every config of the graphs ``keys`` (streamed, only their slices are read)."""
    out: dict[str, np.ndarray] = {}
    for split, path, stems in _files(cfg, collection, keys):
        out.update(model.predict_file(path, cfg.predict_batch_rows, graphs=stems,
                                      complete=split != "train"))
    return out


def labelled_index(cfg: LgbmConfig, collection: Collection) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per labelled graph ``(config indices, true runtimes)`` of its tabular rows, in ascending
    config order: every config for valid graphs, the deduplicated/subsampled ones for train."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split in LABELLED:
        path = tabular_path(cfg.features_dir(), collection, split)
        if path.is_file():
            keys = read_keys(path)
            if keys.has_target:
                out.update(by_config(keys, keys.target))
    return out


def labelled_truth(cfg: LgbmConfig, collection: Collection) -> dict[str, np.ndarray]:
    return {stem: target for stem, (_, target) in labelled_index(cfg, collection).items()}


def train_fold(cfg: LgbmConfig, collection: Collection, plan, k: int, names: list[str],
               truth: dict[str, np.ndarray], slicer: Slicer) -> dict:
    """Fit fold ``k``, write its held-out and test predictions; returns its metrics."""
    out_dir = fold_dir(cfg, collection, k)
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_dead_temporaries(out_dir)  # what a killed run's atomic writes left
    start = time.perf_counter()
    seen = list(plan.training(k))
    train = load_graphs(cfg, collection, seen, cfg.max_train_configs_per_graph, cfg.seed, names)
    if train is None:
        raise ValueError(f"{collection.name} fold {k}: no training rows in "
                         f"{cfg.features_dir() / collection.slug / 'tabular'}")
    inner_keys = plan.inner_valid(k)
    inner = load_graphs(cfg, collection, inner_keys, cfg.max_valid_configs_per_graph,
                        cfg.seed + 10, names)
    choosing = len(candidates(cfg, collection)) > 1 and inner is not None

    def evaluate(mode: str, model: RankerModel) -> dict:  # the mode choice: inner-valid graphs only
        inner_costs = predict_graphs(model, cfg, collection, inner_keys) if choosing else {}
        return {"inner_score": score_common(collection, inner_costs, truth)}

    chosen, model, results, _ = fit_candidates(cfg, collection, train, inner, out_dir, slicer,
                                               evaluate, "inner_score", f"{collection.name} fold {k}")
    held = plan.held_out(k)
    labelled_paths = [tabular_path(cfg.features_dir(), collection, s) for s in LABELLED]
    held_costs = predict_graphs(model, cfg, collection, held)
    record(out_dir, out_dir / HELD_OUT_FILE, held_costs, labelled_paths, sorted(s for _, s in held))
    test_path = tabular_path(cfg.features_dir(), collection, "test")
    if test_path.is_file():
        record(out_dir, test_fold_path(cfg, collection, k),
               model.predict_file(test_path, cfg.predict_batch_rows), [test_path])
    metrics = {"fold": k, "mode": chosen, "results": results,
               "best_iteration": results[chosen]["best_iteration"],
               "held_out_score": score_common(collection, held_costs, truth),
               "held_out_graphs": len(held_costs), "train_rows": len(train),
               "train_graphs": len(train.graphs), "inner_graphs": len(inner_keys),
               "seen": sorted(f"{sp}/{st}" for sp, st in seen + list(inner_keys)),
               "total_s": round(time.perf_counter() - start, 2)}
    write_json(out_dir / "metrics.json", metrics)
    write_done(out_dir, cfg, metrics)
    return metrics


def test_fold_path(cfg: LgbmConfig, collection: Collection, k: int) -> Path:
    return predictions_path(cfg.preds_dir(), cfg.run_name(), collection, fold_split(k))


def write_test_average(cfg: LgbmConfig, collection: Collection) -> Path | None:
    """``test.npz`` (:func:`write_fold_average`), once every fold model predicted the test split."""
    if not all(test_fold_path(cfg, collection, k).is_file() for k in range(cfg.folds)):
        return None
    return write_fold_average(cfg.preds_dir(), cfg.run_name(), collection, folds=cfg.folds)


def write_oof(cfg: LgbmConfig, collection: Collection, plan) -> dict[str, np.ndarray]:
    """``oof.npz`` (every labelled graph), ``oof-config.npz``, ``oof-target.npz`` and ``valid.npz``.

    Train graphs' tabular rows are deduplicated (maybe subsampled) by the feature build, so their
    OOF arrays cover those rows only, in ascending config order, with each entry's source config
    index and true runtime (mean over duplicates) beside them: the OOF file is scorable alone.
    """
    oof: dict[str, np.ndarray] = {}
    for k in range(cfg.folds):
        for stem, cost in read_predictions(fold_dir(cfg, collection, k) / HELD_OUT_FILE).items():
            if stem in oof:
                raise ValueError(f"{collection.name}: graph {stem!r} held out by two folds")
            oof[stem] = cost
    run = cfg.run_name()
    write_predictions(predictions_path(cfg.preds_dir(), run, collection, "oof"), oof)
    index = labelled_index(cfg, collection)
    short = [s for s in oof if s not in index or len(index[s][0]) != len(oof[s])]
    if short:
        raise ValueError(f"{collection.name}: OOF predictions of {short[:3]} do not match their "
                         "tabular rows (features rebuilt during training?); rerun train")
    for name, part in (("oof-config", 0), ("oof-target", 1)):
        arrays = {s: index[s][part] for s in oof}
        save_npz(predictions_path(cfg.preds_dir(), run, collection, name), **arrays)
    valid_stems = {st for sp, st in plan.graphs() if sp == "valid"}
    valid = {s: c for s, c in oof.items() if s in valid_stems}
    if valid:
        write_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), collection, "valid"),
                          valid)
    return oof


def write_manifest(cfg: LgbmConfig, collection: Collection, plan, folds: list[dict]) -> None:
    """``folds.json``: what each fold model saw, checked against the plan (no OOF leak)."""
    seen = {m["fold"]: [tuple(s.split("/", 1)) for s in m["seen"]] for m in folds}
    write_fold_manifest(
        cfg.model_dir(collection) / FOLDS_FILE, plan, seen,
        held_out={str(k): sorted(f"{sp}/{st}" for sp, st in plan.held_out(k))
                  for k in range(plan.folds)},
        modes={str(m["fold"]): m["mode"] for m in folds},
        models={str(k): str(fold_dir(cfg, collection, k)) for k in range(plan.folds)})


def train_folds(cfg: LgbmConfig, collection: Collection, seconds: float = float("inf")) -> dict:
    """All folds of one collection (each resumed when done), then OOF/test files and metrics."""
    start = time.perf_counter()
    plan = fold_plan(cfg.work, cfg.features_dir(), collection, folds=cfg.folds, seed=cfg.seed)
    train_path = tabular_path(cfg.features_dir(), collection, "train")
    names = feature_columns(train_path)
    truth = labelled_truth(cfg, collection)
    pending = [k for k in range(cfg.folds) if read_done(fold_dir(cfg, collection, k), cfg) is None]
    slicer = Slicer(seconds, max(1, len(pending) * len(candidates(cfg, collection))))
    folds = []
    for k in range(cfg.folds):
        done = read_done(fold_dir(cfg, collection, k), cfg)
        folds.append(done if done is not None else
                     train_fold(cfg, collection, plan, k, names, truth, slicer))
    oof = write_oof(cfg, collection, plan)
    write_test_average(cfg, collection)
    write_manifest(cfg, collection, plan, folds)
    valid_truth = {st: truth[st] for sp, st in plan.graphs() if sp == "valid" and st in truth}
    fold_scores = [f["held_out_score"] for f in folds if f["held_out_score"] is not None]
    modes = [f["mode"] for f in folds]
    metrics = {"collection": collection.name, "seed": cfg.seed, "folds": cfg.folds,
               "mode": max(set(modes), key=modes.count), "modes": modes,
               "oof_score": score_common(collection, oof, truth), "oof_graphs": len(oof),
               "fold_scores": fold_scores,
               "fold_mean": float(np.mean(fold_scores)) if fold_scores else None,
               "fold_sd": float(np.std(fold_scores)) if fold_scores else None,
               "valid_score": score_common(collection, oof, valid_truth),
               "valid_graphs": len(valid_truth),
               "best_iteration": [f["best_iteration"] for f in folds],
               "budget_s": None if seconds == float("inf") else round(seconds, 2),
               "total_s": round(time.perf_counter() - start, 2)}
    # a --folds 0 model left by an earlier run: its predictions (same run name) were just
    # replaced, and readers globbing seed*/model.txt would take it for this run's model
    for name in ("model.txt", "model.json", LEDGER_FILE):
        (cfg.model_dir(collection) / name).unlink(missing_ok=True)
    write_json(cfg.model_dir(collection) / "metrics.json", metrics)
    write_done(cfg.model_dir(collection), cfg, metrics)
    return metrics


def _predict_missing_valid(cfg: LgbmConfig, collection: Collection) -> None:
    """``valid`` predictions where training did not leave them (trained weights predicted in another
    WORK, e.g. the Kaggle inference notebook): each valid graph scored by a fold model that never
    saw it (``folds.json``), so the valid split stays out-of-fold."""
    out = predictions_path(cfg.preds_dir(), cfg.run_name(), collection, "valid")
    valid_path = tabular_path(cfg.features_dir(), collection, "valid")
    manifest_path = cfg.model_dir(collection) / "folds.json"
    if out.is_file() or not valid_path.is_file() or not manifest_path.is_file():
        return
    seen = json.loads(manifest_path.read_text())["seen"]
    costs: dict[str, np.ndarray] = {}
    for k in range(cfg.folds):
        fold_costs = RankerModel.load(fold_dir(cfg, collection, k)).predict_file(
            valid_path, cfg.predict_batch_rows)
        for stem, cost in fold_costs.items():
            if stem not in costs and f"valid/{stem}" not in set(seen[str(k)]):
                costs[stem] = cost
    write_predictions(out, costs)


def predict_folds(cfg: LgbmConfig, collection: Collection) -> dict[str, dict]:
    """Check (and complete, if a test-fold file is missing or stale) the fold predictions."""
    if read_done(cfg.model_dir(collection), cfg) is None:
        if not (cfg.model_dir(collection) / DONE_FILE).is_file():
            raise FileNotFoundError(f"{cfg.model_dir(collection)}: no finished {cfg.folds}-fold run "
                                    "(run `python -m models.lgbm train` first)")
        # finished with other training settings (e.g. weights trained elsewhere, predicted here
        # with this stage's defaults): the saved fold models are what gets predicted
        print(f"{collection.name}: the finished fold models in {cfg.model_dir(collection)} were "
              f"trained with other settings than these; predicting with them", file=sys.stderr)
    test_path = tabular_path(cfg.features_dir(), collection, "test")
    refreshed = 0
    for k in range(cfg.folds):
        out = test_fold_path(cfg, collection, k)
        if test_path.is_file() and not is_current(fold_dir(cfg, collection, k), out, [test_path]):
            model = RankerModel.load(fold_dir(cfg, collection, k))
            record(fold_dir(cfg, collection, k), out,
                   model.predict_file(test_path, cfg.predict_batch_rows), [test_path])
            refreshed += 1
    if refreshed or not predictions_path(cfg.preds_dir(), cfg.run_name(), collection, "test").is_file():
        write_test_average(cfg, collection)
    _predict_missing_valid(cfg, collection)
    summary: dict[str, dict] = {}
    for split in ("oof", "valid", "test"):
        out = predictions_path(cfg.preds_dir(), cfg.run_name(), collection, split)
        if not out.is_file():
            continue
        truth = labelled_truth(cfg, collection) if split != "test" else {}
        summary[split] = summarise(collection, out, read_predictions(out), truth,
                                   reused=not (split == "test" and refreshed))
    return summary
