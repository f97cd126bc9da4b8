"""The pipeline's stages as commands: their names, their command lines (the Makefile's ``run``
target) and a run of one in this process. :mod:`ensemble.pipeline` (the notebooks' functions) and
:mod:`ensemble.run` (a run planned to a time budget) both run stages through these."""

from __future__ import annotations

import importlib
import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpurank import registry


def entry_point(module: str) -> str:
    """What ``python -m module`` runs: a package's ``__main__``, else the module itself."""
    spec = importlib.util.find_spec(module)
    return f"{module}.__main__" if spec is not None and spec.submodule_search_locations else module


#: the stages before the models' and after them, in pipeline order (``score`` only where the data
#: root carries hidden test runtimes): stage name -> (module whose ``main(argv)`` runs it, its
#: leading sub-command words). A model's stages are ``<name>-train`` / ``<name>-predict``
#: (:func:`stage_module`, from :mod:`tpurank.registry`).
FIRST = {"validate": ("features.__main__", ("validate",)), "features": ("features.__main__", ("build",))}
LAST = {s: ("ensemble.__main__", (s,)) for s in ("blend", "check", "score", "real", "report")}
STAGES = {**FIRST, **LAST}


def stage_module(stage: str) -> tuple[str, tuple[str, ...]]:
    """(module whose ``main(argv)`` runs ``stage``, its leading sub-command words)."""
    if stage in STAGES:
        return STAGES[stage]
    name, _, sub = stage.rpartition("-")
    model = registry.BY_NAME.get(name)
    if model is None or sub not in model.stages:
        raise KeyError(f"no stage {stage!r}: the stages are {', '.join(STAGES)} and <model>-train|"
                       f"predict of the models {', '.join(registry.BY_NAME)} (tpurank/registry.py)")
    return entry_point(model.module), (sub,)


@dataclass
class Run:
    """Where the data and work dir are, and how every stage is configured."""

    data: str
    work: str
    preset: str = "quick"
    seed: int = 0
    collections: str = "all"
    models: str | None = None  # comma list (None: the registry's default blend)
    submission: str = ""  # default: WORK/submission.csv
    protocol: str = "auto"  # what the blend is fitted on: auto (out-of-fold predictions) | valid
    #: per-stage overrides, e.g. {"gnn-train": {"steps": 20}, "lgbm-train": {"num_boost_round": 30}}
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: seconds for the whole run, planned (ensemble.run); 0 = each stage's own limits (the presets')
    budget: float = 0.0
    #: the planner's other settings (fields of ensemble.run.RunConfig, e.g. {"max_seeds": 2})
    plan_options: dict[str, Any] = field(default_factory=dict)
    #: the planned run of a budget (ensemble.run), made by the first stage run through ensemble.pipeline
    planner: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.models = ",".join(registry.model_list(self.models))

    @property
    def model_list(self) -> list[str]:
        return registry.model_list(self.models)

    def model_stages(self, stage: str) -> list[str]:
        """``<model>-<stage>`` of every model of :attr:`models` that has that stage (registry)."""
        return [f"{registry.get_model(m).name}-{stage}" for m in self.model_list
                if stage in registry.get_model(m).stages]

    @property
    def validate_report(self) -> Path:
        return Path(self.work) / "validate_report.json"

    @property
    def submission_path(self) -> Path:
        return Path(self.submission) if self.submission else Path(self.work) / "submission.csv"


def _options(values: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        argv += ["--" + key.replace("_", "-"), str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def stage_argv(run: Run, stage: str) -> list[str]:
    """The command line of ``stage`` (without ``python -m``), as in the Makefile ``run`` target."""
    module, words = stage_module(stage)
    common = {"data": run.data, "work": run.work, "preset": run.preset, "seed": run.seed,
              "collections": run.collections}
    if stage == "validate":
        argv = [*words, "--data", run.data, "--collections", run.collections, "--skip-bad",
                "--report", str(run.validate_report)]
    elif stage in ("check", "score"):
        argv = [*words, str(run.submission_path), "--data", run.data]
    elif stage == "real":
        argv = [*words, "--work", run.work, "--models", run.models, "--skip-missing"]
    elif stage in ("blend", "report"):
        argv = [*words, *_options(common | {"models": run.models}),
                "--submission", str(run.submission_path)]
        if stage == "blend":
            argv += ["--protocol", run.protocol]
    else:
        argv = [*words, *_options(common)]
        if stage == "features" and run.validate_report.is_file():  # skip what validate found bad
            argv += ["--skip-bad-report", str(run.validate_report)]
    return argv + _options(run.overrides.get(stage, {}))


def run_stage_now(run: Run, stage: str) -> float:
    """Run one stage in this process, unplanned; returns its wall time."""
    module, _ = stage_module(stage)
    argv = stage_argv(run, stage)
    print(f"$ python -m {module.removesuffix('.__main__')} {' '.join(argv)}", flush=True)
    t0 = time.perf_counter()
    rc = importlib.import_module(module).main(argv)
    if rc:
        raise RuntimeError(f"stage {stage!r} failed with exit code {rc}: "
                           f"python -m {module.removesuffix('.__main__')} {' '.join(argv)}")
    return time.perf_counter() - t0
