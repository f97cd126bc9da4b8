"""Which prediction files a model has already written: predict each (model, split) once.

``<model_dir>/predictions.json`` records, for each written prediction file, the SHA-256 of the
model text, the size and mtime of the tabular input and of the written file. A later request
for the same output is skipped when all of them still match (``train`` scores the valid split
and writes it; ``predict`` then reuses it instead of predicting it again). The record is written
after the predictions file, both atomically: a kill in between only costs a re-prediction.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json
from models.predictions import write_predictions

LEDGER_FILE = "predictions.json"


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stamp(path: str | os.PathLike) -> dict:
    """Size and modification time of a file (``{}`` when absent)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _read(model_dir: Path) -> dict:
    path = model_dir / LEDGER_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}  # unreadable ledger: predict again, never trust it


def _entry(model_sha: str, inputs: list[Path], out: Path, graphs: list[str] | None) -> dict:
    return {"model_sha256": model_sha, "inputs": {str(p): stamp(p) for p in inputs},
            "graphs": None if graphs is None else sorted(graphs), "out": stamp(out)}


def is_current(model_dir: str | os.PathLike, out: str | os.PathLike, inputs: list[Path],
               graphs: list[str] | None = None) -> bool:
    """True when ``out`` was written by the current model from unchanged ``inputs``."""
    model_dir, out = Path(model_dir), Path(out)
    model_file = model_dir / "model.txt"
    if not out.is_file() or not model_file.is_file():
        return False
    recorded = _read(model_dir).get(str(out))
    return recorded == _entry(file_sha256(model_file), inputs, out, graphs)


def record(model_dir: str | os.PathLike, out: str | os.PathLike, costs: dict[str, np.ndarray],
           inputs: list[Path], graphs: list[str] | None = None) -> None:
    """Write ``costs`` to ``out`` (common format) and record it as made by ``model_dir``'s model."""
    model_dir, out = Path(model_dir), Path(out)
    write_predictions(out, costs)
    ledger = _read(model_dir)
    ledger[str(out)] = _entry(file_sha256(model_dir / "model.txt"), inputs, out, graphs)
    write_json(model_dir / LEDGER_FILE, ledger)
