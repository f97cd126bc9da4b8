"""Validate TpuGraphs npz files (``python -m features validate``; what is checked: docs/data.md,
"Validation"): :func:`validate_file` returns the problems of a file, :func:`check_file` raises
:class:`BadGraphError`. ``node_config_feat`` is checked in bounded chunks, never loaded whole.

A problem with a documented repair (:mod:`features.repair`) is a :class:`Problem` whose ``repair``
names it: a *test* file with only such problems stays usable (every test graph must be ranked).
Also here: the walk over a data root, its JSON report (:func:`load_bad_files` reads it back for
``features build --skip-bad-report``) and the CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Container, Iterable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from tpurank.atomic import write_json
from tpurank.collections import COLLECTIONS, SPLITS, parse_collections
from features.io import (LAYOUT_CONFIG_DIM, LAYOUT_KEYS, NODE_FEAT_DIM, TILE_CONFIG_DIM, TILE_KEYS,
                         BadGraphError, discover, iter_npz_chunks, npz_headers, open_npz,
                         read_npz_member)
from features.repair import (NO_CONFIGURABLE_NODE, NON_FINITE, REPAIRED_SPLIT, UNKNOWN_OPCODE,
                             known_opcode_ids)

DEFAULT_REPORT = Path("work") / "validate_report.json"

LAYOUT_VALUE_MIN, LAYOUT_VALUE_MAX = -1, 5
INT_KEYS = ("node_opcode", "edge_index", "node_config_ids", "node_splits")
RUNTIME_KEYS = ("config_runtime", "config_runtime_normalizers")
FEATURE_KEYS = ("node_feat", "config_feat", "node_config_feat")
MAX_LISTED = 5  # offending values/rows quoted in a message
#: streamed chunk size: a check makes ~3 temporaries of a chunk, so peak RSS stays ~100 MB
CHUNK_BYTES = 8 << 20


class Problem(str):
    """One problem sentence; ``repair`` is its documented fallback (:mod:`features.repair`) when a
    test file may have it and still be ranked, else empty."""

    repair: str

    def __new__(cls, text: str, repair: str = "") -> "Problem":
        obj = super().__new__(cls, text)
        obj.repair = repair
        return obj


def repairs_of(problems: Iterable[str]) -> list[str] | None:
    """The repairs that make a file with ``problems`` usable as a test file, or None when one of
    them has no repair (or there is no problem)."""
    repairs = [getattr(p, "repair", "") for p in problems]
    return sorted(set(repairs)) if repairs and all(repairs) else None


# ---- individual checks, each returning a list of problem sentences ------------------------------
def _kind_from_path(path: Path) -> str | None:
    """``tile``/``layout`` from the Kaggle directory layout, None outside it."""
    parts = path.parts
    if len(parts) >= 4 and parts[-4] == "tile" and parts[-2] in SPLITS:
        return "tile"
    if len(parts) >= 5 and parts[-5] == "layout" and parts[-2] in SPLITS:
        return "layout"
    return None


def _kind_from_keys(keys: Container[str]) -> str | None:
    if "node_config_feat" in keys or "node_config_ids" in keys:
        return "layout"
    if "config_feat" in keys:
        return "tile"
    return None


def _check_dtypes(specs: dict[str, tuple[tuple[int, ...], np.dtype]]) -> list[str]:
    problems = []
    for key, (_, dtype) in specs.items():
        if key in INT_KEYS and dtype.kind not in "iu":
            problems.append(f"{key} has dtype {dtype}; expected an integer type")
        elif key in RUNTIME_KEYS and dtype.kind not in "iuf":
            problems.append(f"{key} has dtype {dtype}; expected integer (or float) runtimes")
        elif key in FEATURE_KEYS and dtype.kind not in "iuf":
            problems.append(f"{key} has dtype {dtype}; expected a float type")
    return problems


def _shape_problem(key: str, shape: tuple[int, ...], expected: tuple[int | str, ...]) -> str | None:
    ok = len(shape) == len(expected) and all(
        isinstance(e, str) or s == e for s, e in zip(shape, expected))
    if ok:
        return None
    want = "(" + ", ".join(str(e) for e in expected) + (",)" if len(expected) == 1 else ")")
    return f"{key} has shape {shape}; expected {want}"


def _check_shapes(specs: dict[str, tuple[tuple[int, ...], np.dtype]], kind: str) -> list[str]:
    """Shape consistency between arrays; stops early when the node count is unknown."""
    shape = {k: s for k, (s, _) in specs.items()}
    nf = shape["node_feat"]
    if len(nf) != 2 or nf[1] != NODE_FEAT_DIM:
        return [f"node_feat has shape {nf}; expected (n, {NODE_FEAT_DIM})"]
    n = nf[0]
    problems = [] if n > 0 else ["node_feat has 0 rows: the graph has no nodes"]
    c = shape["config_runtime"][0] if len(shape["config_runtime"]) == 1 else None
    expected: dict[str, tuple[int | str, ...]] = {
        "node_opcode": (n,), "edge_index": ("m", 2), "config_runtime": ("c",)}
    if kind == "tile":
        expected.update(config_feat=(c, TILE_CONFIG_DIM), config_runtime_normalizers=(c,))
    else:
        nc = shape["node_config_ids"][0] if len(shape["node_config_ids"]) == 1 else None
        expected.update(node_config_ids=("nc",), node_config_feat=(c, nc, LAYOUT_CONFIG_DIM))
    problems += [p for key, exp in expected.items() if (p := _shape_problem(key, shape[key], exp))]
    if "node_splits" in shape:
        ns = shape["node_splits"]
        if not (len(ns) == 1 or (len(ns) == 2 and ns[0] == 1)):
            problems.append(f"node_splits has shape {ns}; expected (k,) or (1, k)")
    if c == 0:
        problems.append("empty config set: config_runtime has 0 entries (c == 0)")
    if kind == "layout" and shape["node_config_ids"] == (0,):
        problems.append(Problem("node_config_ids is empty: the graph has no configurable nodes",
                                NO_CONFIGURABLE_NODE))
    return problems


def _listed(values: np.ndarray) -> str:
    shown = ", ".join(str(v) for v in values[:MAX_LISTED].tolist())
    return f"[{shown}{', ...' if len(values) > MAX_LISTED else ''}]"


def _check_finite(key: str, a: np.ndarray, repair: str = "") -> list[str]:
    if a.dtype.kind != "f":
        return []
    bad = ~np.isfinite(a)
    if not bad.any():
        return []
    n_nan, n_inf = int(np.isnan(a).sum()), int(bad.sum() - np.isnan(a).sum())
    return [Problem(f"{key} has {n_nan} NaN and {n_inf} infinite values", repair)]


def _check_nodes(node_feat: np.ndarray, opcode: np.ndarray) -> list[str]:
    problems = _check_finite("node_feat", node_feat, NON_FINITE)
    unknown = np.setdiff1d(np.unique(opcode), known_opcode_ids())
    if unknown.size:
        problems.append(Problem(f"node_opcode has {unknown.size} unknown opcode ids (not in "
                                f"hlo_opcodes.tsv): {_listed(unknown)}", UNKNOWN_OPCODE))
    return problems


def _check_edges(edges: np.ndarray, n: int) -> list[str]:
    if edges.size == 0:
        return []
    edges = edges.astype(np.int64, copy=False)
    out_of_range = ((edges < 0) | (edges >= n)).any(axis=1)
    if out_of_range.any():
        rows = np.flatnonzero(out_of_range)
        return [f"edge_index has {rows.size} edges with an endpoint outside [0, {n}) "
                f"(first: row {rows[0]} = {edges[rows[0]].tolist()})"]
    backward = edges[:, 1] >= edges[:, 0]
    if backward.any():
        rows = np.flatnonzero(backward)
        return [f"edge_index has {rows.size} edges that break topological order (edge [u, v] "
                f"means u consumes v and needs v < u; first: row {rows[0]} = "
                f"{edges[rows[0]].tolist()})"]
    return []


def _check_node_splits(splits: np.ndarray, n: int) -> list[str]:
    splits = splits.reshape(-1).astype(np.int64, copy=False)
    if splits.size == 0:
        return []
    if splits.min() < 0 or splits.max() > n:
        return [f"node_splits has values outside [0, {n}]: {_listed(splits)}"]
    if (np.diff(splits) < 0).any():
        return [f"node_splits is not non-decreasing: {_listed(splits)}"]
    return []


def _check_runtimes(key: str, rt: np.ndarray, split: str | None) -> list[str]:
    problems = _check_finite(key, rt)
    if problems or rt.size == 0:
        return problems
    strict = split in ("train", "valid")
    bad = (rt <= 0) if strict else (rt < 0)
    if bad.any():
        rule = "> 0 in train/valid files" if strict else ">= 0"
        problems.append(f"{key} has {int(bad.sum())} values that are not {rule} "
                        f"(min {rt.min()})")
    return problems


def _check_layout_configs(ids: np.ndarray, configs: Iterable[np.ndarray], n: int) -> list[str]:
    problems = []
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = ids[(ids < 0) | (ids >= n)]
        problems.append(f"node_config_ids has {bad.size} ids outside [0, {n}): {_listed(bad)}")
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        problems.append(f"node_config_ids has duplicate ids: {_listed(uniq[counts > 1])}")
    problems.extend(_check_layout_values(configs))
    return problems


def _check_layout_values(chunks: Iterable[np.ndarray]) -> list[str]:
    """Finite, integer-valued, within −1..5 — one streamed pass, O(chunk) memory."""
    n_nonfinite = n_fraction = 0
    lo, hi = np.inf, -np.inf
    for chunk in chunks:
        if chunk.dtype.kind == "f":
            finite = np.isfinite(chunk)
            if not finite.all():
                n_nonfinite += int(chunk.size - finite.sum())
                chunk = chunk[finite]
            n_fraction += int(np.count_nonzero(chunk != np.round(chunk)))
        if chunk.size:
            lo, hi = min(lo, float(chunk.min())), max(hi, float(chunk.max()))
    problems = []
    if n_nonfinite:
        problems.append(f"node_config_feat has {n_nonfinite} NaN or infinite values")
    if lo < LAYOUT_VALUE_MIN or hi > LAYOUT_VALUE_MAX:
        problems.append(f"node_config_feat has layout values outside {LAYOUT_VALUE_MIN}..."
                        f"{LAYOUT_VALUE_MAX} (min {lo:g}, max {hi:g})")
    if n_fraction:
        problems.append(f"node_config_feat has {n_fraction} non-integer layout values")
    return problems


def _check_source(specs: dict[str, tuple[tuple[int, ...], np.dtype]], load: Callable[[str], np.ndarray],
                  chunks: Callable[[str], Iterator[np.ndarray]], kind: str, split: str | None) -> list[str]:
    """The checks of one file whose arrays have ``specs`` (shape, dtype): ``load`` reads a small
    array, ``chunks`` streams a big one."""
    required = TILE_KEYS if kind == "tile" else LAYOUT_KEYS
    missing = [k for k in required if k not in specs]
    if missing:
        need = ", ".join(required)
        return [f"missing required key{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(k) for k in missing)} ({kind} files need: {need})"]
    problems = _check_dtypes(specs) + _check_shapes(specs, kind)
    if problems:  # value checks assume consistent shapes and dtypes
        return problems
    n = specs["node_feat"][0][0]
    problems += _check_nodes(load("node_feat"), load("node_opcode"))
    problems += _check_edges(load("edge_index"), n)
    if "node_splits" in specs:
        problems += _check_node_splits(load("node_splits"), n)
    problems += _check_runtimes("config_runtime", load("config_runtime"), split)
    if kind == "tile":
        problems += _check_finite("config_feat", load("config_feat"))
        problems += _check_runtimes("config_runtime_normalizers", load("config_runtime_normalizers"), split)
    else:
        problems += _check_layout_configs(load("node_config_ids"), chunks("node_config_feat"), n)
    return problems


# ---- public API ---------------------------------------------------------------------------------
def validate_file(path: str | os.PathLike) -> list[str]:
    """Problems of one npz file (empty list = valid). Never loads ``node_config_feat`` whole."""
    path = Path(path)
    try:
        with open_npz(path) as zf:
            headers = npz_headers(path, zf)
            kind = _kind_from_path(path) or _kind_from_keys(headers)
            if kind is None:
                return ["cannot tell tile from layout: neither config_feat nor node_config_feat "
                        "is present and the file is not in a tile/ or layout/ directory"]
            return _check_source({k: (h.shape, h.dtype) for k, h in headers.items()},
                                 lambda key: read_npz_member(path, key, zf=zf),
                                 lambda key: iter_npz_chunks(path, key, CHUNK_BYTES, zf=zf),
                                 kind, path.parent.name if path.parent.name in SPLITS else None)
    except BadGraphError as exc:
        return [exc.problem]


def check_file(path: str | os.PathLike) -> None:
    """Raise :class:`BadGraphError` (``"<path>: <problem>; <problem>"``) for a bad file."""
    problems = validate_file(path)
    if problems:
        raise BadGraphError(path, "; ".join(problems))


# ---- a data root: the walk, the JSON report, the CLI --------------------------------------------
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
        row["bad" if r.bad else "repaired" if r.repaired else "ok"] += 1
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
    """The JSON report read back by :func:`load_bad_files`: bad files (skipped later) and
    repaired test files (ranked, with their repairs) listed apart."""
    bad = [r for r in reports if r.bad]
    repaired = [r for r in reports if r.repaired]

    def entry(r: FileReport, **extra: object) -> dict[str, object]:
        return {"path": r.path, "collection": r.collection, "split": r.split, "stem": r.stem,
                "problems": list(r.problems), **extra}

    write_json(path, {
        "root": str(Path(root).resolve()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "skip_bad": skip_bad,
        "n_files": len(reports),
        "n_bad": len(bad),
        "n_repaired": len(repaired),
        "summary": summary_rows(reports),
        "bad_files": [entry(r) for r in bad],
        "repaired_files": [entry(r, repairs=r.repairs) for r in repaired],
    })


def load_bad_files(report_path: str | os.PathLike) -> set[str]:
    """Resolved paths (``str(Path(p).resolve())``) of the bad files listed in a report; a missing
    report means nothing was found bad (an empty set)."""
    report_path = Path(report_path)
    if not report_path.is_file():
        return set()
    data = json.loads(report_path.read_text())
    return {str(Path(entry["path"]).resolve()) for entry in data.get("bad_files", [])}


def _validate_one(args: tuple[str, str, str, str]) -> FileReport:
    path, collection, split, stem = args
    problems = validate_file(path)
    repairs = (repairs_of(problems) or []) if split == REPAIRED_SPLIT else []
    report = FileReport(path, collection, split, stem, [str(p) for p in problems], repairs=repairs)
    try:
        headers = npz_headers(path)
        report.nodes = headers["node_feat"].shape[0] if "node_feat" in headers else 0
        rt = headers.get("config_runtime")
        report.configs = rt.shape[0] if rt is not None and rt.shape else 0
    except BadGraphError:
        pass
    return report


def validate_root(root: str | os.PathLike, collections: str | Sequence[str] | None = "all",
                  jobs: int = 1, progress: bool = True) -> list[FileReport]:
    """Validate every npz file under ``root`` (Kaggle layout), in parallel with ``jobs`` > 1."""
    files = discover(root, parse_collections(collections))
    tasks = [(str(f.path.resolve()), f.collection.name, f.split, f.stem) for f in files]
    parallel = jobs > 1 and len(tasks) > 1
    with ProcessPoolExecutor(max_workers=jobs) if parallel else nullcontext() as pool:
        results = pool.map(_validate_one, tasks, chunksize=4) if parallel else map(_validate_one, tasks)
        return list(tqdm(results, total=len(tasks), desc="validate", unit="file",
                         disable=not progress, file=sys.stderr))


def main(argv: list[str] | None = None) -> int:
    """CLI: exit 1 listing bad files, or 0 with ``--skip-bad`` (bad files go to the report).
    Repaired test files (features.repair) are listed with their repairs and are not bad."""
    parser = argparse.ArgumentParser(prog="python -m features validate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="data root (contains npz_all/npz)")
    parser.add_argument("--collections", default="all", help="'all' or e.g. tile:xla,layout:nlp:random")
    parser.add_argument("--skip-bad", action="store_true",
                        help="record bad files in the report and exit 0")
    parser.add_argument("--report", default=str(DEFAULT_REPORT),
                        help=f"JSON report path (default: {DEFAULT_REPORT})")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)

    reports = validate_root(args.data, args.collections, jobs=args.jobs,
                            progress=not args.no_progress)
    if not reports:
        print(f"no npz files found under {args.data} (expected ROOT/npz_all/npz/...)",
              file=sys.stderr)
        return 1
    print(format_summary(summary_rows(reports)))
    write_report(args.report, args.data, reports, args.skip_bad)
    bad = [r for r in reports if r.bad]
    for r in bad:
        for problem in r.problems:
            print(f"BAD {r.path}: {problem}", file=sys.stderr)
    repaired = [r for r in reports if r.repaired]
    for r in repaired:
        print(f"REPAIRED {r.path}: {'; '.join(r.problems)} -> {'; '.join(r.repairs)}", file=sys.stderr)
    print(f"{len(reports)} files, {len(bad)} bad, {len(repaired)} test files repaired; report: {args.report}")
    if bad and not args.skip_bad:
        print("bad files found (rerun with --skip-bad to record them and go on)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
