"""Committed artifacts (``results/*.json``, ``benchmarks/*.json``): where they are, how they are read,
the provenance each carries (git SHA, date, machine, command) and whether it is from this history."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from tpurank.config import git_sha

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT_DIRS = ("results", "benchmarks")
#: where a benchmark artifact may hold its table rows (the first present wins)
ROW_KEYS = ("rows", "cases", "results", "records", "runs")


class ArtifactError(ValueError):
    """An artifact that cannot be rendered; the message names the file and what is missing."""


# --- artifacts ---------------------------------------------------------------------------------

def artifact_path(name: str, root: Path = ROOT) -> Path | None:
    """``results/NAME.json`` or ``benchmarks/NAME.json`` (the first that exists), else None."""
    for folder in ARTIFACT_DIRS:
        path = root / folder / f"{name}.json"
        if path.is_file():
            return path
    return None


def load_artifact(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{path}: expected a JSON object at the top level")
    return data


REQUIRED = ("git_sha", "command")  # without these an artifact cannot be rendered at all
RECORDED = ("created", "machine")  # shown as "not recorded" when absent; tests/test_docs.py insists


def _meta_sources(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Where provenance may sit: the top level (or its ``meta``), else every row of the table."""
    top = {**data.get("meta", {}), **data} if isinstance(data.get("meta"), dict) else data
    if any(top.get(k) for k in REQUIRED):
        return [top]
    key = next((k for k in ROW_KEYS if isinstance(data.get(k), list)), None)
    rows = [r for r in data.get(key, []) if isinstance(r, dict)] if key else []
    return rows or [top]


def _field(sources: list[dict[str, Any]], name: str) -> list[str]:
    values: dict[str, None] = {}
    for src in sources:
        value = src.get(name) or (src.get("date") if name == "created" else None)
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        if value:
            values[str(value)] = None
    return list(values)


def artifact_shas(data: dict[str, Any]) -> list[str]:
    """Every git SHA an artifact's figures were measured at (one per run when rows carry their own)."""
    return _field(_meta_sources(data), "git_sha")


def provenance(data: dict[str, Any], path: Path) -> dict[str, str]:
    """git_sha, created, machine, command of an artifact: top level, under ``meta``, or per row."""
    sources = _meta_sources(data)
    found = {k: _field(sources, k) for k in REQUIRED + RECORDED}
    missing = [k for k in REQUIRED if not found[k]]
    if missing:
        raise ArtifactError(f"{path}: missing {', '.join(missing)} (every artifact carries git_sha, "
                            f"created, machine and command: benchmarks.render.artifacts.bench_metadata)")
    shown = {k: "; ".join(v) for k, v in found.items()}
    shown["git_sha"] = ", ".join(s[:12] for s in found["git_sha"])
    return {k: v or f"{'date' if k == 'created' else k} not recorded" for k, v in shown.items()}


def missing_provenance(data: dict[str, Any]) -> list[str]:
    """The provenance fields an artifact lacks (empty when it carries all four)."""
    sources = _meta_sources(data)
    return [k for k in REQUIRED + RECORDED if not _field(sources, k)]


def base_sha(sha: str) -> str:
    return sha.removesuffix("-dirty")


def is_ancestor(sha: str, root: Path = ROOT) -> bool:
    """Whether commit ``sha`` (``-dirty`` stripped) is an ancestor of (or is) HEAD."""
    out = subprocess.run(["git", "merge-base", "--is-ancestor", base_sha(sha), "HEAD"], cwd=root,
                         capture_output=True, text=True, timeout=30)
    return out.returncode == 0


def machine_description() -> str:
    """What a captured artifact records as its machine: OS, CPU, core count (and GPU when torch sees one)."""
    desc = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"
    cpu = platform.processor()
    if not cpu and Path("/proc/cpuinfo").is_file():
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")]
        cpu = names[0] if names else ""
    return f"{desc} ({cpu})" if cpu else desc


def bench_metadata(command: str) -> dict[str, str]:
    """The provenance every benchmark artifact carries: ``{**bench_metadata(cmd), "rows": [...]}``."""
    return {"git_sha": git_sha(), "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine_description(), "command": command}
