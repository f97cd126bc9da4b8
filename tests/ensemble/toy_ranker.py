"""A third ranker, for tests only: a ridge regression on the tabular columns, cross-validated on
the shared fold plan (``python -m toy_ranker train|predict``, run in-process by the tests).

It is what a new model brings: a stage module that writes the files every model writes and a
``RANKER`` (:class:`models.ranker.Ranker`); ``test_toy_ranker.py`` adds its row to the registry
and runs the pipeline with it, changing no product file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl

from features.processed import tabular_path
from models.cv import fold_plan
from models.metrics import graph_score
from models.predictions import (OOF_CONFIG_SPLIT, OOF_SPLIT, fold_split, predictions_path,
                                write_fold_average, write_predictions)
from models.ranker import Ranker, RankerConfig
from tpurank.collections import held_collections
from tpurank.config import parse_config

MARKER = "ridge.json"


@dataclass
class ToyConfig(RankerConfig):
    """A ridge regression on the tabular columns (tests)."""

    MODEL: ClassVar[str] = "toy"

    folds: int = 3  # K of the shared fold plan (0: fit on train, no out-of-fold predictions)
    ridge: float = 1.0  # L2 penalty
    time_budget: float = 0.0  # what a planned run passes; the fit takes well under a second

    PRESETS = {"quick": {}, "full": {}}


def _rows(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(graph stems, config indices, targets, features) of a tabular parquet file."""
    frame = pl.read_parquet(path)
    feats = frame.select([c for c in frame.columns if c.startswith("f_")]).to_numpy()
    return (frame["graph"].to_numpy(), frame["config"].to_numpy(),
            frame["target"].fill_null(0.0).to_numpy(), np.nan_to_num(feats.astype(np.float64)))


def _per_graph_z(stems: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.zeros_like(y)
    for stem in np.unique(stems):
        m = stems == stem
        out[m] = (y[m] - y[m].mean()) / (y[m].std() + 1e-9)
    return out


def fit(x: np.ndarray, y: np.ndarray, ridge: float) -> dict[str, Any]:
    mean, std = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    w = np.linalg.solve(z.T @ z + ridge * np.eye(z.shape[1]), z.T @ y)
    return {"mean": mean.tolist(), "std": std.tolist(), "w": w.tolist()}


def costs(model: dict[str, Any], stems: np.ndarray, configs: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    """stem -> cost per row, in config order (predicted runtime: lower = faster)."""
    z = np.hstack([(x - np.array(model["mean"])) / np.array(model["std"]), np.ones((len(x), 1))])
    cost = z @ np.array(model["w"])
    return {s: cost[stems == s][np.argsort(configs[stems == s], kind="stable")] for s in np.unique(stems)}


def _labelled(cfg: ToyConfig, coll) -> dict[str, tuple]:
    return {split: _rows(tabular_path(cfg.features_dir(), coll, split)) for split in ("train", "valid")}


def train(cfg: ToyConfig) -> None:
    for coll in held_collections(cfg.data, cfg.collection or cfg.collections):
        rows = _labelled(cfg, coll)
        plan = fold_plan(cfg.work, cfg.features_dir(), coll, folds=cfg.folds, seed=cfg.seed)
        for k in range(cfg.folds):
            seen = set(plan.training(k))
            keep = {s: np.array([(s, g) in seen for g in r[0]]) for s, r in rows.items()}
            x = np.vstack([r[3][keep[s]] for s, r in rows.items()])
            y = np.concatenate([_per_graph_z(r[0][keep[s]], r[2][keep[s]]) for s, r in rows.items()])
            out = cfg.model_dir(coll) / f"fold{k}" / MARKER
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(fit(x, y, cfg.ridge)))


def predict(cfg: ToyConfig) -> None:
    for coll in held_collections(cfg.data, cfg.collection or cfg.collections):
        rows = _labelled(cfg, coll)
        plan = fold_plan(cfg.work, cfg.features_dir(), coll, folds=cfg.folds, seed=cfg.seed)
        models = [json.loads((cfg.model_dir(coll) / f"fold{k}" / MARKER).read_text())
                  for k in range(cfg.folds)]
        oof, index, valid, scores = {}, {}, {}, []
        for split, (stems, configs, target, x) in rows.items():
            for stem in np.unique(stems):
                m = stems == stem
                cost = costs(models[plan.fold_of(split, stem)], stems[m], configs[m], x[m])[stem]
                oof[stem], index[stem] = cost, np.sort(configs[m])
                if split == "valid":
                    valid[stem] = cost
                    scores.append(graph_score(coll, cost, target[m][np.argsort(configs[m], kind="stable")]))
        preds, run = cfg.preds_dir(), cfg.run_name()
        write_predictions(predictions_path(preds, run, coll, OOF_SPLIT), oof)
        write_predictions(predictions_path(preds, run, coll, OOF_CONFIG_SPLIT), index)
        write_predictions(predictions_path(preds, run, coll, "valid"), valid)
        test = _rows(tabular_path(cfg.features_dir(), coll, "test"))
        for k, model in enumerate(models):
            write_predictions(predictions_path(preds, run, coll, fold_split(k)),
                              costs(model, test[0], test[1], test[3]))
        write_fold_average(preds, run, coll, cfg.folds)
        (cfg.model_dir(coll) / "report.json").write_text(json.dumps(
            {"collection": coll.name, "seed": cfg.seed, "score": float(np.mean(scores))}))


class ToyRanker(Ranker):
    name, title, config = "toy", "ridge", "toy_ranker:ToyConfig"
    capped, overrun, predict_cost = True, 0.05, (1.0, 1.0)
    report, marker = "report.json", MARKER

    def real_costs(self, dirs: list[Path], records: Any, device: str) -> tuple[list[dict], str]:
        stems, configs, _, x = _rows(records.tabular())
        return [costs(json.loads((d / MARKER).read_text()), stems, configs, x) for d in dirs], "ridge"


RANKER = ToyRanker()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "predict"):
        print("usage: python -m toy_ranker train|predict [options]", file=sys.stderr)
        return 2
    cfg = parse_config(ToyConfig, argv[1:], prog=f"python -m toy_ranker {argv[0]}")
    (train if argv[0] == "train" else predict)(cfg)
    return 0
