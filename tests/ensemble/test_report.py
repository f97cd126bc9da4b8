"""`report` writes Markdown, HTML, JSON and the plots beside the submission."""

from __future__ import annotations

import json

import numpy as np

from ensemble.blend import run_blend
from ensemble.weights import BlendConfig
from ensemble.report import ReportConfig, main as report_main
from tpurank.collections import COLLECTIONS
from tpurank.config import parse_config
from features.io import discover
from models.predictions import predictions_path, write_predictions


def test_report_files_created(fake_root, tmp_path):
    work, sub = tmp_path / "work", tmp_path / "subs" / "submission.csv"
    rng = np.random.default_rng(0)
    for model in ("m1", "m2@seed0", "m2@seed1", "baseline"):
        for coll in COLLECTIONS:
            for split in ("valid", "test"):
                from ensemble.truth import config_count
                costs = {gf.stem: rng.normal(size=config_count(gf.path))
                         for gf in discover(fake_root, [coll], [split])}
                write_predictions(predictions_path(work / "preds", model, coll, split), costs)
    args = ["--data", str(fake_root), "--work", str(work), "--preset", "quick", "--seed", "0",
            "--models", "m1,m2", "--submission", str(sub), "--protocol", "valid"]
    summary = run_blend(parse_config(BlendConfig, args))
    assert report_main(args) == 0
    run_dir = sub.parent / summary["run_id"]
    for name in ["report.md", "report.html", "report.json", "scores_valid.png", "scores_test.png",
                 "distribution.png", "scatter_layout-nlp-random.png", "blend.json"]:
        assert (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0, name
    md = (run_dir / "report.md").read_text()
    assert "Blend weights" in md and "git SHA" in md and "generated sample only" in md
    assert "| graphs | m1 | m2 | baseline | blend |" in md and "In-sample numbers" in md
    assert "No out-of-fold predictions" in md
    html = (run_dir / "report.html").read_text()
    assert '<img src="scores_valid.png"' in html
    data = json.loads((run_dir / "report.json").read_text())
    assert set(data["valid"]["tile:xla"]) == {"m1", "m2", "baseline", "blend"}
    assert data["valid"]["tile:xla"]["blend"] == summary["collections"]["tile:xla"]["valid_score"]["blend"]


def test_report_without_blend_is_a_clear_error(tmp_path):
    import pytest
    cfg = parse_config(ReportConfig, ["--work", str(tmp_path)])
    from ensemble.report import write_report
    with pytest.raises(FileNotFoundError, match="run `python -m ensemble blend` first"):
        write_report(cfg)


def test_curve_summary_says_which_models_were_still_climbing():
    import pytest
    from ensemble.report import curve_summary, learning_curves_figure

    curves = {"layout:xla:random": [
        {"model": "gnn", "seconds": [10, 20, 30, 40], "valid": [0.1, 0.3, 0.35, 0.5]},  # climbing
        {"model": "gnn", "seconds": [10, 20, 30, 40], "valid": [0.2, 0.6, 0.5, 0.55]}]}  # plateaued
    s = curve_summary(curves)["layout:xla:random"]
    assert s["models"] == 2 and s["climbing"] == 1 and s["evaluations"] == 4 and s["seconds"] == 40
    assert s["late_gain"] == pytest.approx(((0.5 - 0.35) + (0.55 - 0.6)) / 2)
    assert s["first"] == pytest.approx(0.15) and s["last"] == pytest.approx(0.525)
    assert len(learning_curves_figure(curves).axes) == 1
