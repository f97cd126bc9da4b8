"""Submission CSV: writer and strict checker (docs/competition.md §6): header ``ID,TopConfigs``,
one row per test graph, config indices joined by ``;``, fastest first (tile: the 5 best, layout:
every config). ``python -m ensemble check FILE --data ROOT`` rejects anything the Kaggle scorer
would reject or mis-score, naming the line, the ID and why."""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from tpurank.atomic import write_text
from tpurank.collections import COLLECTIONS, Collection
from features.io import discover
from models.metrics import TILE_TOP_K
from models.predictions import ranking

from ensemble.truth import config_count

HEADER = ("ID", "TopConfigs")
MAX_SHOWN = 20
_INT_TOKEN = re.compile(r"\d+")


@dataclass(frozen=True)
class Expected:
    """One expected submission row: its collection and the graph's number of configs."""

    collection: Collection
    num_configs: int

    @property
    def row_length(self) -> int:
        return min(TILE_TOP_K, self.num_configs) if self.collection.is_tile else self.num_configs


def collection_of(sub_id: str) -> Collection | None:
    """The collection an ID belongs to (``layout:nlp:random:<stem>`` -> layout:nlp:random)."""
    for coll in sorted(COLLECTIONS, key=lambda c: -len(c.name)):
        if sub_id.startswith(coll.name + ":") and len(sub_id) > len(coll.name) + 1:
            return coll
    return None


def expected_rows(root: str | os.PathLike) -> dict[str, Expected]:
    """``{ID: Expected}`` for every test graph under ``root``."""
    return {gf.id: Expected(gf.collection, config_count(gf.path))
            for gf in discover(root, splits=("test",))}


def submission_rows(collection: Collection, costs: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    """Rows for one collection from per-graph costs (lower = faster)."""
    rows = {}
    for stem, cost in costs.items():
        order = ranking(cost)
        rows[collection.submission_id(stem)] = [int(i) for i in
                                                (order[:TILE_TOP_K] if collection.is_tile else order)]
    return rows


def format_submission(rows: Mapping[str, list[int]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for sub_id in sorted(rows, key=_row_sort_key):
        writer.writerow([sub_id, ";".join(str(i) for i in rows[sub_id])])
    return out.getvalue()


def _row_sort_key(sub_id: str) -> tuple[int, str]:
    coll = collection_of(sub_id)
    return (COLLECTIONS.index(coll) if coll else len(COLLECTIONS), sub_id)


def write_submission(path: str | os.PathLike, rows: Mapping[str, list[int]]) -> Path:
    """Atomically write the CSV (rows ordered by collection, then ID)."""
    write_text(path, format_submission(rows))
    return Path(path)


def read_submission(path: str | os.PathLike) -> dict[str, list[int]]:
    """Parse a submission that passed :func:`check_rows` (raises ValueError otherwise)."""
    rows: dict[str, list[int]] = {}
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        if tuple(next(reader, ())) != HEADER:
            raise ValueError(f"{path}: header must be {','.join(HEADER)}")
        for line, row in enumerate(reader, start=2):
            if len(row) != 2 or not all(_INT_TOKEN.fullmatch(t) for t in row[1].split(";")):
                raise ValueError(f"{path}: line {line}: malformed row (run `python -m ensemble check`)")
            rows[row[0]] = [int(t) for t in row[1].split(";")]
    return rows


def _check_row(line: int, sub_id: str, text: str, exp: Expected) -> str | None:
    """Why one row is wrong, or None."""
    where = f"line {line} (ID {sub_id})"
    tokens = text.split(";")
    bad = [t for t in tokens if not _INT_TOKEN.fullmatch(t)]
    if bad:
        return f"{where}: non-integer token {bad[0]!r} in TopConfigs"
    idx = np.array([int(t) for t in tokens], dtype=np.int64)
    out = idx[idx >= exp.num_configs]
    if out.size:
        return f"{where}: index {int(out[0])} out of range (graph has {exp.num_configs} configs)"
    uniq, counts = np.unique(idx, return_counts=True)
    if (counts > 1).any():
        return f"{where}: index {int(uniq[counts > 1][0])} repeated within the row"
    if idx.size != exp.row_length:
        what = ("top configs" if exp.collection.is_tile
                else "indices (layout rows must be a full permutation)")
        return f"{where}: {idx.size} {what}, expected {exp.row_length}"
    return None


def check_text(text: str, expected: Mapping[str, Expected]) -> list[str]:
    """Every problem of a submission's text against the expected rows (empty list = valid)."""
    problems: list[str] = []
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip("\ufeff") for h in header) != HEADER:
        return [f"line 1: header must be exactly {','.join(HEADER)!r}, got {','.join(header or [])!r}"]
    seen: dict[str, int] = {}
    for line, row in enumerate(reader, start=2):
        if len(row) != 2:
            problems.append(f"line {line}: expected 2 fields (ID,TopConfigs), got {len(row)}")
            continue
        sub_id, top = row
        if sub_id in seen:
            problems.append(f"line {line} (ID {sub_id}): duplicate ID (first on line {seen[sub_id]})")
            continue
        seen[sub_id] = line
        if sub_id not in expected:
            why = ("no test graph with this ID under the data root" if collection_of(sub_id)
                   else "not a known collection prefix (tile:xla:, layout:<xla|nlp>:<default|random>:)")
            problems.append(f"line {line} (ID {sub_id}): unexpected ID: {why}")
            continue
        problem = _check_row(line, sub_id, top, expected[sub_id])
        if problem:
            problems.append(problem)
    missing = sorted(set(expected) - set(seen), key=_row_sort_key)
    problems.extend(f"missing ID {sub_id} (no row for this test graph)" for sub_id in missing)
    return problems


def check_file(path: str | os.PathLike, root: str | os.PathLike) -> list[str]:
    """All problems of submission ``path`` against the test graphs under ``root``."""
    path = Path(path)
    if not path.is_file():
        return [f"{path}: no such file"]
    try:
        expected = expected_rows(root)
    except ValueError as exc:  # features.io.BadGraphError: an unreadable test file
        return [f"cannot read the expected rows: {exc}"]
    if not expected:
        return [f"{root}: no test graphs found (expected npz_all/npz/<collection>/test/*.npz)"]
    return sample_submission_problems(root, expected) + check_text(path.read_text(), expected)


def sample_submission_problems(root: str | os.PathLike, expected: Mapping[str, Expected]) -> list[str]:
    """Where ``ROOT/sample_submission.csv`` (Kaggle) lists other IDs than the test files give."""
    sample = Path(root) / "sample_submission.csv"
    if not sample.is_file():
        return []
    with open(sample, newline="") as fh:
        ids = {row[0] for row in list(csv.reader(fh))[1:] if row}
    extra, missing = sorted(ids - set(expected)), sorted(set(expected) - ids)
    return ([f"{sample}: lists ID {i} that has no test file under {root}" for i in extra[:MAX_SHOWN]]
            + [f"{sample}: does not list test graph {i}" for i in missing[:MAX_SHOWN]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ensemble check",
                                     description="Strictly check a submission CSV against a data root.")
    parser.add_argument("submission", help="the CSV to check")
    parser.add_argument("--data", required=True, help="data root (Kaggle layout) holding the test files")
    args = parser.parse_args(argv)
    problems = check_file(args.submission, args.data)
    if problems:
        print(f"INVALID submission {args.submission}: {len(problems)} problem(s)", file=sys.stderr)
        for p in problems[:MAX_SHOWN]:
            print("  " + p, file=sys.stderr)
        if len(problems) > MAX_SHOWN:
            print(f"  ... and {len(problems) - MAX_SHOWN} more", file=sys.stderr)
        return 1
    n = sum(1 for _ in open(args.submission)) - 1
    print(f"OK {args.submission}: {n} rows, every test graph under {args.data} ranked correctly")
    return 0
