"""Grouped K-fold training (``--folds K``): out-of-fold predictions from models that never saw
the graph, fold-averaged test predictions, per-fold resume, and predict reusing everything."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tpurank.atomic import write_json
from tpurank.collections import get_collection
from tpurank.config import with_preset
from features.processed import tabular_path
from models.cv import check_manifest, fold_plan, make_plan, plan_path
from models.lgbm.config import LgbmConfig
from models.lgbm.folds import FOLDS_FILE, HELD_OUT_FILE, fold_dir
from models.lgbm.model import RankerModel
from toy_features import write_toy_features
from models.lgbm.runstate import DONE_FILE
from models.lgbm.train import predict_all, train_all
from models.predictions import normalise_costs, predictions_path, read_predictions

LAYOUT = get_collection("layout:xla:random")
FAST = {"num_boost_round": 30, "early_stopping_rounds": 10, "min_rounds": 5, "threads": 1,
        "pair_refs": 8, "pairs_per_graph": 500, "valid_pairs_per_graph": 200,
        "folds": 3, "time_budget": 0.0, "collections": "layout:xla:random"}


def _save_toy_plan(work: Path, folds: int = 3, seed: int = 0) -> None:
    """The toy has no raw data root: save the plan models.cv would load (from the tabular stems)."""
    graphs = []
    for split in ("train", "valid"):
        frame = pl.read_parquet(tabular_path(work / "features", LAYOUT, split), columns=["graph"])
        graphs += [(split, g) for g in sorted(frame["graph"].unique().to_list())]
    plan = make_plan(LAYOUT, graphs, [s for _, s in graphs], folds, seed)
    write_json(plan_path(work, LAYOUT, folds, seed), plan.to_json())


def _cfg(work: Path, **changes) -> LgbmConfig:
    return with_preset(LgbmConfig, "quick", work=str(work), **(FAST | changes))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> LgbmConfig:
    """One 3-fold run shared by the tests below (the last one changes it: keep it last)."""
    toy_work = tmp_path_factory.mktemp("folds") / "work"
    write_toy_features(toy_work / "features", (LAYOUT,))
    train = tabular_path(toy_work / "features", LAYOUT, "train")  # deduplicated, as the build does
    pl.read_parquet(train).filter(pl.col("config") % 7 != 3).write_parquet(train)
    _save_toy_plan(toy_work)
    cfg = _cfg(toy_work, mode="auto")
    train_all(cfg)
    return cfg


def test_oof_predictions_come_from_models_that_never_saw_the_graph(trained: LgbmConfig) -> None:
    cfg = trained
    plan = fold_plan(cfg.work, cfg.features_dir(), LAYOUT, folds=3, seed=cfg.seed)
    manifest = json.loads((cfg.model_dir(LAYOUT) / FOLDS_FILE).read_text())
    check_manifest(manifest, plan)  # raises on a leak
    oof = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "oof"))
    assert sorted(oof) == sorted(st for _, st in plan.graphs())
    for split, stem in plan.graphs():
        k = plan.fold_of(split, stem)
        assert f"{split}/{stem}" not in manifest["seen"][str(k)]
        own = read_predictions(fold_dir(cfg, LAYOUT, k) / HELD_OUT_FILE)
        np.testing.assert_array_equal(oof[stem], own[stem])
        rows = pl.read_parquet(tabular_path(cfg.features_dir(), LAYOUT, split), columns=["graph"])
        assert len(oof[stem]) == int((rows["graph"] == stem).sum())  # every config
    configs = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "oof-config"))
    targets = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "oof-target"))
    assert sorted(configs) == sorted(targets) == sorted(oof)
    assert 3 not in configs["train_000"] and len(configs["valid_000"]) == 60
    assert all(len(configs[s]) == len(targets[s]) == len(oof[s]) for s in oof)
    valid = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "valid"))
    assert sorted(valid) == sorted(st for sp, st in plan.graphs() if sp == "valid")
    metrics = json.loads((cfg.model_dir(LAYOUT) / "metrics.json").read_text())
    assert metrics["oof_score"] > 0.3 and metrics["valid_score"] > 0.3  # toy tau; random ~ 0
    for k in range(3):  # auto chose on the inner-valid graphs, both candidates scored there
        fold = json.loads((fold_dir(cfg, LAYOUT, k) / "metrics.json").read_text())
        assert all(r["inner_score"] is not None for r in fold["results"].values())
        assert not set(fold["seen"]) & set(manifest["held_out"][str(k)])


def test_test_prediction_is_the_mean_of_z_normalised_fold_costs(trained: LgbmConfig) -> None:
    cfg = trained
    folds = [read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT,
                                               f"test-fold{k}")) for k in range(3)]
    test = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "test"))
    assert set(test) == set(folds[0])
    for stem, cost in test.items():
        expected = np.mean([normalise_costs(f[stem], "zscore") for f in folds], axis=0)
        np.testing.assert_allclose(cost, expected, rtol=1e-5, atol=1e-6)


def test_predict_reuses_and_resume_redoes_only_unfinished_folds(
        trained: LgbmConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = trained
    calls: list[str] = []
    original = RankerModel.predict_file
    monkeypatch.setattr(RankerModel, "predict_file",
                        lambda self, path, *a, **kw: calls.append(str(path)) or original(self, path, *a, **kw))
    summary = predict_all(cfg)["layout:xla:random"]
    assert calls == [] and summary["test"]["reused"] and "score" in summary["oof"]
    kept = (fold_dir(cfg, LAYOUT, 0) / "model.txt").stat().st_mtime_ns
    (fold_dir(cfg, LAYOUT, 2) / DONE_FILE).unlink()  # as if killed during fold 2
    (cfg.model_dir(LAYOUT) / DONE_FILE).unlink()
    train_all(cfg)
    assert (fold_dir(cfg, LAYOUT, 0) / "model.txt").stat().st_mtime_ns == kept
    assert (fold_dir(cfg, LAYOUT, 2) / DONE_FILE).is_file()
    assert calls and all("test" in c or "train" in c or "valid" in c for c in calls)


def test_folds_zero_keeps_the_train_valid_protocol(toy_work: Path) -> None:
    cfg = _cfg(toy_work, folds=0, mode="lambdarank")
    metrics = train_all(cfg)["layout:xla:random"]
    assert metrics["folds"] == 0 and not (cfg.model_dir(LAYOUT) / "fold0").exists()
    with pytest.raises(ValueError, match="--folds 1"):
        train_all(_cfg(toy_work, folds=1, tag="one"))
