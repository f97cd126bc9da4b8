"""One model registry (tpurank.registry), read by the Makefile, the console script, the notebooks'
pipeline, the docs tables and ``ensemble real``: a model listed once is known everywhere."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpurank import cli, registry

ROOT = Path(__file__).resolve().parents[2]


def _make_n_run(tmp_path: Path, *variables: str) -> str:
    (tmp_path / "npz_all" / "npz").mkdir(parents=True, exist_ok=True)  # DATA given: no sample made
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "--no-print-directory", "run", "NO_VENV=1",
                          f"PYTHON={sys.executable}", f"DATA={tmp_path}", *variables], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_model_has_its_stage_module() -> None:
    from ensemble.pipeline import entry_point

    for model in registry.MODELS:
        module = importlib.import_module(entry_point(model.module))  # what python -m runs
        assert callable(module.main), model.module
        assert model.stages[-1] == "predict"
        assert model.ranker.name == model.name  # its RANKER (models.ranker.Ranker)
    assert registry.default_models() == "gnn,lgbm"


def test_names_of_runs_map_to_their_model() -> None:
    assert registry.get_model("gnn@seed3").module == "models.gnn"
    assert registry.get_model("lgbm-mytag").name == "lgbm"
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        registry.get_model("nope")


def test_the_makefile_runs_every_model_stage_of_the_registry(tmp_path: Path) -> None:
    text = _make_n_run(tmp_path)
    for model in registry.MODELS:
        for stage in model.stages:
            assert f"-m {model.module} {stage} --data {tmp_path}" in text, (model.name, stage)
    assert f"--models {registry.default_models()} --protocol auto" in text
    assert "-m ensemble real" in text.splitlines()[-1]  # the real-record table ends the run
    only = _make_n_run(tmp_path, "MODELS=baseline", "PROTOCOL=valid")
    assert "models.gnn train" not in only and "models.baseline predict" in only
    assert "--models baseline --protocol valid" in only


def test_the_makefile_plans_a_run_with_a_budget(tmp_path: Path) -> None:
    """BUDGET=S hands the whole run to the planner (ensemble.run), MON=1 to its monitor log."""
    text = _make_n_run(tmp_path, "BUDGET=2700", "MON=1", "PLAN_ARGS=--max-seeds 2")
    assert text.count("\n") == 1 and "-m ensemble run --budget 2700 --data " in text
    assert f"--models {registry.default_models()} --protocol auto" in text
    assert "--monitor-log " in text and text.rstrip().endswith("--max-seeds 2")


def test_console_script_pipeline_docs_and_real_read_the_registry() -> None:
    from ensemble import pipeline, real
    from benchmarks.render.scores import MODEL_ORDER

    for model in registry.MODELS:
        assert cli.GROUPS[model.name][0] == model.module
        for stage in model.stages:
            assert pipeline.stage_module(f"{model.name}-{stage}")[0].startswith(model.module)
    assert MODEL_ORDER == tuple(m.name for m in registry.MODELS) + ("blend",)
    assert real.trained_model_names() == [m.name for m in registry.MODELS if m.trains]
    assert all(registry.get_model(m).ranker.marker for m in real.trained_model_names())
    run = pipeline.Run(data="d", work="w", models="gnn,baseline")
    assert run.model_stages("train") == ["gnn-train"]
    assert run.model_stages("predict") == ["gnn-predict", "baseline-predict"]
