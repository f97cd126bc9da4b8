"""What a LightGBM training run keeps between invocations and shares between the plain and the
fold protocol: completion markers (``done.json``, written last), temporaries of a killed run, the
candidate modes and the saved model files. Both :mod:`models.lgbm.train` and
:mod:`models.lgbm.folds` import it, so neither imports the other at module level.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from tpurank.atomic import write_json
from tpurank.collections import Collection
from tpurank.config import save_run_config
from models.lgbm.config import LgbmConfig
from models.lgbm.importance import save_importance
from models.lgbm.model import RankerModel

DONE_FILE = "done.json"
# settings that do not change a trained model: a finished collection is kept whatever they are
# (where the run's folders are is one of them: trained weights copied to another WORK, e.g. the
# Kaggle inference notebook's, stay finished there)
RUNTIME_FIELDS = ("threads", "collections", "collection", "predict_batch_rows", "time_budget",
                  "data", "preset", "checkpoint_every", "work", "features")


def fingerprint(cfg: LgbmConfig) -> str:
    """Hash of the settings that define the trained models (not :data:`RUNTIME_FIELDS`)."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_done(out_dir: Path, cfg: LgbmConfig) -> dict | None:
    """The metrics of a finished run in ``out_dir`` with the same settings, else None."""
    path = out_dir / DONE_FILE
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
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


def save_model(model: RankerModel, out_dir: Path, cfg: LgbmConfig, title: str) -> list:
    """Model text + meta, importance files and ``config.json``; returns the importance rows."""
    model.save(out_dir)
    importance = save_importance(model, out_dir, title=title)
    save_run_config(cfg, out_dir)
    return importance
