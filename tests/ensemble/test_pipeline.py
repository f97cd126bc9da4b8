"""ensemble.pipeline: stage command lines (the Makefile contract), weights install, data lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ensemble import pipeline


def test_stage_argv_follows_the_make_run_contract(tmp_path: Path) -> None:
    run = pipeline.Run(data="D", work=str(tmp_path), preset="full", seed=3, collections="tile:xla",
                       overrides={"gnn-train": {"steps": 5, "cross_attn": False, "lr": 0.1}})
    common = ["--data", "D", "--work", str(tmp_path), "--preset", "full", "--seed", "3",
              "--collections", "tile:xla"]
    assert pipeline.stage_argv(run, "gnn-train") == ["train", *common, "--steps", "5",
                                                     "--cross-attn", "false", "--lr", "0.1"]
    assert pipeline.stage_argv(run, "lgbm-predict") == ["predict", *common]
    sub = str(tmp_path / "submission.csv")
    assert pipeline.stage_argv(run, "blend") == ["blend", *common, "--models", "gnn,lgbm",
                                                 "--submission", sub]
    assert pipeline.stage_argv(run, "check") == ["check", sub, "--data", "D"]
    assert pipeline.stage_argv(run, "validate")[:2] == ["validate", "--data"]


def test_features_skip_what_validate_found_bad(tmp_path: Path) -> None:
    run = pipeline.Run(data="D", work=str(tmp_path))
    assert "--skip-bad-report" not in pipeline.stage_argv(run, "features")
    run.validate_report.write_text("{}")
    argv = pipeline.stage_argv(run, "features")
    assert argv[argv.index("--skip-bad-report") + 1] == str(run.validate_report)


def test_failing_stage_raises_with_its_command(tmp_path: Path) -> None:
    run = pipeline.Run(data=str(tmp_path / "missing"), work=str(tmp_path))
    with pytest.raises((RuntimeError, FileNotFoundError, SystemExit)):
        pipeline.run_stage(run, "validate")


def test_install_weights_copies_models_and_stats_only(tmp_path: Path) -> None:
    src = tmp_path / "weights"
    (src / "models" / "gnn" / "tile-xla" / "seed0").mkdir(parents=True)
    (src / "models" / "gnn" / "tile-xla" / "seed0" / "best.pt").write_bytes(b"w")
    (src / "features" / "tile-xla" / "graphs" / "train" / "g").mkdir(parents=True)
    (src / "features" / "tile-xla" / "norm.npz").write_bytes(b"n")
    (src / "MANIFEST.json").write_text(json.dumps({"preset": "full"}))
    dst = pipeline.install_weights(src, tmp_path / "work")
    assert (dst / "models" / "gnn" / "tile-xla" / "seed0" / "best.pt").read_bytes() == b"w"
    assert (dst / "features" / "tile-xla" / "norm.npz").is_file()
    assert not (dst / "features" / "tile-xla" / "graphs").exists()
    assert pipeline.weights_preset(src) == "full"
    assert pipeline.weights_preset(None) == "quick"
    with pytest.raises(FileNotFoundError, match="weights dataset"):
        pipeline.install_weights(tmp_path / "nothing", tmp_path / "w2")


def test_find_data(tiny_root: Path, tmp_path: Path) -> None:
    assert pipeline.find_data(tiny_root) == tiny_root
    with pytest.raises(FileNotFoundError, match="npz_all"):
        pipeline.find_data(tmp_path)
    if not Path("/kaggle/input").exists():
        sample = pipeline.find_data(None, sample_dir=tmp_path / "s", scale="tiny")
        assert (sample / ".complete").is_file()


def test_default_work(tmp_path: Path) -> None:
    assert pipeline.default_work(str(tmp_path)) == tmp_path
    if not Path("/kaggle/working").is_dir():
        assert pipeline.default_work(None, "nb") == Path("work") / "nb"
