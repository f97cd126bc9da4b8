"""``python -m benchmarks.render render|capture|capture-seeds`` (``make docs``, ``make results``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import benchmarks.render as package
from benchmarks.render.artifacts import ROOT, ArtifactError
from benchmarks.render.capture import capture, capture_real, capture_seeds
from benchmarks.render.render import render, stale_sections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.render", description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    r = sub.add_parser("render", help="rewrite the marked sections of README.md and docs/*.md")
    r.add_argument("--check", action="store_true", help="only list stale sections; exit 1 if any")
    c = sub.add_parser("capture", help="results/NAME.json from an ensemble report.json")
    c.add_argument("report", help="submissions/<run>/report.json of `python -m ensemble report`")
    c.add_argument("--command", required=True, help="the command that made the run, e.g. 'make run'")
    c.add_argument("--out", default=str(ROOT / "results" / "run.json"), help="artifact written")
    cs = sub.add_parser("capture-seeds", help="results/NAME.json from one ensemble report per seed")
    cs.add_argument("reports", nargs="+", help="report.json files, or the submission folders holding <run>/report.json")
    cs.add_argument("--command", required=True, help="the command that made the runs, e.g. 'make results'")
    cs.add_argument("--out", default=str(ROOT / "results" / "seeds.json"), help="artifact written")
    cr = sub.add_parser("capture-real", help="results/real.json from the real_eval.json of ensemble real")
    cr.add_argument("real_eval", help="WORK/reports/real/real_eval.json of `python -m ensemble real`")
    cr.add_argument("--command", required=True, help="the commands that trained and scored, e.g. 'make run'")
    cr.add_argument("--out", default=str(ROOT / "results" / "real.json"), help="artifact written")
    args = parser.parse_args(argv)
    if args.action == "capture-real":
        print(capture_real(Path(args.real_eval), args.command, Path(args.out)))
        return 0
    if args.action == "capture-seeds":
        print(capture_seeds([Path(p) for p in args.reports], args.command, Path(args.out)))
        return 0
    if args.action == "capture":
        print(capture(Path(args.report), args.command, Path(args.out)))
        return 0
    try:
        if args.check:
            stale = stale_sections()
            for s in stale:
                print(f"stale: {s}", file=sys.stderr)
            return 1 if stale else 0
        changed, errors = render()
        for path in changed:
            print(f"rewrote {path.relative_to(ROOT)}")
        for error in errors:
            print(f"python -m benchmarks.render: section left as it was: {error}", file=sys.stderr)
        return 1 if errors else 0
    except ArtifactError as exc:
        print(f"python -m benchmarks.render: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
