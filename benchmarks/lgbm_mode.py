"""LightGBM's objective per collection: lambdarank vs pairwise, out of fold, on both physics and
several seeds — the measurement behind ``--mode default`` (``models.lgbm.config.DEFAULT_MODE``).

    python -m benchmarks.lgbm_mode --data tpu=data/sample-small --data alt=data/sample-alt
        [--seeds 0,1] [--modes lambdarank,pairwise] [--time-budget 60] [--work-root work/lgbm-mode]

Per data set the quick preset's features are built once; then for every seed and mode
``models.lgbm train --preset quick --mode M --tag M`` (3 grouped folds, one thread) and its
out-of-fold score per collection (``metrics.json``). Writes ``benchmarks/lgbm_mode.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

from benchmarks.render.artifacts import bench_metadata


def run(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"python -m {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def oof_rows(label: str, data: str, work: Path, seed: int, mode: str, budget: float) -> list[dict]:
    common = ["--data", data, "--work", str(work), "--preset", "quick", "--seed", str(seed)]
    run(["models.lgbm", "train", *common, "--mode", mode, "--tag", mode, "--threads", "1",
         "--time-budget", str(budget)])
    rows = []
    for path in sorted((work / "models" / f"lgbm-{mode}").glob(f"*/seed{seed}/metrics.json")):
        m = json.loads(path.read_text())
        rows.append({"data": label, "collection": m["collection"], "mode": mode, "seed": seed,
                     "oof": m["oof_score"]})
        print(f"{label} seed {seed} {mode:10s} {m['collection']:20s} OOF {m['oof_score']:.4f}", flush=True)
    return rows


def summary(rows: list[dict], modes: list[str]) -> list[dict]:
    """Per data set and collection: each mode's mean OOF over seeds, and in how many seeds the
    first mode scored at least the second's."""
    out = []
    for key in sorted({(r["data"], r["collection"]) for r in rows}):
        by = {m: {r["seed"]: r["oof"] for r in rows if (r["data"], r["collection"]) == key and r["mode"] == m}
              for m in modes}
        seeds = sorted(set.intersection(*(set(v) for v in by.values())))
        row = {"data": key[0], "collection": key[1], **{m: mean(by[m][s] for s in seeds) for m in modes}}
        row[f"{modes[0]} >= {modes[1]}"] = f"{sum(by[modes[0]][s] >= by[modes[1]][s] for s in seeds)}/{len(seeds)}"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", required=True, metavar="LABEL=ROOT", help="a data set (repeatable)")
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    p.add_argument("--modes", default="lambdarank,pairwise", help="the two objectives compared")
    p.add_argument("--time-budget", type=float, default=60.0, help="LightGBM training seconds per run")
    p.add_argument("--work-root", type=Path, default=Path("work/lgbm-mode"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/lgbm_mode.json"))
    args = p.parse_args(argv)
    modes, seeds = args.modes.split(","), [int(s) for s in args.seeds.split(",")]
    rows: list[dict] = []
    for label, data in (d.split("=", 1) for d in args.data):
        work = args.work_root / label
        run(["features", "build", "--data", data, "--work", str(work), "--preset", "quick", "--jobs", "1"])
        rows += [r for s in seeds for m in modes for r in oof_rows(label, data, work, s, m, args.time_budget)]
    meta = bench_metadata("python -m benchmarks.lgbm_mode " + " ".join(argv or sys.argv[1:]))
    notes = ("OOF: the quick preset's 3 grouped folds, each graph scored by the fold model that did not "
             "see it (tile: top-5 score, layout: Kendall tau); the mean over seeds.")
    table = {"columns": ["data", "collection", *modes, f"{modes[0]} >= {modes[1]}"], "rows": summary(rows, modes)}
    args.out.write_text(json.dumps({**meta, "notes": notes, "tables": {"Mean OOF over seeds": table},
                                    "raw": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
