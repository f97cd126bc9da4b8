"""Learning curves of finished runs: each trained model's held-out score against its training
seconds (the report's "Learning curves", :func:`ensemble.report.learning_curves`), summarised per
collection over the runs given, with one figure per run.

    python -m benchmarks.learning_curves --work small-s0=work/bench-after/tpu-s0-quick \\
        [--work small-s1=...] [--out benchmarks/learning_curves.json]

Runs nothing: it reads the fold models' reports under each WORK. Writes the artifact and
``benchmarks/learning_curves_<label>.png`` beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.render.artifacts import bench_metadata
from ensemble.report import curve_summary, learning_curves, learning_curves_figure

COLUMNS = ["collection", "models", "evaluations", "seconds", "first", "last", "last quarter", "climbing"]


def curves_of(label: str, work: Path, out_dir: Path) -> dict[str, list[dict]]:
    """The run's learning curves; its figure written beside the artifact."""
    curves = learning_curves(work)
    if not curves:
        raise SystemExit(f"{work}: no trained model with a training history under models/")
    learning_curves_figure(curves).savefig(out_dir / f"learning_curves_{label}.png", dpi=80,
                                           bbox_inches="tight")
    return curves


def rows_of(curves: dict[str, list[dict]]) -> list[dict]:
    return [{"collection": coll, "models": s["models"], "evaluations": s["evaluations"],
             "seconds": s["seconds"], "first": s["first"], "last": s["last"],
             "last quarter": s["late_gain"], "climbing": f"{s['climbing']}/{s['models']}"}
            for coll, s in sorted(curve_summary(curves).items())]


def run_sha(work: Path) -> str:
    """The commit a finished run's blend recorded, else (models trained, no blend yet) its first
    model's ``config.json``."""
    summary = work / "blend" / "summary.json"
    if summary.is_file():
        return json.loads(summary.read_text())["metadata"]["git_sha"]
    configs = sorted((work / "models").rglob("config.json"))
    if not configs:
        raise SystemExit(f"{work}: no blend summary and no trained model's config.json")
    return json.loads(configs[0].read_text())["git_sha"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", action="append", required=True, metavar="LABEL=WORK",
                   help="a finished run's work folder (repeatable)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/learning_curves.json"))
    args = p.parse_args(argv)
    pooled: dict[str, list[dict]] = {}
    for label, work in (w.split("=", 1) for w in args.work):
        for coll, cs in curves_of(label, Path(work), args.out.parent).items():
            pooled.setdefault(coll, []).extend(cs)
    rows = rows_of(pooled)
    notes = ("Held-out score: the graphs a fold model watches (the quick preset's: held-out ones; before it, an inner slice of its train graphs), scored every "
             "`--eval-every` steps; seconds: its training time. first/last: the mean of the models' first "
             "and last scores; last quarter: the mean of the last score minus the best before 75 % of "
             "the time; climbing: models whose last score beat all their earlier ones. Figures: "
             + ", ".join(f"`benchmarks/learning_curves_{w.split('=', 1)[0]}.png`" for w in args.work) + ".")
    meta = bench_metadata("python -m benchmarks.learning_curves " + " ".join(argv or sys.argv[1:]))
    shas = sorted({run_sha(Path(w.split("=", 1)[1])) for w in args.work})
    meta["git_sha"] = ", ".join(shas)  # the code the runs trained with, not the collector's
    args.out.write_text(json.dumps({**meta, "notes": notes, "tables": {
        "Learning curves per collection, the runs pooled": {"columns": COLUMNS, "rows": rows}}}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
