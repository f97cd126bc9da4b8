"""Validate every npz file under a data root, in parallel; the ``python -m features validate`` CLI."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

from tqdm import tqdm

from tpurank.collections import parse_collections
from features.io import BadGraphError, discover, npz_headers
import features.validate as checks
from features.repair import REPAIRED_SPLIT
from features.validate import repairs_of, validate_file
from features.validate_report import (DEFAULT_REPORT, FileReport, format_summary, summary_rows,
                                      write_report)


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
    bar = tqdm(total=len(tasks), desc="validate", unit="file", disable=not progress,
               file=sys.stderr)
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            reports = []
            for report in pool.map(_validate_one, tasks, chunksize=4):
                reports.append(report)
                bar.update()
    else:
        reports = []
        for task in tasks:
            reports.append(_validate_one(task))
            bar.update()
    bar.close()
    return reports


def main(argv: list[str] | None = None) -> int:
    """CLI: exit 1 listing bad files, or 0 with ``--skip-bad`` (bad files go to the report).
    Repaired test files (features.repair) are listed with their repairs and are not bad."""
    parser = argparse.ArgumentParser(prog="python -m features validate", description=checks.__doc__,
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
