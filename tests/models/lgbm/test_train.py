"""Training end to end on hand-made tabular files: learns a toy ranking, saves, reloads, predicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tpurank.collections import get_collection
from tpurank.config import with_preset
from features.processed import tabular_path
from models.lgbm.__main__ import main
from models.lgbm.config import LgbmConfig
from models.lgbm.data import (Keys, TabularFormatError, assemble_costs, load_rows, read_keys,
                              read_rows, truth_by_graph)
from models.lgbm.model import RankerModel
from models.lgbm.fit import fit_model
from models.lgbm.train import train_collection
from models.metrics import score_collection
from models.predictions import predictions_path, read_predictions

TILE = get_collection("tile:xla")
LAYOUT = get_collection("layout:xla:random")
FAST = {"num_boost_round": 40, "early_stopping_rounds": 10, "min_rounds": 5, "threads": 1, "pair_refs": 8,
        "pairs_per_graph": 1000, "valid_pairs_per_graph": 300, "folds": 0}


def _cfg(work: Path, **changes) -> LgbmConfig:
    return with_preset(LgbmConfig, "quick", work=str(work), **(FAST | changes))


def _random_score(collection, truth: dict[str, np.ndarray], seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    scores = [score_collection(collection, {k: rng.random(len(v)) for k, v in truth.items()},
                               truth)["score"] for _ in range(20)]
    return float(np.mean(scores))


@pytest.mark.parametrize("mode", ["lambdarank", "pairwise"])
def test_beats_random_ranking_on_a_learnable_toy(toy_work: Path, mode: str) -> None:
    cfg = _cfg(toy_work, mode=mode)
    metrics = train_collection(cfg, LAYOUT)
    truth = truth_by_graph(tabular_path(cfg.features_dir(), LAYOUT, "valid"))
    assert metrics["mode"] == mode
    assert metrics["valid_score"] > _random_score(LAYOUT, truth) + 0.3  # tau: random ~ 0
    for name in ("model.txt", "model.json", "importance.csv", "importance.json", "importance.png",
                 "metrics.json", "config.json"):
        assert (cfg.model_dir(LAYOUT) / name).is_file(), name
    # toy weights: f_0 +1, f_1 +0.5, f_2 0, f_3 -0.5, f_4 -1 (f_5: graph-level)
    importance = {r["feature"]: r["share"] for r in
                  json.loads((cfg.model_dir(LAYOUT) / "importance.json").read_text())}
    assert importance["f_0"] > importance["f_2"] and importance["f_4"] > importance["f_2"]


def test_tile_top5_beats_random(toy_work: Path) -> None:
    cfg = _cfg(toy_work)
    metrics = train_collection(cfg, TILE)
    truth = truth_by_graph(tabular_path(cfg.features_dir(), TILE, "valid"))
    assert metrics["valid_score"] > _random_score(TILE, truth) + 0.02


@pytest.mark.parametrize("mode", ["lambdarank", "pairwise"])
def test_saved_model_reloads_to_identical_predictions(toy_work: Path, mode: str) -> None:
    cfg = _cfg(toy_work, mode=mode)
    train = load_rows(tabular_path(cfg.features_dir(), LAYOUT, "train"), 0)
    valid = load_rows(tabular_path(cfg.features_dir(), LAYOUT, "valid"), 0)
    model = fit_model(mode, train, valid, cfg, LAYOUT)
    model.save(toy_work / "saved")
    reloaded = RankerModel.load(toy_work / "saved")
    path = tabular_path(cfg.features_dir(), LAYOUT, "test")
    before = model.predict_file(path, batch_rows=50, progress=False)
    after = reloaded.predict_file(path, batch_rows=1000, progress=False)
    assert before.keys() == after.keys()
    for stem in before:
        np.testing.assert_array_equal(before[stem], after[stem])


def test_same_seed_same_model(toy_work: Path) -> None:
    texts = []
    for run in range(2):
        cfg = _cfg(toy_work, tag=f"det{run}")
        train_collection(cfg, LAYOUT)
        texts.append((cfg.model_dir(LAYOUT) / "model.txt").read_text())
    assert texts[0] == texts[1]


def test_cli_train_predict_writes_every_config(toy_work: Path) -> None:
    args = ["--work", str(toy_work), "--preset", "quick", "--seed", "3", "--collections",
            "tile:xla,layout:xla:random", "--mode", "auto"] + [
        x for k, v in FAST.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["train", *args]) == 0
    assert main(["predict", *args]) == 0
    cfg = _cfg(toy_work, seed=3)
    for collection in (TILE, LAYOUT):
        metrics = json.loads((cfg.model_dir(collection) / "metrics.json").read_text())
        assert set(metrics["results"]) == {"lambdarank", "pairwise"}
        for split in ("valid", "test"):
            preds = read_predictions(predictions_path(toy_work / "preds", "lgbm@seed3", collection,
                                                      split))
            rows = pl.read_parquet(tabular_path(toy_work / "features", collection, split))
            sizes = dict(rows.group_by("graph").len().iter_rows())
            assert {k: len(v) for k, v in preds.items()} == sizes


def test_missing_or_deduplicated_configs_are_refused() -> None:
    def keys(config: list[int]) -> Keys:
        return Keys(code=np.zeros(3, np.int64), graphs=["a"], config=np.array(config),
                    target=np.zeros(3))

    with pytest.raises(TabularFormatError, match="graph 'a'"):
        assemble_costs("x.parquet", keys([0, 1, 1]), np.zeros(3))
    with pytest.raises(TabularFormatError, match="not exactly 0..2"):
        assemble_costs("x.parquet", keys([1, 2, 3]), np.zeros(3))
    out = assemble_costs("x.parquet", keys([2, 0, 1]), np.array([0.2, 0.0, 0.1]))
    np.testing.assert_array_equal(out["a"], [0.0, 0.1, 0.2])


def test_features_are_read_in_slices_with_the_same_result(toy_work: Path) -> None:
    path = tabular_path(toy_work / "features", LAYOUT, "valid")
    whole = load_rows(path, max_per_graph=7, seed=1)
    sliced = load_rows(path, max_per_graph=7, seed=1, chunk_rows=13)
    np.testing.assert_array_equal(whole.X, sliced.X)
    frame = pl.read_parquet(path)
    keys = read_keys(path)
    assert keys.graphs == sorted(frame["graph"].unique().to_list())
    np.testing.assert_array_equal(read_rows(path, np.array([0, 5, 179]), ["f_1"], chunk_rows=10)[:, 0],
                                  frame["f_1"].to_numpy()[[0, 5, 179]])


def test_clear_errors_for_missing_inputs(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="features build"):
        load_rows(tmp_path / "nope.parquet")
    with pytest.raises(FileNotFoundError, match="models.lgbm train"):
        RankerModel.load(tmp_path)
    with pytest.raises(ValueError, match="unknown --mode"):
        _cfg(tmp_path, mode="bogus").resolved_mode(TILE)


def test_train_subsample_caps_rows_per_graph(toy_work: Path) -> None:
    path = tabular_path(toy_work / "features", LAYOUT, "train")
    rows = load_rows(path, max_per_graph=10, seed=0)
    assert np.bincount(rows.graph_code).max() == 10
    assert rows.X.dtype == np.float32 and rows.X.shape[1] == 6
    again = load_rows(path, max_per_graph=10, seed=0)
    np.testing.assert_array_equal(rows.config, again.config)


@pytest.mark.parametrize("mode", ["lambdarank", "pairwise"])
def test_early_stopping_never_picks_a_round_before_min_rounds(toy_work: Path, mode: str) -> None:
    cfg = _cfg(toy_work, mode=mode, min_rounds=25, early_stopping_rounds=3, num_boost_round=60)
    train = load_rows(tabular_path(cfg.features_dir(), LAYOUT, "train"), 0)
    valid = load_rows(tabular_path(cfg.features_dir(), LAYOUT, "valid"), 0)
    model = fit_model(mode, train, valid, cfg, LAYOUT)
    assert 25 <= model.info.best_iteration <= 60
    assert model.booster.current_iteration() >= 25


def test_source_graphs_without_rows_are_reported(toy_work: Path, tmp_path: Path) -> None:
    from models.lgbm.train import missing_graphs

    data = tmp_path / "data"
    split_dir = LAYOUT.split_dir(data, "test")
    split_dir.mkdir(parents=True)
    for stem in ("test_000", "test_001", "test_002", "skipped_bad"):
        (split_dir / f"{stem}.npz").write_bytes(b"")
    cfg = _cfg(toy_work, data=str(data))
    costs = {f"test_00{k}": np.zeros(3) for k in range(3)}
    assert missing_graphs(cfg, LAYOUT, "test", costs) == ["skipped_bad"]
    assert missing_graphs(_cfg(toy_work, data=str(tmp_path / "absent")), LAYOUT, "test", costs) == []


def test_trains_without_a_validation_split(toy_work: Path) -> None:
    tabular_path(toy_work / "features", LAYOUT, "valid").unlink()
    metrics = train_collection(_cfg(toy_work, mode="pairwise", num_boost_round=12), LAYOUT)
    assert metrics["valid_score"] is None
    assert metrics["results"]["pairwise"]["best_iteration"] == 12
