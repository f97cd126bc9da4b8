"""The real-shape benchmark's scores: per model the hidden-test mean, per collection each model's
out-of-fold and hidden-test score (what "GNN >= LightGBM on every layout collection" reads)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.scale import run_scores


def test_run_scores_per_collection(tmp_path: Path):
    oof = {"blend": {"scores": {"mean": 0.7}}, "models": {"gnn": {"mean": 0.5}, "lgbm": {"mean": 0.6}}}
    (tmp_path / "blend").mkdir()
    (tmp_path / "blend" / "summary.json").write_text(json.dumps(
        {"collections": {"layout:xla:random": {"oof": oof}}}))
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "report.json").write_text(json.dumps(
        {"hidden_test": {"layout:xla:random": {"gnn": 0.4, "lgbm": 0.55, "blend": 0.6}}}))
    means, rows = run_scores(tmp_path)
    assert means["gnn"] == 0.4 and means["lgbm"] == 0.55
    assert rows == [{"collection": "layout:xla:random", "OOF gnn": 0.5, "OOF lgbm": 0.6,
                     "OOF blend": 0.7, "held-out gnn": 0.4, "held-out lgbm": 0.55,
                     "held-out blend": 0.6}]


def test_run_scores_before_the_report(tmp_path: Path):
    assert run_scores(tmp_path) == ({}, [])
