"""Nothing at predict time depends on what test files lack (issue 22).

Kaggle's test files carry zero runtimes, and their tile normalizers may be zero too. A data root
whose test split holds copies of labelled valid files is run through the pipeline (features,
GNN and LightGBM trained on its train/valid graphs, every model predicting the test split); then
the test files' ``config_runtime`` and ``config_runtime_normalizers`` are zeroed, the features
of the test split rebuilt and every model predicts again: each prediction must be identical.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ensemble import pipeline
from features.io import discover
from models.baseline import main as baseline_main
from models.predictions import predictions_path, read_predictions
from tpurank.collections import parse_collections

COLLECTIONS = "tile:xla,layout:xla:default"
MODELS = ("gnn@seed0", "lgbm@seed0", "baseline")
TINY = {
    "features": {"jobs": 1, "progress": False},
    "gnn-train": {"steps": 6, "eval_every": 3, "hidden": 8, "layers": 2, "configs_per_step": 8,
                  "val_max_configs": 16, "threads": 1},
    "gnn-predict": {"threads": 1, "predict_threads": 1},
    "lgbm-train": {"num_boost_round": 10, "early_stopping_rounds": 5, "threads": 1},
    "lgbm-predict": {"threads": 1},
}


def _labelled_test_root(tiny_root: Path, out: Path) -> Path:
    """``tiny_root``'s collections with the test split replaced by copies of the valid files."""
    for coll in parse_collections(COLLECTIONS):
        for split in ("train", "valid"):
            shutil.copytree(coll.split_dir(tiny_root, split), coll.split_dir(out, split))
        shutil.copytree(coll.split_dir(tiny_root, "valid"), coll.split_dir(out, "test"))
    return out


def _zero_test_labels(root: Path) -> int:
    """Rewrite every test file with zero runtimes and zero normalizers; returns the file count."""
    files = discover(root, parse_collections(COLLECTIONS), ["test"])
    for gf in files:
        with np.load(gf.path) as data:
            arrays = {k: data[k] for k in data.files}
        for key in ("config_runtime", "config_runtime_normalizers"):
            if key in arrays:
                arrays[key] = np.zeros_like(arrays[key])
        np.savez(gf.path, **arrays)
    return len(files)


def _built_from(run: pipeline.Run) -> dict[str, dict]:
    """The source identity (path, size, mtime) each processed test graph was built from."""
    import json

    from features.processed import graph_dir

    out = {}
    for coll in parse_collections(COLLECTIONS):
        for gf in discover(run.data, [coll], ["test"]):
            meta = json.loads((graph_dir(Path(run.work) / "features", coll, "test", gf.stem)
                               / "meta.json").read_text())
            st = gf.path.stat()
            assert meta["source"]["size"] == st.st_size and meta["source"]["mtime_ns"] == st.st_mtime_ns
            out[f"{coll.name}/{gf.stem}"] = meta["source"]
    return out


def _predict_test(run: pipeline.Run) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """Every model's test predictions (``{model: {collection: {stem: costs}}}``)."""
    shutil.rmtree(Path(run.work) / "preds", ignore_errors=True)
    pipeline.run_stages(run, ["features", "gnn-predict", "lgbm-predict"])
    assert baseline_main(["predict", "--data", run.data, "--work", run.work, "--collections",
                          COLLECTIONS, "--splits", "test"]) == 0
    return {m: {c.name: read_predictions(predictions_path(Path(run.work) / "preds", m, c, "test"))
                for c in parse_collections(COLLECTIONS)} for m in MODELS}


def test_predictions_do_not_depend_on_test_runtimes_or_normalizers(tiny_root: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = _labelled_test_root(tiny_root, tmp_path / "root")
    run = pipeline.Run(data=str(root), work=str(tmp_path / "work"), preset="quick",
                       collections=COLLECTIONS, overrides=TINY)
    pipeline.run_stages(run, ["features", "gnn-train", "lgbm-train"])
    labelled = _predict_test(run)
    before = _built_from(run)
    assert _zero_test_labels(root) == 4 + 2
    zeroed = _predict_test(run)
    after = _built_from(run)  # the test features were rebuilt from the zeroed files
    assert all(after[k] != before[k] for k in before)
    for model in MODELS:
        for coll, preds in labelled[model].items():
            assert sorted(preds) == sorted(zeroed[model][coll]) and preds, (model, coll)
            for stem, costs in preds.items():
                assert np.array_equal(costs, zeroed[model][coll][stem]), (model, coll, stem)
