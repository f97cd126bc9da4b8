"""Artifacts from run reports: ``results/<name>.json`` from ``ensemble report`` (one run or one per seed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tpurank.atomic import write_json
from tpurank.config import git_sha
from benchmarks.render.artifacts import ArtifactError, machine_description


def capture(report: Path, command: str, out: Path) -> Path:
    """``results/<name>.json`` from the ``report.json`` of ``python -m ensemble report``.

    The git SHA is the one the blend recorded (``blend.json`` beside the report), so the numbers
    are attributed to the code that produced them, not to the commit they are captured at.
    """
    write_json(out, captured(report, command))
    return out


def captured(report: Path, command: str) -> dict[str, Any]:
    """The artifact :func:`capture` writes: the report's tables with provenance and the run's
    ``seed``, both from the blend metadata beside the report."""
    data = json.loads(report.read_text())
    blend = report.parent / "blend.json"
    meta = json.loads(blend.read_text()).get("metadata", {}) if blend.is_file() else {}
    sha = meta.get("git_sha", "")
    return {
        "git_sha": sha or git_sha(),
        "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(report.stat().st_mtime)),
        "machine": machine_description(),
        "command": command,
        "run_id": data.get("run_id"),
        "valid": data["valid"],
        "valid_protocol": data.get("valid_protocol", {}),
        "hidden_test": data.get("hidden_test", {}),
        "oof": data.get("oof", {}),
        "seed": meta.get("seed", meta.get("config", {}).get("seed")),
    }


def newest_report(path: Path) -> Path:
    """``path`` itself when a file, else the newest ``*/report.json`` under the folder (the
    ``ensemble report`` run folders beside a submission)."""
    if path.is_file():
        return path
    found = sorted(path.glob("*/report.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ArtifactError(f"{path}: no <run>/report.json (run `make run SUBMISSION={path}/submission.csv`)")
    return found[-1]


def capture_seeds(reports: list[Path], command: str, out: Path) -> Path:
    """``results/<name>.json`` from one ``ensemble report`` per seed (report files or the folders
    that hold them); the seed is read from each run's blend metadata."""
    runs = [captured(newest_report(path), command) for path in reports]
    shas = sorted({r["git_sha"] for r in runs})
    write_json(out, {"git_sha": shas[0] if len(shas) == 1 else ", ".join(shas),
                     "created": max(r["created"] for r in runs), "machine": machine_description(),
                     "command": command, "seeds": runs})
    return out


def capture_real(real_eval: Path, command: str, out: Path) -> Path:
    """``results/real.json`` from the ``real_eval.json`` of ``python -m ensemble real``; the git
    SHA is the one the evaluation recorded (the code that scored)."""
    data = json.loads(real_eval.read_text())
    meta = data.get("metadata", {})
    write_json(out, {"git_sha": meta.get("git_sha") or git_sha(),
                     "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(real_eval.stat().st_mtime)),
                     "machine": machine_description(), "command": command,
                     **{k: data[k] for k in ("tile_kernels", "layout_configs", "results")}})
    return out

