"""A third ranker is one registry row: the toy ridge of ``toy_ranker.py`` (a stage module and its
``RANKER``) registered at test time runs through the whole pipeline — train, predict, the
out-of-fold blend, the report, the real TPU records — and through a run planned to a budget,
with no product file changed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ensemble import pipeline
from ensemble.blend import read_summary
from ensemble.run import PlannedRun
from tpurank import registry

HERE = Path(__file__).resolve().parent
TOY = registry.Model("toy", "toy_ranker", "train | predict: a ridge on the tabular columns (tests)",
                     trains=True, has_oof=True)
COLLS = ("tile:xla", "layout:xla:random")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> registry.Model:
    """The registry with the toy ranker's row (its module importable by name)."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setattr(registry, "MODELS", registry.MODELS + (TOY,))
    monkeypatch.setitem(registry.BY_NAME, TOY.name, TOY)
    return TOY


def test_the_pipeline_runs_a_registered_third_ranker(toy, tiny_root: Path, tmp_path: Path,
                                                      tiny_overrides: dict, shared_data: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from bad_graphs import subset_root

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = subset_root(tiny_root, tmp_path / "root", COLLS)
    work = tmp_path / "work"
    run = pipeline.Run(data=str(root), work=str(work), models="lgbm,toy", overrides=tiny_overrides,
                       submission=str(tmp_path / "sub" / "submission.csv"))
    assert run.model_stages("train") == ["lgbm-train", "toy-train"]
    pipeline.run_stages(run, ["validate", "features"])
    pipeline.train(run, build_features=False)
    pipeline.predict(run)
    for slug in ("tile-xla", "layout-xla-random"):
        assert {p.stem for p in (work / "preds" / "toy@seed0" / slug).glob("*.npz")} >= {
            "oof", "oof-config", "valid", "test-fold0", "test"}
    assert pipeline.submit(run) == run.submission_path and run.submission_path.is_file()
    summary = read_summary(work)
    assert summary["models"] == ["lgbm", "toy"]
    for coll in COLLS:  # fitted out of fold, with a weight for the toy
        assert summary["collections"][coll]["protocol"] == "oof"
        assert "toy" in summary["collections"][coll]["weights"]
    assert {r["collection"] for r in pipeline.validation_table(work) if "toy@seed0" in r} == set(COLLS)

    pipeline.run_stage(run, "report")
    report = json.loads(next(run.submission_path.parent.glob("*/report.json")).read_text())
    assert "toy" in json.dumps(report)
    records = {"real": {"records": str(shared_data), "draws": 5}}
    pipeline.run_stage(dataclasses.replace(run, overrides=records), "real")
    real = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    toy_rows = [r for r in real["results"] if r["method"] == "toy"]
    assert {r["collection"] for r in toy_rows} == {"tile:xla", "layout:real <- layout:xla:random",
                                                   "layout:real <- layout:xla:default"}
    scored = [r for r in toy_rows if "missing" not in r]
    assert len(scored) == 2 and all("ridge, 3 fold models averaged" in r["note"] for r in scored)
    blend = next(r for r in real["results"] if r["method"] == "blend" and r["collection"] == "tile:xla")
    assert "missing" not in blend and "toy" in blend["note"]


def test_a_planned_run_gives_the_toy_ranker_its_share(toy, tmp_path: Path, fake_features,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's time model of a third ranker is its RANKER's: capped, it trains before the
    last model with part of the capped share; the run keeps to its budget."""
    spec = importlib.util.spec_from_file_location("_test_run", HERE / "test_run.py")
    test_run = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, test_run)  # its dataclasses look themselves up
    spec.loader.exec_module(test_run)
    fake = test_run.FakeStages(fake_features)
    fake.fixed.update({"toy-train": 20.0, "toy-predict": 4.0})
    run = pipeline.Run(data=str(tmp_path / "data"), work=str(tmp_path / "work"),
                       collections=test_run.COLLS, models="gnn,lgbm,toy", budget=3000.0,
                       plan_options={"max_seeds": 1})
    planned = PlannedRun(run, execute=fake, clock=fake.clock, log=lambda _: None)
    planned.finish()
    names = [s.name for s in planned.plan.stages]
    assert names[4:10] == ["lgbm-train", "lgbm-predict", "toy-train", "toy-predict", "gnn-train",
                           "gnn-predict"]
    lgbm, toy_train, gnn = (planned.plan.get(f"{m}-train") for m in ("lgbm", "toy", "gnn"))
    assert toy_train.planned == pytest.approx(lgbm.planned)
    assert lgbm.planned + toy_train.planned == pytest.approx(0.3 * (lgbm.planned + toy_train.planned + gnn.planned))
    assert "time_budget" in toy_train.options and fake.now <= 3000.0
