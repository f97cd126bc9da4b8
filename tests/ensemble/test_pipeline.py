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
                                                 "--submission", sub, "--protocol", "auto"]
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


def trained_work(work: Path) -> Path:
    """A WORK shaped like a finished run (files only)."""
    for rel, data in {"models/gnn/tile-xla/seed0/fold0/best.pt": b"w", "models/gnn/tile-xla/seed0/fold0/last.pt": b"o",
                      "models/gnn/tile-xla/seed0/fold0/config.json": b'{"seed": 0, "config": {"preset": "full"}}',
                      "features/tile-xla/norm.npz": b"n", "features/tile-xla/graphs/train/g/x.npy": b"big" * 10_000,
                      "features/tile-xla/done/train": b"", "real/data/x.npz": b"big", "preds/gnn/tile-xla/test.npz": b"p",
                      "blend/summary.json": b"{}"}.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    return work


def test_slim_work_keeps_what_inference_and_the_record_need(tmp_path: Path) -> None:
    work = trained_work(tmp_path / "work")
    sizes = pipeline.slim_work(work)
    assert sizes["after"] < sizes["before"]
    files = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert files == ["MANIFEST.json", "blend/summary.json", "features/tile-xla/norm.npz",
                     "models/gnn/tile-xla/seed0/fold0/best.pt", "models/gnn/tile-xla/seed0/fold0/config.json",
                     "preds/gnn/tile-xla/test.npz"]
    assert pipeline.weights_preset(work) == "full"  # a slimmed WORK is a weights folder
    dst = pipeline.install_weights(work, tmp_path / "inference")
    assert (dst / "models/gnn/tile-xla/seed0/fold0/best.pt").is_file()


def test_export_weights_and_where_inference_finds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPURANK_KAGGLE_ROOT", str(tmp_path / "kaggle"))
    assert pipeline.find_weights("auto") is None and pipeline.find_weights(None) is None
    out = pipeline.export_weights(trained_work(tmp_path / "work"), tmp_path / "kaggle/input/tpurank-weights")
    assert not (out / "models/gnn/tile-xla/seed0/fold0/last.pt").exists()
    assert pipeline.find_weights("auto") == out
    train_output = trained_work(tmp_path / "kaggle/input/tpurank-train/work")
    assert pipeline.find_weights("auto") == train_output  # the train kernel's output comes first
    assert pipeline.find_weights(str(out)) == out
    with pytest.raises(FileNotFoundError, match="no trained models"):
        pipeline.export_weights(tmp_path / "untrained", tmp_path / "w")


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


def test_bad_test_files_are_repaired_and_the_submission_is_complete(
        tiny_root: Path, tmp_path: Path, tiny_overrides: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `make run` does on a root whose test split holds a graph without configurable nodes,
    one with an opcode id outside the table and one with an infinite feature, and which holds
    only two of the five collections (stages given `all` use those): every test graph is ranked,
    the repairs are in the validate report and the run's report, and the checker accepts it."""
    import bad_graphs
    import numpy as np

    from ensemble.submission import check_file, read_submission

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    held = ("layout:xla:random", "layout:nlp:default")
    root = tmp_path / "root"
    bad = bad_graphs.bad_test_root(tiny_root, root, keep=held)
    run = pipeline.Run(data=str(root), work=str(tmp_path / "work"), collections="all",
                       overrides=tiny_overrides)
    pipeline.run_stages(run, ["validate", "features"])
    pipeline.train(run, build_features=False)
    pipeline.predict(run)
    pipeline.run_stages(run, ["baseline-predict", "blend", "check", "report"])
    assert check_file(run.submission_path, root) == []
    rows = read_submission(run.submission_path)
    stem = bad["without_configurable_nodes"].stem
    n_configs = len(np.load(bad["without_configurable_nodes"])["config_runtime"])
    assert rows[f"layout:xla:random:{stem}"] == list(range(n_configs))  # every config ties: file order
    validated = json.loads(run.validate_report.read_text())
    assert validated["n_bad"] == 0 and {Path(r["path"]).name for r in validated["repaired_files"]} == \
        {p.name for p in bad.values()}
    assert sorted(p.name for p in (tmp_path / "work" / "models" / "gnn").iterdir()
                  if p.is_dir()) == ["layout-nlp-default", "layout-xla-random"]  # what the root holds
    report = json.loads(next(run.submission_path.parent.glob("*/report.json")).read_text())
    repaired = {r["graph"]: r["repair"] for r in report["repaired_test_graphs"]}
    assert set(repaired) == {f"{c}:{p.stem}" for (c, _, _), p in zip(bad_graphs.BAD_TEST_FILES, bad.values())}
    assert any("unknown bucket" in r for r in repaired.values())
    assert any("padding value" in r for r in repaired.values())


def test_the_train_notebook_budget_and_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"auto": the Kaggle session's budget and the full preset on Kaggle only; elsewhere each
    stage's own limits and the quick preset."""
    monkeypatch.setenv("TPURANK_KAGGLE_ROOT", str(tmp_path))
    assert pipeline.notebook_budget("auto") == 0.0 and pipeline.notebook_preset("auto") == "quick"
    (tmp_path / "working").mkdir()
    assert pipeline.notebook_budget("auto") == pipeline.KAGGLE_SESSION_BUDGET
    assert pipeline.notebook_preset("auto") == "full" and pipeline.notebook_preset("quick") == "quick"
    assert pipeline.default_work(None) == tmp_path / "working" / "work"
    assert pipeline.KAGGLE_SESSION_BUDGET < 9 * 3600  # the shortest session (docs/competition.md §2)
    assert pipeline.notebook_budget(2700) == 2700.0 and pipeline.notebook_budget(None) == 0.0
