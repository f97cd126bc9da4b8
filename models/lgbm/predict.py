"""Prediction: every config of every valid and test graph, in the common format (model ``lgbm``).

Costs are the negated ranking scores (LightGBM scores are higher = faster; the common format
wants lower = faster). Valid/test rows are never deduplicated: each graph's array has one entry
per config of the source file (checked in :func:`models.lgbm.data.assemble_costs`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tpurank.collections import Collection
from features.io import discover
from features.processed import tabular_path
from models.lgbm.config import LgbmConfig
from models.lgbm.model import RankerModel
from models.lgbm.data import truth_by_graph
from models.lgbm.runstate import is_current, record, summarise
from models.predictions import predictions_path, read_predictions


def predict_collection(cfg: LgbmConfig, collection: Collection) -> dict[str, dict]:
    """Write ``WORK/preds/lgbm[-tag]@seed<k>/<slug>/{valid,test}.npz``; returns a summary per split.

    A file already written by the same model from the same tabular input (``train`` writes the
    valid split; the ledger of :mod:`models.lgbm.runstate`) is reused, not predicted again. With
    ``--folds K`` the fold models' files are checked/completed by :mod:`models.lgbm.folds`.
    """
    if cfg.folds >= 2:
        from models.lgbm.folds import predict_folds
        return predict_folds(cfg, collection)
    model_dir = cfg.model_dir(collection)
    model: RankerModel | None = None
    summary: dict[str, dict] = {}
    for split in ("valid", "test"):
        path = tabular_path(cfg.features_dir(), collection, split)
        if not path.is_file():
            print(f"[lgbm] {collection.name} {split}: no tabular file at {path}; skipped", flush=True)
            continue
        out = predictions_path(cfg.preds_dir(), cfg.run_name(), collection, split)
        reused = is_current(model_dir, out, [path])
        if reused:
            costs = read_predictions(out)
        else:
            model = model or RankerModel.load(model_dir)
            costs = model.predict_file(path, cfg.predict_batch_rows)
            record(model_dir, out, costs, [path])
        missing = missing_graphs(cfg, collection, split, costs)
        if missing:
            print(f"[lgbm] WARNING {collection.name} {split}: {len(missing)} source graph(s) of "
                  f"{cfg.data} have no tabular rows (skipped as bad by the feature build?), e.g. "
                  f"{missing[:3]}", flush=True)
        truth = truth_by_graph(path) if split == "valid" else {}
        summary[split] = summarise(collection, out, costs, truth, reused)
    return summary


def missing_graphs(cfg: LgbmConfig, collection: Collection, split: str,
                   costs: dict[str, np.ndarray]) -> list[str]:
    """Source graphs under ``cfg.data`` without a prediction (empty when the data root is absent)."""
    if not Path(cfg.data).is_dir():
        return []
    stems = [f.stem for f in discover(cfg.data, [collection], [split])]
    return sorted(set(stems) - set(costs))


def predict_all(cfg: LgbmConfig) -> dict[str, dict]:
    out = {}
    for collection in cfg.selected_collections():
        summary = predict_collection(cfg, collection)
        for split, info in summary.items():
            extra = f" score {info['score']:.4f}" if "score" in info else ""
            extra += " (reused, not predicted again)" if info.get("reused") else ""
            print(f"[lgbm] {collection.name:20s} {split:5s}: {info['graphs']} graphs, "
                  f"{info['configs']} configs -> {info['path']}{extra}", flush=True)
        out[collection.name] = summary
    return out
