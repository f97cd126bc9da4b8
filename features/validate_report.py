"""The JSON report of ``features validate``: per-file results, the summary table, bad-file lists.

Kept apart from the checks so that a reader of a report (``features.build``) imports only this
module, which depends on nothing of the feature stage.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from tpurank.atomic import write_json
from tpurank.collections import COLLECTIONS, SPLITS

DEFAULT_REPORT = Path("work") / "validate_report.json"


@dataclass
class FileReport:
    """Validation result of one file with the sizes used for the summary table."""

    path: str
    collection: str
    split: str
    stem: str
    problems: list[str] = field(default_factory=list)
    nodes: int = 0
    configs: int = 0
    repairs: list[str] = field(default_factory=list)  # a test file's documented repairs (features.repair)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def repaired(self) -> bool:
        """A test file whose every problem has a repair: it is ranked, not skipped."""
        return bool(self.problems) and bool(self.repairs)

    @property
    def bad(self) -> bool:
        """Skipped by the later stages: a problem without repair, or any problem outside test."""
        return bool(self.problems) and not self.repairs


def summary_rows(reports: Iterable[FileReport]) -> list[dict[str, object]]:
    """One row per (collection, split): files, ok, repaired, bad, nodes, configs."""
    rows: dict[tuple[str, str], dict[str, object]] = defaultdict(
        lambda: {"files": 0, "ok": 0, "repaired": 0, "bad": 0, "nodes": 0, "configs": 0})
    for r in reports:
        row = rows[(r.collection, r.split)]
        row["files"] += 1
        row["ok" if r.ok else "repaired" if r.repaired else "bad"] += 1
        row["nodes"] += r.nodes
        row["configs"] += r.configs
    split_order = {s: i for i, s in enumerate(SPLITS)}
    coll_order = {c.name: i for i, c in enumerate(COLLECTIONS)}
    ordered = sorted(rows.items(), key=lambda kv: (coll_order.get(kv[0][0], 9), kv[0][0],
                                                   split_order.get(kv[0][1], 9)))
    return [{"collection": c, "split": s, **v} for (c, s), v in ordered]


def format_summary(rows: list[dict[str, object]]) -> str:
    head = f"{'collection':20s} {'split':6s} {'files':>6s} {'ok':>6s} {'repaired':>8s} {'bad':>5s} " \
           f"{'nodes':>11s} {'configs':>11s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['collection']:20s} {r['split']:6s} {r['files']:6d} {r['ok']:6d} "
                     f"{r['repaired']:8d} {r['bad']:5d} {r['nodes']:11,d} {r['configs']:11,d}")
    return "\n".join(lines)


def write_report(path: str | os.PathLike, root: str | os.PathLike,
                 reports: list[FileReport], skip_bad: bool) -> None:
    """The JSON report read back by :func:`load_bad_files` (and by ``features build``): bad files
    (skipped later) and repaired test files (ranked, with their repairs) listed apart."""
    bad = [r for r in reports if r.bad]
    repaired = [r for r in reports if r.repaired]
    write_json(path, {
        "root": str(Path(root).resolve()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "skip_bad": skip_bad,
        "n_files": len(reports),
        "n_bad": len(bad),
        "n_repaired": len(repaired),
        "summary": summary_rows(reports),
        "bad_files": [{"path": r.path, "collection": r.collection, "split": r.split,
                       "stem": r.stem, "problems": list(r.problems)} for r in bad],
        "repaired_files": [{"path": r.path, "collection": r.collection, "split": r.split,
                            "stem": r.stem, "problems": list(r.problems), "repairs": r.repairs}
                           for r in repaired],
    })


def load_bad_files(report_path: str | os.PathLike) -> set[str]:
    """Resolved paths (``str(Path(p).resolve())``) of the bad files listed in a report.

    A missing report means nothing was found bad: returns an empty set.
    """
    report_path = Path(report_path)
    if not report_path.is_file():
        return set()
    data = json.loads(report_path.read_text())
    return {str(Path(entry["path"]).resolve()) for entry in data.get("bad_files", [])}
