"""``python -m ensemble run --budget S`` (``make run BUDGET=S``): the whole pipeline planned to
take S seconds: measure, plan, train and predict, further seeds of the last model, finish
(docs/cli.md, "A run planned to a time budget"). Every model-specific number is its ranker's
(:class:`models.ranker.Ranker`). The notebooks run the same plan in-process."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tpurank import registry
from tpurank.collections import get_collection, held_collections, hidden_runtimes_path
from tpurank.config import StageConfig, parse_config

from ensemble import plan as P
from ensemble.stages import FIRST, LAST, Run, run_stage_now, stage_argv, stage_module

class BudgetError(ValueError):
    """The budget cannot hold the run (what is measured and estimated leaves no training time)."""


@dataclass
class RunConfig(StageConfig):
    """The whole pipeline planned to a time budget (python -m ensemble run; make run BUDGET=S)."""

    budget: float = 0.0  # wall seconds for the whole run, from validate to the report
    models: str = ""  # comma list of the models trained and blended (empty: the default blend of tpurank/registry.py); training-free ones are predicted too
    protocol: str = "auto"  # what the blend is fitted on: auto (out-of-fold predictions) | valid
    submission: str = "submissions/submission.csv"  # the submission CSV written (and checked)
    max_seeds: int = 3  # seeds of the last model at most, each of at least 75% of its preset's --time-budget (45 minutes on 2 cores trains 3: BENCHMARKS.md "A run planned to a time budget")
    monitor_log: str = ""  # append each stage's wall time, peak RSS and open files to this JSON-lines file (tpurank.monitor)
    stage_options: str = ""  # per-stage options as JSON, e.g. {"<model>-train": {"threads": 1}} (the notebooks' OVERRIDES)

    PRESETS = {"quick": {}, "full": {}}

    def check(self) -> None:
        if self.budget <= 0:
            raise ValueError(f"--budget must be > 0 seconds (got {self.budget})")
        if self.max_seeds < 1:
            raise ValueError("--max-seeds must be >= 1")


# ---- executors --------------------------------------------------------------------------------
class InProcess:
    """Runs a stage in this process (the notebooks); nothing to start."""

    starts_processes = False

    def __call__(self, run: Run, stage: str) -> None:
        run_stage_now(run, stage)

    def startup(self) -> float:
        return 0.0


@dataclass
class Subprocesses:
    """Runs each stage as ``python -m <module> ...`` (as ``make run``), its output passed
    through; with ``monitor_log`` one :mod:`tpurank.monitor` record per stage is appended there."""

    monitor_log: str = ""
    starts_processes = True

    def __call__(self, run: Run, stage: str) -> None:
        from tpurank.monitor import append_record, monitored

        module = stage_module(stage)[0].removesuffix(".__main__")
        cmd = [sys.executable, "-m", module, *stage_argv(run, stage)]
        print("$ python " + " ".join(cmd[1:]), flush=True)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = monitored(cmd)
        record.pop("proc")
        if self.monitor_log:
            append_record(Path(self.monitor_log), {"stage": stage, "started": started, **record})
        if record["rc"]:
            raise RuntimeError(f"stage {stage!r} failed with exit code {record['rc']}: {record['command']}")

    def startup(self) -> float:
        """Wall seconds of a process that imports what a short stage imports (measured now)."""
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import ensemble.blend, ensemble.report"], check=True)
        return time.perf_counter() - t0


# ---- the planned run ----------------------------------------------------------------------------
@dataclass
class PlannedRun:
    """One run to a time budget: measure, plan, train and predict, spend what is left, finish."""

    run: Run
    execute: Any = field(default_factory=InProcess)  # runs a stage: execute(run, stage); execute.startup() -> seconds
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    log: Callable[[str], None] = field(default=lambda text: print(text, flush=True))
    cfg: RunConfig = field(init=False)  # the run's budget and Run.plan_options
    plan: P.Plan = field(init=False)
    probe: P.ProbeResult | None = field(init=False, default=None)
    startup: float = field(init=False, default=0.0)  # a short stage's start-up (measured)
    seeds: list[int] = field(init=False, default_factory=list)  # the last model's seeds trained and predicted
    phase: str = field(init=False, default="new")  # new | planned | trained | finished

    def __post_init__(self) -> None:
        self.cfg = RunConfig(budget=self.run.budget, **self.run.plan_options)
        self.cfg.check()
        self.t0 = self.clock()
        self.plan = P.Plan(self.cfg.budget, started_at=self.wall())
        wanted = {registry.get_model(m).name for m in self.run.model_list}
        models = [m for m in registry.MODELS if m.name in wanted and m.trains]
        #: trained models in training order (capped first) -> their rankers
        self.rankers = {m.name: m.ranker for m in sorted(models, key=lambda m: not m.ranker.capped)}
        self.trained = list(self.rankers)
        self.free = [m.name for m in registry.MODELS if not m.trains]  # predicted in the measure phase
        #: the model whose seeds the training time left buys (not capped), the one probed
        self.last = next((m for m, r in self.rankers.items() if not r.capped), None)
        self.probed = next((m for m, r in self.rankers.items() if r.probed), None)
        probe = f", {self.rankers[self.probed].title} probe" if self.probed else ""
        self.log(f"[plan] budget {self.cfg.budget:,.0f} s from {P.clock(self.plan.started_at)}: "
                 f"planned to end by {P.clock(self.plan.deadline)} (ETA); the plan follows the "
                 f"measured stages (validate, features{probe})")

    @property
    def probe_start(self) -> float:
        """A stage process's start-up when it loads the probed model (e.g. torch), as the probe
        measured it; in-process it is loaded once, by the probe."""
        if self.probe is None or not getattr(self.execute, "starts_processes", False):
            return 0.0
        return self.probe.overhead

    # -- clock
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def eta(self) -> float:
        """The budget's end while measuring; its end less the margin while a training is to come
        (the last model takes what the others leave); else the end if every stage keeps its plan."""
        if self.phase == "new":
            return self.plan.deadline
        if self.phase == "planned" and any(not self.plan.get(f"{m}-train").done for m in self.trained):
            return self.plan.started_at + self.cfg.budget * (1.0 - P.MARGIN)
        return self.plan.eta(self.elapsed())

    def usable(self) -> float:
        """Seconds left before the budget's end less the margin."""
        return self.cfg.budget * (1.0 - P.MARGIN) - self.elapsed()

    @property
    def plan_path(self) -> Path:
        return Path(self.run.work) / P.PLAN_FILE

    def save(self) -> None:
        self.plan.save(self.plan_path)

    # -- running one stage
    def seed_run(self, seed: int | None = None, **stage_options: dict[str, Any]) -> Run:
        """The run with ``seed`` and extra per-stage options (stage name -> options)."""
        overrides = {s: {**self.run.overrides.get(s, {}), **stage_options.get(s, {})}
                     for s in set(self.run.overrides) | set(stage_options)}
        return dataclasses.replace(self.run, seed=self.run.seed if seed is None else seed,
                                   overrides=overrides)

    def stage(self, name: str, stage: str | None = None, run: Run | None = None,
              planned: float | None = None, basis: str = "measured",
              options: dict[str, Any] | None = None, before: str | None = None) -> P.StageRecord:
        """Run ``stage`` (default: ``name``) now and record it as ``name`` (a new record goes
        before stage ``before``); ``planned``: the seconds it is given now (None: a measured
        stage, its plan is what it took)."""
        stage = stage or name
        record = self.plan.get(name) or self.plan.add(P.StageRecord(name, planned or 0.0, basis),
                                                      before=before)
        record.given = planned
        record.options.update(options or {})
        record.start = self.elapsed()
        self.save()
        run = run or self.seed_run(**({stage: options} if options else {}))
        try:
            self.execute(run, stage)
        finally:
            record.actual = self.elapsed() - record.start
            if planned is None and self.phase == "new":
                record.planned = record.given = record.actual
            self.save()
        eta = self.eta()
        self.log(f"[plan] {name}: {record.actual:,.0f} s (given {record.given or record.actual:,.0f} s); "
                 f"{self.elapsed():,.0f} of {self.cfg.budget:,.0f} s spent, ETA {P.clock(eta)}")
        return record

    # -- 1. measure
    def measure(self) -> None:
        for name in [*FIRST, *(f"{m}-predict" for m in self.free)]:
            if self.plan.get(name) is None:
                self.stage(name)
        if self.probed and self.probe is None:
            self.run_probe()
        self.startup = self.execute.startup()

    @property
    def features_dir(self) -> Path:
        return Path(self.run.work) / "features"

    def collections(self) -> list:
        return held_collections(self.run.data, self.run.collections)

    def stage_config(self, stage: str, run: Run | None = None):
        """The parsed options of a model stage as this run would pass them."""
        ranker = self.rankers[stage.rsplit("-", 1)[0]]
        return ranker.parse(stage_argv(run or self.seed_run(), stage)[1:])

    def run_probe(self) -> None:
        """Score a few valid graphs per collection with an untrained model of the run's
        configuration (its train stage with :meth:`Ranker.probe_options`, its own WORK): seconds
        per config-node."""
        root = Path(self.run.work) / P.PROBE_DIR
        shutil.rmtree(root, ignore_errors=True)
        linked = P.probe_features(self.features_dir, root / "features", self.collections())
        if not linked:
            raise BudgetError(f"{self.features_dir}: no collection has a valid graph with runtimes "
                              "for the probe to time predictions on; run without a budget")
        ranker, train = self.rankers[self.probed], f"{self.probed}-train"
        options = {**self.run.overrides.get(train, {}), "features": str(root / "features"),
                   **ranker.probe_options(P.PROBE_CONFIGS)}
        probe = dataclasses.replace(self.run, work=str(root), collections=",".join(linked),
                                    overrides={train: options})
        record = self.stage(f"{self.probed}-probe", train, probe)
        cfg = self.stage_config(train, probe)
        reports = {}
        for name in linked:
            path = cfg.model_dir(get_collection(name)) / ranker.report
            if path.is_file():
                reports[name] = json.loads(path.read_text())
        self.probe = P.read_probe(reports, linked, P.PROBE_CONFIGS, record.actual)
        rates = ", ".join(f"{c} {1e-6 / s:,.2f}"
                          for c, s in self.probe.seconds_per_config_node.items())
        record.basis = f"measured: million config-nodes/s {rates}"
        self.save()

    # -- 2. plan
    def predict_estimate(self, model: str) -> tuple[float, str]:
        if model == self.probed:
            cfg = self.stage_config(f"{model}-predict")
            return P.probed_predict_estimate(self.features_dir, self.collections(), cfg.folds,
                                             getattr(cfg, "oof_max_configs", 0), self.probe,
                                             self.probe_start)
        return P.fixed_estimate("predict", self.configs, self.startup,
                                cost=self.rankers[model].predict_cost)

    def finish_estimate(self, stage: str, seeds: int = 1) -> tuple[float, str]:
        """(seconds, basis) of a stage after training, with ``seeds`` seeds of the last model."""
        runs = len(self.trained) + (seeds - 1) * (self.last is not None) + len(self.free)
        seconds, basis = P.fixed_estimate(stage, self.configs, self.startup, runs)
        if stage == "real" and self.probe is not None:  # it loads the probed model too
            seconds += self.probe_start
            basis += f" + {self.probe_start:.0f} s {self.rankers[self.probed].title} start"
        return seconds, basis

    def finish_stages(self) -> list[str]:
        scored = hidden_runtimes_path(self.run.data).is_file()
        return [s for s in LAST if s != "score" or scored]

    def make_plan(self) -> None:
        """Estimate the stages to come, share the training time, print the plan and the ETA."""
        self.measure()
        self.configs = P.run_configs(self.features_dir, self.collections())
        later: list[P.StageRecord] = []
        for model in self.trained:
            later.append(P.StageRecord(f"{model}-predict", *self.predict_estimate(model)))
        for stage in self.finish_stages():
            later.append(P.StageRecord(stage, *self.finish_estimate(stage)))
        reserve = sum(r.planned for r in later)
        pool = self.usable() - reserve
        if pool <= 0:
            raise BudgetError(
                f"budget {self.cfg.budget:,.0f} s: {self.elapsed():,.0f} s measured (validate, features, "
                f"probe), {reserve:,.0f} s estimated for predictions and the stages after them, and "
                f"{P.MARGIN:.0%} kept back leave no training time; give at least "
                f"{(self.elapsed() + reserve) / (1 - P.MARGIN) * 1.5:,.0f} s")
        capped = [m for m in self.trained if self.rankers[m].capped]
        shares = P.training_shares(pool, self.trained, capped, P.FIRST_SHARE)
        for model in self.trained:
            first = ", ".join(self.rankers[m].title for m in capped)
            basis = (f"at most {P.FIRST_SHARE:.0%} of the {pool:,.0f} s of training"
                     + (f" ({first})" if len(capped) > 1 else "")
                     if model in capped and self.last else
                     f"the training time left ({pool:,.0f} s{f' less {first}' if capped and self.last else ''})")
            self.plan.add(P.StageRecord(f"{model}-train", shares[model], basis))
            self.plan.add(next(r for r in later if r.name == f"{model}-predict"))
        for record in later[len(self.trained):]:
            self.plan.add(record)
        if self.last and self.cfg.max_seeds > 1:
            per_seed, title = self.seed_seconds(), self.rankers[self.last].title
            self.plan.notes.append(
                f"{title} seeds: up to {self.cfg.max_seeds}. When the others have trained, the {title}'s "
                f"time is split into as many seeds as each get {P.MIN_SEED_SHARE:.0%} of the preset's "
                f"{per_seed:,.0f} s of one seed; "
                f"what early stopping leaves trains a further seed when at least "
                f"{P.MIN_SEED_SHARE:.0%} of the first seed's training time and its predict time fit")
        self.phase = "planned"
        self.save()
        self.log("[plan] the plan (seconds):\n" + self.plan.table())
        for note in self.plan.notes:
            self.log(f"[plan] {note}")
        self.log(f"[plan] ETA {P.clock(self.plan.eta(self.elapsed()))} "
                 f"(budget ends {P.clock(self.plan.deadline)}, {P.MARGIN:.0%} kept back)")

    # -- 3. train and predict
    def train_options(self, model: str, seconds: float) -> dict[str, Any]:
        """Options of a train stage planned to take ``seconds`` in all: ``--time-budget`` less
        its start-up (:attr:`probe_start`, and the model's share of the seconds for reading graphs
        or rows and the last writes, :attr:`Ranker.overrun`)."""
        ranker = self.rankers[model]
        budget = seconds - self.probe_start - ranker.overrun * seconds
        return {"time_budget": round(max(1.0, budget), 1)}

    def train_and_predict(self) -> None:
        """Every trained model's train and predict stages, then the last model's further seeds."""
        if self.phase == "new":
            self.make_plan()
        if self.phase != "planned":
            return
        for model in self.trained:
            train = f"{model}-train"
            others = [f"{m}-train" for m in self.trained if m != model and not self.plan.get(f"{m}-train").done]
            available = self.usable() - self.plan.pending_seconds(exclude=[train, *others])
            planned = self.plan.get(train).planned
            if others:  # a capped model: its share, scaled down when the run is late
                total = planned + sum(self.plan.get(o).planned for o in others)
                seconds = planned * min(1.0, available / total)
            else:
                seconds = available
            if model == self.last:
                seconds = self.split_seeds(seconds)
            options = self.train_options(model, seconds)
            self.stage(train, planned=seconds, basis=self.plan.get(train).basis, options=options)
            predict = self.plan.get(f"{model}-predict")
            # the train stage's options too: a model checks that it predicts with what it trained
            self.stage(predict.name, run=self.seed_run(**{predict.name: options}),
                       planned=predict.planned, basis=predict.basis)
        self.seeds = [self.run.seed] if self.last else []
        if self.last:
            self.more_seeds()
        self.phase = "trained"
        self.save()

    def seed_seconds(self) -> float:
        """The training time of one seed of the last model in its preset (its ``--time-budget``; 0: none)."""
        return self.stage_config(f"{self.last}-train").time_budget

    def split_seeds(self, seconds: float) -> float:
        """The first seed's seconds when the last model's ``seconds`` are split into as many seeds
        as each still get ``MIN_SEED_SHARE`` of the preset's ``--time-budget`` (up to ``--max-seeds``;
        each further seed's predict stage and the blend's larger read kept back): on the samples a
        fold model levels off well within its share, so a further seed gains more than a longer one."""
        per_seed, model, title = self.seed_seconds(), self.last, self.rankers[self.last].title
        predict = self.plan.get(f"{model}-predict").planned * P.SEED_PREDICT_MARGIN
        count, least = 1, P.MIN_SEED_SHARE * per_seed
        if per_seed > 0:
            count = int(min(self.cfg.max_seeds, max(1, (seconds + predict) // (least + predict))))
        extra = sum(self.finish_estimate(s, count)[0] - self.finish_estimate(s, 1)[0]
                    for s in self.finish_stages())
        first = (seconds - (count - 1) * predict - extra) / count
        self.plan.gnn_seeds = count
        basis, after = f"the {title}'s time split into {count} seeds", self.finish_stages()[0]
        for seed in range(self.run.seed + 1, self.run.seed + count):  # in the plan, so in the ETA
            self.plan.add(P.StageRecord(f"{model}-train@seed{seed}", first, basis), before=after)
            self.plan.add(P.StageRecord(f"{model}-predict@seed{seed}", predict, basis), before=after)
        self.plan.notes.append(
            f"{title} seeds: {count} planned, {first:,.0f} s of training each "
            f"({seconds:,.0f} s for the {title}; one seed of the preset trains {per_seed:,.0f} s)"
            if count > 1 else
            f"{title} seeds: 1 planned ({seconds:,.0f} s for the {title}; two need "
            f"{2 * least + predict:,.0f} s: {P.MIN_SEED_SHARE:.0%} of the preset's {per_seed:,.0f} s "
            "each and a predict stage)")
        self.log(f"[plan] {self.plan.notes[-1]}")
        return first

    def more_seeds(self) -> None:
        """Further seeds of the last model: those the plan split its share into, each given an
        equal part of what is left, then what early stopping leaves while a seed fits in it."""
        model, title = self.last, self.rankers[self.last].title
        train, predict_stage = f"{model}-train", f"{model}-predict"
        first_train, first_predict = self.plan.get(train), self.plan.get(predict_stage)
        while len(self.seeds) < self.cfg.max_seeds:
            seed = max(self.seeds) + 1
            predict = first_predict.actual * P.SEED_PREDICT_MARGIN
            to_come = max(1, self.plan.gnn_seeds - len(self.seeds))  # this seed and the planned after it
            # the stages after training, with every run to come blended
            runs = len(self.seeds) + to_come
            reserve = sum(self.finish_estimate(s, runs)[0] for s in self.finish_stages())
            available = (self.usable() - reserve - to_come * predict) / to_come
            needed = P.MIN_SEED_SHARE * first_train.actual
            if available < needed:
                # a planned seed that no longer fits leaves the plan (and the ETA)
                self.plan.stages = [r for r in self.plan.stages if r.done or "@seed" not in r.name]
                self.plan.notes.append(f"no {title} seed {seed}: {max(available, 0):,.0f} s of training "
                                       f"time left, a seed needs {needed:,.0f} s "
                                       f"({P.MIN_SEED_SHARE:.0%} of the first seed's {first_train.actual:,.0f} s)")
                self.log(f"[plan] {self.plan.notes[-1]}")
                break
            options = self.train_options(model, available)
            run = self.seed_run(seed, **{train: options, predict_stage: options})
            after = self.finish_stages()[0]
            self.stage(f"{train}@seed{seed}", train, run, planned=available,
                       basis="the training time left (seeds)", options=options, before=after)
            self.stage(f"{predict_stage}@seed{seed}", predict_stage, run, planned=predict,
                       basis=f"the first seed's predict stage ({first_predict.actual:,.0f} s) "
                             f"x {P.SEED_PREDICT_MARGIN:g}",
                       before=after)
            self.seeds.append(seed)

    # -- 5. finish
    def finish(self) -> Path:
        """blend, check, score (hidden runtimes only), real, report; the plan's last save."""
        if self.phase in ("new", "planned"):
            self.train_and_predict()
        if self.phase == "trained":
            for stage in self.finish_stages():
                record = self.plan.get(stage)
                if record is None or not record.done:
                    given, basis = self.finish_estimate(stage, max(1, len(self.seeds)))
                    run = self.seed_run(**{"report": {"plan": str(self.plan_path)}}) if stage == "report" else None
                    self.stage(stage, run=run, planned=given, basis=basis)
            self.phase = "finished"
            self.plan.elapsed = self.elapsed()
            self.save()
            over = self.plan.elapsed / self.cfg.budget - 1.0
            self.log("[plan] planned vs actual (seconds):\n" + self.plan.table())
            self.log(f"[plan] the run took {self.plan.elapsed:,.0f} s of its {self.cfg.budget:,.0f} s "
                     f"budget ({over:+.1%}); plan: {self.plan_path}")
        return self.run.submission_path


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(RunConfig, argv, prog="python -m ensemble run")
    try:
        run = Run(data=cfg.data, work=cfg.work, preset=cfg.preset, seed=cfg.seed,
                  collections=cfg.collections, models=cfg.models, submission=cfg.submission,
                  protocol=cfg.protocol, budget=cfg.budget, plan_options={"max_seeds": cfg.max_seeds},
                  overrides=json.loads(cfg.stage_options) if cfg.stage_options else {})
        planned = PlannedRun(run, execute=Subprocesses(cfg.monitor_log))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        planned.finish()
    except BudgetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
