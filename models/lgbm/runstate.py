"""What a LightGBM run keeps between invocations, shared by the plain and the fold protocol:
completion markers (``done.json``, written last), the candidate modes, the split of a
collection's time over its fits, and the prediction ledger ``<model_dir>/predictions.json``
(per prediction file the model's SHA-256 and the inputs' and output's size and mtime: ``predict``
reuses what still matches; written after the predictions, so a kill between only costs a
re-prediction).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection
from tpurank.config import save_run_config
from models.lgbm.config import LgbmConfig
from models.lgbm.data import Rows
from models.lgbm.fit import fit_model
from models.lgbm.model import MODEL_FILE, RankerModel, save_importance
from models.metrics import score_collection
from models.predictions import write_predictions

DONE_FILE = "done.json"
LEDGER_FILE = "predictions.json"
FIT_FRACTION = 0.75  # of a fit's time slice for boosting, the rest for reading rows and scoring
# settings that do not change a trained model: a finished collection is kept whatever they are
# (where the run's folders are is one of them: trained weights copied to another WORK, e.g. the
# Kaggle inference notebook's, stay finished there)
RUNTIME_FIELDS = ("threads", "collections", "collection", "predict_batch_rows", "time_budget",
                  "data", "preset", "checkpoint_every", "work", "features")


def fingerprint(cfg: LgbmConfig) -> str:
    """Hash of the settings that define the trained models (not :data:`RUNTIME_FIELDS`)."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_json(path: Path) -> dict:
    """``path``'s JSON object; ``{}`` when absent or unreadable (then nothing in it is trusted)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def read_done(out_dir: Path, cfg: LgbmConfig) -> dict | None:
    """The metrics of a finished run in ``out_dir`` with the same settings, else None."""
    marker = _read_json(out_dir / DONE_FILE)
    return marker.get("metrics") if marker.get("fingerprint") == fingerprint(cfg) else None


def write_done(out_dir: Path, cfg: LgbmConfig, metrics: dict) -> None:
    """The completion marker: written last, atomically (``tpurank.atomic``)."""
    write_json(out_dir / DONE_FILE, {"fingerprint": fingerprint(cfg), "metrics": metrics})


def candidates(cfg: LgbmConfig, collection: Collection) -> list[str]:
    mode = cfg.resolved_mode(collection)
    return ["lambdarank", "pairwise"] if mode == "auto" else [mode]


def choose(results: dict[str, dict], key: str = "valid_score") -> str:
    """The candidate with the best ``key`` score (the first one when none was scored)."""
    scored = {m: r[key] for m, r in results.items() if r.get(key) is not None}
    if not scored:
        return next(iter(results))
    return max(scored, key=lambda m: scored[m])


def fit_candidates(cfg: LgbmConfig, collection: Collection, train: Rows, valid: Rows | None,
                   out_dir: Path, slicer: "Slicer", evaluate: Callable[[str, RankerModel], dict],
                   key: str, title: str) -> tuple[str, RankerModel, dict[str, dict], list]:
    """Fit every candidate mode (booster checkpoints ``out_dir/checkpoint-<mode>.json``), keep the
    one with the best ``key`` of ``evaluate(mode, model)`` (more result fields) and save it in
    ``out_dir`` (model, importance files, ``config.json``); returns its mode, the model, every
    candidate's results and its importance rows."""
    results: dict[str, dict] = {}
    models: dict[str, RankerModel] = {}
    for m in candidates(cfg, collection):
        t0 = time.perf_counter()
        model = fit_model(m, train, valid, cfg, collection, deadline=slicer.deadline(),
                          checkpoint=out_dir / f"checkpoint-{m}.json", key=fingerprint(cfg))
        results[m] = {"fit_s": round(time.perf_counter() - t0, 2),
                      "best_iteration": model.info.best_iteration,
                      "stopped_by_time_budget_at": model.info.extra.get("stopped_by_time_budget_at"),
                      "resumed_from_iteration": model.info.extra.get("resumed_from_iteration"),
                      **evaluate(m, model)}
        models[m] = model
    chosen = choose(results, key)
    model = models[chosen]
    model.info.extra["candidates"] = {m: r[key] for m, r in results.items()}
    model.save(out_dir)
    importance = save_importance(model, out_dir, title=f"{title} ({chosen})")
    save_run_config(cfg, out_dir)
    return chosen, model, results, importance


def score_common(collection: Collection, costs: dict[str, np.ndarray],
                 truth: dict[str, np.ndarray]) -> float | None:
    """Official score over the graphs both ``costs`` and ``truth`` hold (None when none)."""
    common = {s: c for s, c in costs.items() if s in truth}
    if not common:
        return None
    return score_collection(collection, common, {s: truth[s] for s in common})["score"]


def summarise(collection: Collection, out: Path, costs: dict[str, np.ndarray],
              truth: dict[str, np.ndarray], reused: bool) -> dict:
    """Counts, whether reused and (where ``truth`` covers a graph) the score of a prediction file."""
    info: dict = {"graphs": len(costs), "configs": int(sum(len(c) for c in costs.values())),
                  "path": str(out), "reused": reused}
    score = score_common(collection, costs, truth)
    if score is not None:
        info["score"] = score
    return info


@dataclass
class Slicer:
    """Splits a collection's ``seconds`` evenly over ``fits`` consecutive fits (folds x modes)."""

    seconds: float
    fits: int
    start: float = field(default_factory=time.monotonic)
    done: int = 0

    def deadline(self) -> float:
        """Monotonic deadline of the next fit's boosting (inf when unlimited)."""
        if self.seconds == float("inf"):
            return float("inf")
        now = time.monotonic()
        left = max(0.0, self.start + self.seconds - now)
        slice_s = left / max(1, self.fits - self.done)
        self.done += 1
        return now + FIT_FRACTION * slice_s


def _stamp(path: str | os.PathLike) -> dict:
    """Size and modification time of a file (``{}`` when absent)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _entry(model_dir: Path, inputs: list[Path], out: Path, graphs: list[str] | None) -> dict:
    with open(model_dir / MODEL_FILE, "rb") as fh:
        model_sha = hashlib.file_digest(fh, "sha256").hexdigest()
    return {"model_sha256": model_sha,
            "inputs": {str(p): _stamp(p) for p in inputs},
            "graphs": None if graphs is None else sorted(graphs), "out": _stamp(out)}


def is_current(model_dir: Path, out: Path, inputs: list[Path],
               graphs: list[str] | None = None) -> bool:
    """True when ``out`` was written by ``model_dir``'s current model from unchanged ``inputs``."""
    if not out.is_file() or not (model_dir / MODEL_FILE).is_file():
        return False
    return _read_json(model_dir / LEDGER_FILE).get(str(out)) == _entry(model_dir, inputs, out, graphs)


def record(model_dir: Path, out: Path, costs: dict[str, np.ndarray], inputs: list[Path],
           graphs: list[str] | None = None) -> None:
    """Write ``costs`` to ``out`` (common format) and record it as made by ``model_dir``'s model."""
    write_predictions(out, costs)
    ledger = _read_json(model_dir / LEDGER_FILE)
    ledger[str(out)] = _entry(model_dir, inputs, out, graphs)
    write_json(model_dir / LEDGER_FILE, ledger)
