"""ensemble.run: the planned run on fake stages and a fake clock (what it gives each stage, how it
keeps to the budget, when it buys GNN seeds), and on the tiny sample end to end."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from ensemble import pipeline
from ensemble import plan as P
from ensemble.run import BudgetError, PlannedRun, RunConfig, main

COLLS = "tile:xla,layout:xla:random"
PROBE_EVAL = 0.5  # seconds the fake probe's evaluation takes per collection


def gnn_train(budget: float, needs: float) -> float:
    """A GNN train stage: start-up, then training until early stopping (``needs``) or its budget."""
    return 10.0 + min(budget, needs)


@dataclass
class FakeStages:
    """Stages that take scripted seconds on a fake clock and write what the planner reads: the
    feature store (features) and the probe's reports (gnn-train --steps 0)."""

    write_features: Callable[[Path], Path]  # the fake_features fixture
    gnn_needs: float = 1e9  # seconds until the GNN early-stops (1e9: it uses its whole budget)
    lgbm_needs: float = 1e9
    lgbm_overrun: float = 1.0  # actual / given of LightGBM's time budget while it trains
    fixed: dict[str, float] = field(default_factory=lambda: {
        "validate": 5.0, "features": 30.0, "baseline-predict": 8.0, "lgbm-predict": 10.0,
        "gnn-predict": 60.0, "blend": 12.0, "check": 3.0, "real": 20.0, "report": 15.0})
    now: float = 0.0
    starts_processes: bool = True
    calls: list[tuple[str, int, dict]] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def startup(self) -> float:
        self.now += 2.0
        return 2.0

    def __call__(self, run: pipeline.Run, stage: str) -> None:
        options = dict(run.overrides.get(stage, {}))
        self.calls.append((stage, run.seed, options))
        if stage == "features":
            self.write_features(Path(run.work) / "features")
        if stage == "gnn-train" and options.get("steps") == 0:
            self.now += self.probe(run, options)
            return
        if stage == "gnn-train":
            self.now += gnn_train(options["time_budget"], self.gnn_needs)
        elif stage == "lgbm-train":
            self.now += 3.0 + min(options["time_budget"] * self.lgbm_overrun, self.lgbm_needs)
        else:
            self.now += self.fixed[stage]

    def probe(self, run: pipeline.Run, options: dict) -> float:
        linked = Path(options["features"])
        for slug in ("tile-xla", "layout-xla-random"):
            stems = sorted(p.name for p in (linked / slug / "graphs" / "valid").iterdir())
            report = Path(run.work) / "models" / "gnn" / slug / f"seed{run.seed}" / "report.json"
            report.parent.mkdir(parents=True)
            report.write_text(json.dumps({"per_graph": {s: 0.5 for s in stems},
                                          "final_eval_seconds": PROBE_EVAL}))
        return 12.0 + 2 * PROBE_EVAL

    def seeds(self, stage: str) -> list[int]:
        return [seed for name, seed, options in self.calls if name == stage and options.get("steps") != 0]


def planned(tmp_path: Path, fake: FakeStages, budget: float, log: list[str] | None = None,
            **settings) -> PlannedRun:
    run = pipeline.Run(data=str(tmp_path / "data"), work=str(tmp_path / "work"), collections=COLLS,
                       budget=budget, plan_options=settings)
    return PlannedRun(run, execute=fake, clock=fake.clock,
                      wall=lambda: 1_000_000.0, log=(log.append if log is not None else lambda _: None))


def test_the_plan_is_printed_with_an_eta_and_kept(tmp_path: Path, fake_features) -> None:
    """A GNN that uses all it is given: one seed, and the run ends within the budget."""
    fake, log = FakeStages(fake_features), []
    run = planned(tmp_path, fake, 2000.0, log)
    run.finish()
    text = "\n".join(log)
    assert "planned to end by" in log[0] and "ETA" in log[0]
    table = next(line for line in log if line.startswith("[plan] the plan (seconds):"))
    assert "gnn-predict" in table and "lgbm-train" in table and "report" in table
    assert any(line.startswith("[plan] ETA ") for line in log)
    # before the plan exists (validate, features) the ETA is the budget's end, not "now"
    measured = next(line for line in log if line.startswith("[plan] validate:"))
    assert measured.endswith(f"ETA {P.clock(run.plan.deadline)}")
    # LightGBM trained, the GNN to come: it takes what is left, so the ETA is the usable end
    lgbm = next(line for line in log if line.startswith("[plan] lgbm-train:"))
    assert lgbm.endswith(f"ETA {P.clock(run.plan.started_at + 2000.0 * (1 - P.MARGIN))}")
    assert "planned vs actual" in log[-2] and "budget (" in log[-1]
    stages = [s.name for s in run.plan.stages]
    assert stages == ["validate", "features", "baseline-predict", "gnn-probe", "lgbm-train",
                      "lgbm-predict", "gnn-train", "gnn-predict", "blend", "check", "real", "report"]
    assert fake.now <= 2000.0 and fake.now >= 2000.0 * 0.9
    assert "no GNN seed 1" in text and fake.seeds("gnn-train") == [0]
    saved = json.loads((tmp_path / "work" / P.PLAN_FILE).read_text())
    assert saved["elapsed"] == pytest.approx(fake.now)
    assert all(s["actual"] is not None for s in saved["stages"])
    report_call = next(options for stage, _, options in fake.calls if stage == "report")
    assert report_call["plan"] == str(tmp_path / "work" / P.PLAN_FILE)


def test_lgbm_gets_its_share_and_the_gnn_the_rest(tmp_path: Path, fake_features) -> None:
    fake = FakeStages(fake_features, lgbm_needs=50.0)
    run = planned(tmp_path, fake, 3000.0, max_seeds=1)
    run.finish()
    lgbm, gnn = run.plan.get("lgbm-train"), run.plan.get("gnn-train")
    assert lgbm.planned == pytest.approx(0.3 * (lgbm.planned + gnn.planned))
    assert lgbm.actual == pytest.approx(53.0)  # it early-stopped: the rest goes to the GNN
    assert gnn.given > gnn.planned + 0.9 * (lgbm.planned - lgbm.actual)
    assert lgbm.options["time_budget"] < lgbm.given  # its start-up is kept back
    # the predict stage is told the train stage's options (a model checks it predicts with them)
    predict = next(options for stage, _, options in fake.calls if stage == "lgbm-predict")
    assert predict["time_budget"] == lgbm.options["time_budget"]
    assert fake.now <= 3000.0


def test_an_overrun_moves_the_plan_of_the_stages_after_it(tmp_path: Path, fake_features) -> None:
    """LightGBM takes 30 % more than its time budget: the GNN is given less, the run still ends
    within the budget."""
    fake = FakeStages(fake_features, lgbm_overrun=1.3)
    run = planned(tmp_path, fake, 2000.0, max_seeds=1)
    run.finish()
    lgbm, gnn = run.plan.get("lgbm-train"), run.plan.get("gnn-train")
    assert lgbm.actual > lgbm.given
    assert gnn.given < gnn.planned - 0.9 * (lgbm.actual - lgbm.given)
    assert fake.now <= 2000.0


def test_what_early_stopping_leaves_buys_gnn_seeds(tmp_path: Path, fake_features) -> None:
    fake, log = FakeStages(fake_features, gnn_needs=300.0), []
    run = planned(tmp_path, fake, 3000.0, log, max_seeds=3)
    run.finish()
    assert fake.seeds("gnn-train") == [0, 1, 2] and fake.seeds("gnn-predict") == [0, 1, 2]
    assert [s.name for s in run.plan.stages][8:12] == ["gnn-train@seed1", "gnn-predict@seed1",
                                                       "gnn-train@seed2", "gnn-predict@seed2"]
    # every train stage's --time-budget keeps back the probe's start-up and a share
    second = run.plan.get("gnn-train@seed1")
    assert run.probe_start == run.probe.overhead > 0
    assert second.given - second.options["time_budget"] == pytest.approx(
        run.probe_start + run.rankers["gnn"].overrun * second.given, abs=0.1)
    lgbm = run.plan.get("lgbm-train")
    assert lgbm.given - lgbm.options["time_budget"] == pytest.approx(
        run.probe_start + run.rankers["lgbm"].overrun * lgbm.given, abs=0.1)
    assert fake.now <= 3000.0
    # planned from the probe when the time was split; given from the first seed's predict stage
    assert run.plan.get("gnn-predict@seed1").given == pytest.approx(1.05 * 60.0)


def test_a_share_of_several_seeds_is_split_into_seeds(tmp_path: Path, fake_features) -> None:
    """A GNN that trains all it is given: its share holds two seeds of at least 75 % of the quick
    preset's 900 s (not three, nor two whole ones), so two seeds get equal parts, and the run
    still ends within the budget."""
    fake, log = FakeStages(fake_features), []
    run = planned(tmp_path, fake, 2500.0, log, max_seeds=3)
    run.finish()
    assert fake.seeds("gnn-train") == [0, 1] and fake.seeds("gnn-predict") == [0, 1]
    first, second = run.plan.get("gnn-train"), run.plan.get("gnn-train@seed1")
    assert P.MIN_SEED_SHARE * 900.0 <= first.given < 900.0
    assert second.given == pytest.approx(first.given, rel=0.1)
    assert run.plan.gnn_seeds == 2 and any("GNN seeds: 2 planned" in line for line in log)
    assert json.loads((tmp_path / "work" / P.PLAN_FILE).read_text())["gnn_seeds"] == 2
    assert P.Plan.load(tmp_path / "work" / P.PLAN_FILE).gnn_seeds == 2
    assert 2500.0 * 0.9 <= fake.now <= 2500.0
    # planned when the GNN's time was split, so the ETA after the first seed holds the second
    assert second.planned == pytest.approx(first.given) and not run.plan.pending()
    eta = next(line for line in log if line.startswith("[plan] gnn-predict:")).rsplit(" ", 1)[-1]
    assert eta >= P.clock(run.plan.started_at + run.plan.get("gnn-predict@seed1").start)


def test_seeds_stop_when_the_next_would_not_fit(tmp_path: Path, fake_features) -> None:
    fake, log = FakeStages(fake_features, gnn_needs=400.0), []
    run = planned(tmp_path, fake, 2000.0, log, max_seeds=5)
    run.finish()
    seeds = fake.seeds("gnn-train")
    assert 2 <= len(seeds) < 5 and seeds == list(range(len(seeds)))
    note = next(line for line in log if f"no GNN seed {len(seeds)}:" in line)
    left, needed = [float(w.replace(",", "")) for w in note.split() if w.replace(",", "").isdigit()][-3:-1]
    assert left < needed == pytest.approx(P.MIN_SEED_SHARE * run.plan.get("gnn-train").actual, abs=1)
    assert fake.now <= 2000.0


def test_the_probe_trains_nothing(tmp_path: Path, fake_features) -> None:
    fake = FakeStages(fake_features)
    planned(tmp_path, fake, 2000.0, max_seeds=1).finish()
    probe = next(options for stage, _, options in fake.calls if options.get("steps") == 0)
    assert probe["folds"] == 0 and probe["time_budget"] == 0


def test_a_budget_too_small_stops_after_measuring(tmp_path: Path, fake_features) -> None:
    fake = FakeStages(fake_features)
    with pytest.raises(BudgetError, match="leave no training time; give at least"):
        planned(tmp_path, fake, 90.0).finish()
    assert [c[0] for c in fake.calls][-1] == "gnn-train"  # the probe was the last stage run


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="budget"):
        RunConfig(budget=0).check()
    with pytest.raises(ValueError, match="max-seeds"):
        RunConfig(budget=10, max_seeds=0).check()
    assert main(["--budget", "0"]) == 2


def test_the_notebook_calls_follow_the_plan(tmp_path: Path, fake_features) -> None:
    """pipeline.run_stage / train / predict / submit of a Run with a budget go through its plan."""
    fake = FakeStages(fake_features, gnn_needs=100.0)
    run = pipeline.Run(data=str(tmp_path / "data"), work=str(tmp_path / "work"), collections=COLLS,
                       budget=2000.0, plan_options={"max_seeds": 2})
    run.planner = PlannedRun(run, execute=fake, clock=fake.clock,
                             log=lambda _: None)
    assert pipeline.run_stage(run, "validate") == 5.0
    pipeline.run_stage(run, "features")
    trained = pipeline.train(run, build_features=False)
    assert {"gnn-probe", "lgbm-train", "gnn-train", "gnn-predict", "gnn-train@seed1"} <= set(trained)
    assert pipeline.predict(run) == {}
    assert pipeline.submit(run) == run.submission_path
    assert run.planner.phase == "finished" and fake.now <= 2000.0


def test_stages_as_processes_are_monitored(tiny_root: Path, tmp_path: Path) -> None:
    """What `make run BUDGET=S` runs stages with: a process each, recorded by tpurank.monitor."""
    from ensemble.run import Subprocesses

    run = pipeline.Run(data=str(tiny_root), work=str(tmp_path / "work"))
    execute = Subprocesses(monitor_log=str(tmp_path / "stages.jsonl"))
    execute(run, "validate")
    record = json.loads((tmp_path / "stages.jsonl").read_text())
    assert record["stage"] == "validate" and record["rc"] == 0 and record["wall_s"] > 0
    assert run.validate_report.is_file() and execute.startup() > 0
    with pytest.raises(RuntimeError, match="stage 'check' failed"):
        execute(run, "check")  # no submission to check


def test_a_budget_on_the_tiny_sample_end_to_end(tiny_root: Path, tmp_path: Path,
                                                tiny_overrides: dict, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    """The notebooks' pipeline calls with a budget, on two collections of the tiny sample: the
    plan and its ETA are printed, the GNN trains one seed until its share is spent, the run
    ends within 5 % of the budget and the report shows planned vs actual seconds per stage."""
    import time

    from bad_graphs import subset_root

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = subset_root(tiny_root, tmp_path / "root", ("tile:xla", "layout:xla:random"))
    tiny_overrides["gnn-train"].update(steps=100_000, patience=0)  # time ends its training
    budget = 75.0
    run = pipeline.Run(data=str(root), work=str(tmp_path / "work"), overrides=tiny_overrides,
                       budget=budget, plan_options={"max_seeds": 1},
                       submission=str(tmp_path / "sub" / "submission.csv"))
    t0 = time.monotonic()
    pipeline.run_stages(run, ["validate", "features"])
    pipeline.train(run, build_features=False)
    pipeline.predict(run)
    path = pipeline.submit(run)
    elapsed = time.monotonic() - t0
    out = capsys.readouterr().out
    assert "[plan] budget 75 s" in out and "[plan] the plan (seconds):" in out and "[plan] ETA " in out
    assert elapsed <= 1.05 * budget
    plan = P.Plan.load(tmp_path / "work" / P.PLAN_FILE)
    gnn = plan.get("gnn-train")
    assert gnn.actual >= 0.5 * gnn.given  # the budget bound it
    assert plan.elapsed == pytest.approx(elapsed, abs=2.0) and plan.get("report").done
    report = (next(path.parent.glob("*/report.md"))).read_text()
    assert "## Time plan: planned vs actual" in report
    for name in ("validate", "gnn-probe", "lgbm-train", "gnn-train", "gnn-predict", "blend"):
        assert f"| {name} |" in report
    data = json.loads(next(path.parent.glob("*/report.json")).read_text())
    assert data["plan"]["budget"] == budget and all(
        s["actual"] is not None for s in data["plan"]["stages"] if s["name"] != "report")
