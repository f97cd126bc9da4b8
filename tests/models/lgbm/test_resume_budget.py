"""Resume after a kill (per-collection completion markers), the time budget, and predicting once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tpurank.collections import get_collection
from tpurank.config import with_preset
from models.lgbm.config import LgbmConfig
from models.lgbm.model import RankerModel
from models.lgbm.runstate import DONE_FILE, Slicer
from models.lgbm.train import predict_all, train_all
from models.predictions import predictions_path

TILE = get_collection("tile:xla")
LAYOUT = get_collection("layout:xla:random")
ROOT = Path(__file__).resolve().parents[3]
ENDLESS = {"num_boost_round": 100000, "early_stopping_rounds": 100000, "min_rounds": 5,
           "threads": 1, "folds": 0, "mode": "lambdarank"}


def _args(work: Path, budget: float) -> list[str]:
    opts = ENDLESS | {"time_budget": budget, "collections": "tile:xla,layout:xla:random",
                      "checkpoint_every": 0.2}
    return ["--work", str(work), "--preset", "quick"] + [
        x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def test_fits_slice_a_collection_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.lgbm import runstate

    monkeypatch.setattr(runstate.time, "monotonic", lambda: 1000.0)  # a clock that stands still
    slicer = Slicer(10.0, fits=2, start=1000.0)
    assert slicer.deadline() == pytest.approx(1000.0 + 0.75 * 5.0)


def test_time_budget_stops_boosting_and_keeps_the_best_iteration(toy_work: Path) -> None:
    cfg = with_preset(LgbmConfig, "quick", work=str(toy_work), collections="tile:xla,layout:xla:random",
                      **(ENDLESS | {"time_budget": 3.0}))
    metrics = train_all(cfg)  # ENDLESS rounds: only the budget can stop boosting
    for m in metrics.values():
        run = m["results"]["lambdarank"]
        assert run["stopped_by_time_budget_at"] is not None
        assert 1 <= run["best_iteration"] <= run["stopped_by_time_budget_at"]
    model = RankerModel.load(cfg.model_dir(TILE))
    assert model.booster.current_iteration() == metrics["tile:xla"]["best_iteration"]


def test_a_killed_train_resumes_without_redoing_finished_collections(toy_work: Path) -> None:
    cmd = [sys.executable, "-m", "models.lgbm", "train"]
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd + _args(toy_work, 10.0), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cfg = with_preset(LgbmConfig, "quick", work=str(toy_work), **ENDLESS)
    tile_done, layout_done = cfg.model_dir(TILE) / DONE_FILE, cfg.model_dir(LAYOUT) / DONE_FILE
    try:
        deadline = time.monotonic() + 60
        while not tile_done.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tile_done.is_file(), "tile:xla never finished"
        checkpoint = cfg.model_dir(LAYOUT) / "checkpoint-lambdarank.json"
        while not checkpoint.is_file() and time.monotonic() < deadline:  # inside its boosting
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not layout_done.exists() and checkpoint.is_file()
    tile_mtime = tile_done.stat().st_mtime_ns
    rerun = subprocess.run(cmd + _args(toy_work, 1.0), cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "done before" in next(l for l in rerun.stdout.splitlines() if "tile:xla" in l)
    assert tile_done.stat().st_mtime_ns == tile_mtime
    assert layout_done.is_file() and not checkpoint.exists()
    metrics = json.loads((cfg.model_dir(LAYOUT) / "metrics.json").read_text())
    assert metrics["results"]["lambdarank"]["resumed_from_iteration"] > 0  # from the booster
    leftovers = [p for p in (toy_work / "models").rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers  # a kill mid-write leaves a hidden temp file: swept on resume


def test_valid_split_is_predicted_once(toy_work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = with_preset(LgbmConfig, "quick", work=str(toy_work), collections="layout:xla:random",
                      **(ENDLESS | {"num_boost_round": 20, "early_stopping_rounds": 5}))
    calls: list[str] = []
    original = RankerModel.predict_file

    def counting(self, path, *args, **kwargs):
        calls.append(Path(path).stem)
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(RankerModel, "predict_file", counting)
    train_all(cfg)
    valid_out = predictions_path(cfg.preds_dir(), cfg.run_name(), LAYOUT, "valid")
    written = valid_out.stat().st_mtime_ns
    first = predict_all(cfg)["layout:xla:random"]
    assert first["valid"]["reused"] and not first["test"]["reused"]
    assert calls == ["valid", "test"]  # valid by train, test by predict: each once
    again = predict_all(cfg)["layout:xla:random"]
    assert again["valid"]["reused"] and again["test"]["reused"] and len(calls) == 2
    assert valid_out.stat().st_mtime_ns == written
    np.testing.assert_equal(first["valid"]["score"], again["valid"]["score"])
    tab = cfg.features_dir() / LAYOUT.slug / "tabular" / "valid.parquet"
    os.utime(tab, ns=(tab.stat().st_atime_ns, tab.stat().st_mtime_ns + 10**9))  # input changed
    assert not predict_all(cfg)["layout:xla:random"]["valid"]["reused"]
    assert calls[-1] == "valid"
