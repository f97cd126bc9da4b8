"""The pipeline as functions for the notebooks: each stage called in-process through its CLI entry
point with the Makefile ``run`` target's arguments (:class:`Run.overrides`: per-stage options).
With ``Run(..., budget=S)`` the same calls run the plan of :mod:`ensemble.run`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

from ensemble.stages import STAGES, Run, entry_point, run_stage_now, stage_argv, stage_module
from tpurank.collections import on_kaggle


def planner(run: Run):
    """The planned run of ``run`` (its budget > 0), made on first use: stages run in this process."""
    if run.planner is None:
        from ensemble.run import PlannedRun

        run.planner = PlannedRun(run)
    return run.planner


def run_stage(run: Run, stage: str) -> float:
    """Run one stage in this process (with a budget: recorded in the run's plan); its wall time."""
    if run.budget > 0:
        return planner(run).stage(stage).actual
    return run_stage_now(run, stage)


def run_stages(run: Run, stages: Sequence[str]) -> dict[str, float]:
    return {stage: run_stage(run, stage) for stage in stages}


def _planned(run: Run) -> dict[str, float]:
    before = {s.name for s in planner(run).plan.stages if s.done}
    planner(run).train_and_predict()
    return {s.name: s.actual for s in planner(run).plan.stages if s.done and s.name not in before}


def train(run: Run, build_features: bool = True) -> dict[str, float]:
    """features build (optional) -> each model's train stage. With a budget: measure (validate,
    features, a probe), plan, then train and predict every model within the plan."""
    if run.budget > 0:
        return _planned(run)
    return run_stages(run, (["features"] if build_features else []) + run.model_stages("train"))


def predict(run: Run) -> dict[str, float]:
    """Each model's predict stage; with a budget the planned run predicts as it trains."""
    return _planned(run) if run.budget > 0 else run_stages(run, run.model_stages("predict"))


def submit(run: Run) -> Path:
    """blend -> check; then score when the data root carries hidden test runtimes (samples).
    With a budget: the planned run's last stages (blend, check, score, real, report)."""
    if run.budget > 0:
        return planner(run).finish()
    run_stages(run, ["blend", "check"])
    from tpurank.collections import hidden_runtimes_path

    if hidden_runtimes_path(run.data).is_file():
        run_stage(run, "score")
    return run.submission_path


def find_data(data: str | os.PathLike | None = None, sample_dir: str | os.PathLike = "data/sample-tiny",
              scale: str = "tiny") -> Path:
    """The data root: ``data`` when given, else the Kaggle input, else the sample generated into
    ``sample_dir`` on first use (its ``.complete`` marker is written last)."""
    from tpurank.collections import default_data_root, npz_dir

    if data:
        root = Path(data)
        if not npz_dir(root).is_dir():
            raise FileNotFoundError(f"{root}: not a TpuGraphs data root (no npz_all/npz inside)")
        return root
    kaggle = default_data_root()
    if kaggle is not None:
        return kaggle
    sample = Path(sample_dir)
    if not (sample / ".complete").is_file():
        from features.sample import generate_dataset

        generate_dataset(sample, scale=scale)
    return sample


def default_work(work: str | os.PathLike | None = None, name: str = "notebook") -> Path:
    """``work`` when given, else ``<kaggle root>/working/work`` on Kaggle, else ``work/<name>``."""
    from tpurank.collections import kaggle_root

    if work:
        return Path(work)
    return kaggle_root() / "working" / "work" if on_kaggle() else Path("work") / name


#: the train notebook's budget on Kaggle: a notebook session lasts 9–12 h by accelerator
#: (docs/competition.md §2); 8 h leaves an hour of the shortest for the offline install, the
#: bundle and writing the outputs
KAGGLE_SESSION_BUDGET = 8 * 3600.0


def notebook_budget(budget: float | str | None = "auto") -> float:
    """The train notebook's time budget in seconds: ``"auto"`` is :data:`KAGGLE_SESSION_BUDGET`
    on Kaggle and 0 (each stage's own limits) elsewhere; None is 0."""
    if budget == "auto":
        return KAGGLE_SESSION_BUDGET if on_kaggle() else 0.0
    return float(budget or 0.0)


def notebook_preset(preset: str = "auto") -> str:
    """``"auto"``: ``full`` (the GPU budget) on Kaggle, ``quick`` elsewhere; else ``preset``."""
    return ("full" if on_kaggle() else "quick") if preset == "auto" else preset


def device_name() -> str:
    """The device the GNN stages choose by default (``--device auto``): CUDA when present, else CPU."""
    from models.training import choose_device

    device = choose_device("auto")
    if device.type == "cuda":
        import torch

        return f"cuda ({torch.cuda.get_device_name(device)}, mixed precision)"
    return "cpu"


# ---- trained artifacts: what inference needs of a WORK --------------------------------------
#: files under WORK/models that only resume training (optimizer state); inference never reads them
TRAINING_ONLY = ("last.pt", "*.tmp*")
#: what a finished run can rebuild: built graphs and tabular rows, converted real records
CACHES = ("features/*/*/", "real/data/", "real/features/")
MANIFEST = "MANIFEST.json"


def weights_files(work: str | os.PathLike) -> list[Path]:
    """The files of a trained WORK that inference needs, relative to it: ``models/**`` (without
    what only resumes training) and each collection's top-level feature files (normalisation
    stats, build config) — never built graphs or tabular rows, which inference rebuilds."""
    work = Path(work)
    models = [p for p in (work / "models").rglob("*")
              if p.is_file() and not any(p.match(pat) for pat in TRAINING_ONLY)]
    stats = [p for p in (work / "features").glob("*/*") if p.is_file()]
    return sorted(p.relative_to(work) for p in models + stats)


def write_manifest(work: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """``out/MANIFEST.json``: where the weights come from, their preset, seed and commit."""
    import time

    work = Path(work)
    files = weights_files(work)
    manifest: dict[str, Any] = {"source_work": str(work), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                "models": sorted({str(Path(*f.parts[:3])) for f in files if f.parts[0] == "models"}),
                                "feature_files": [str(f) for f in files if f.parts[0] == "features"]}
    for cfg in sorted((work / "models").rglob("config.json"))[:1]:
        saved = json.loads(cfg.read_text())
        manifest.update({k: saved.get(k) for k in ("git_sha", "seed")})
        manifest["preset"] = saved.get("config", {}).get("preset")
    Path(out, MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def export_weights(work: str | os.PathLike, out: str | os.PathLike) -> Path:
    """:func:`install_weights` of a trained ``work`` into ``out`` with a manifest (the Kaggle
    weights dataset)."""
    write_manifest(work, install_weights(work, out))
    return Path(out)


def slim_work(work: str | os.PathLike) -> dict[str, int]:
    """Delete what a finished run can rebuild (:data:`CACHES`) and what only resumes training
    (:data:`TRAINING_ONLY`) and write the manifest, so that the WORK is a weights folder (Kaggle
    caps the saved ``/kaggle/working`` at 20 GB). Returns the bytes before and after."""
    work = Path(work)

    def size() -> int:
        return sum(p.stat().st_size for p in work.rglob("*") if p.is_file())

    before = size()
    for pattern in CACHES:
        for folder in work.glob(pattern):
            shutil.rmtree(folder)
    for pattern in TRAINING_ONLY:
        for path in (work / "models").rglob(pattern):
            path.unlink()
    write_manifest(work, work)
    return {"before": before, "after": size()}


def find_weights(weights: str | os.PathLike | None = "auto") -> Path | None:
    """``"auto"``: the train kernel's output (``<kaggle root>/input/tpurank-train/work``, where
    Kaggle mounts a kernel source) when attached, else the weights dataset
    (``<kaggle root>/input/tpurank-weights``), else None; a path is taken as it is."""
    from tpurank.collections import kaggle_root

    if weights != "auto":
        return Path(weights) if weights else None
    inputs = kaggle_root() / "input"
    found = [p for p in (inputs / "tpurank-train" / "work", inputs / "tpurank-weights")
             if (p / "models").is_dir()]
    return found[0] if found else None


def install_weights(weights: str | os.PathLike, work: str | os.PathLike) -> Path:
    """Copy :func:`weights_files` of trained artifacts (the weights dataset, the train kernel's
    output or any trained WORK) into ``work``: Kaggle inputs are read-only."""
    src, dst = Path(weights), Path(work)
    files = weights_files(src)
    if not any(f.parts[0] == "models" for f in files):
        raise FileNotFoundError(f"{src / 'models'}: no trained models; is this the tpurank weights dataset, "
                                "the train kernel's work folder or a trained WORK (`make run`)?")
    for rel in files:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dst / rel)
    return dst


def weights_preset(weights: str | os.PathLike | None, default: str = "quick") -> str:
    """The preset the weights were trained with (their ``MANIFEST.json``), else ``default``."""
    manifest = Path(weights) / MANIFEST if weights else None
    if manifest is not None and manifest.is_file():
        return json.loads(manifest.read_text()).get("preset") or default
    return default


# ---- what the notebooks show -----------------------------------------------------------------
def run_reports(work: str | os.PathLike, folds: bool = False) -> dict[str, list[dict[str, Any]]]:
    """model -> the reports of its whole runs (:meth:`models.ranker.Ranker.runs`), or with
    ``folds`` of its single fold models too, for every trained model of the registry."""
    from tpurank.registry import MODELS

    return {m.name: m.ranker.runs(work, folds) for m in MODELS if m.trains}


def plot_learning_curves(work: str | os.PathLike):
    """Held-out score against training seconds, one panel per collection (a Figure; the
    report's "Learning curves")."""
    from ensemble.report import learning_curves, learning_curves_figure

    return learning_curves_figure(learning_curves(work))


def validation_table(work: str | os.PathLike) -> list[dict[str, Any]]:
    """Validation score per collection and model run (each ranker's run reports)."""
    from tpurank.registry import get_model

    rows: dict[str, dict[str, Any]] = {}
    for model, reports in run_reports(work).items():
        key = get_model(model).ranker.score_key
        for rep in reports:
            name = model if rep.get("seed") is None else f"{model}@seed{rep['seed']}"
            rows.setdefault(rep["collection"], {"collection": rep["collection"]})[name] = rep.get(key)
    return list(rows.values())


def plot_validation_scores(work: str | os.PathLike):
    """Validation score per collection of each model and of the blend (grouped bars, a Figure)."""
    from ensemble.blend import read_summary
    from ensemble.report import collection_scores_figure

    colls = read_summary(work)["collections"]
    return collection_scores_figure({c: s["valid_score"] for c, s in colls.items()},
                                    "Validation score per collection (valid split)")


def submission_preview(path: str | os.PathLike, rows: int = 5, max_chars: int = 80) -> str:
    """The first lines of a submission CSV, long rankings cut."""
    lines = Path(path).read_text().splitlines()
    shown = [ln if len(ln) <= max_chars else ln[:max_chars] + "..." for ln in lines[:rows + 1]]
    return "\n".join(shown + [f"... {len(lines) - 1} rows"])
