"""The GNN at a fixed number of steps, both archs: steps per second on this machine's device and
the out-of-fold score those steps reach (the full preset's model, grouped folds), for the layout
collections where the GNN trails. Writes ``OUT/gpu_steps.json``.

    python -m benchmarks.gpu_steps --out DIR [--steps 200] [--folds 3] [--scale small]
        [--collections layout:xla:random,layout:nlp:random] [--archs factorized,copy]

Features are built once (``features build --preset full``); each arch then trains with
``--steps N --time-budget 0 --patience 0`` under its own ``--tag`` and predicts, whose printed
out-of-fold score is recorded.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu_check import device_metadata

NOTES = ("Each arch trains every fold model for exactly the given steps (no time limit, no early "
         "stopping) on the generated small sample; steps/s sums the fold models' training seconds "
         "(evaluations excluded, the first slower steps included).")


def stage(args: list[str], log: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    log.write_text(log.read_text() + proc.stdout + proc.stderr if log.exists() else proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"python -m {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def arch_rows(arch: str, common: list[str], work: Path, steps: int, folds: int, log: Path) -> list[dict]:
    opts = [*common, "--tag", arch, "--arch", arch, "--folds", str(folds)]
    t0 = time.monotonic()
    stage(["models.gnn", "train", *opts, "--steps", str(steps), "--time-budget", "0", "--patience", "0"], log)
    wall = time.monotonic() - t0
    out = stage(["models.gnn", "predict", *opts], log)
    oof = {m[1]: float(m[2]) for m in re.finditer(r"^(\S+): OOF (-?[\d.]+)", out, re.M)}
    rows = []
    for coll in oof:
        reports = [json.loads(p.read_text()) for p in
                   (work / "models" / "gnn" / f"{coll.replace(':', '-')}-{arch}").rglob("fold*/report.json")]
        seconds = sum(r["train_seconds"] for r in reports)
        done = sum(r["last_step"] for r in reports)
        configs = sum(r["train_configs_per_s"] * r["train_seconds"] for r in reports)
        devices = {json.loads(p.read_text()).get("device") for p in
                   (work / "models" / "gnn" / f"{coll.replace(':', '-')}-{arch}").rglob("fold*/config.json")}
        rows.append({"arch": arch, "collection": coll, "device": ",".join(sorted(map(str, devices))),
                     "fold models": len(reports), "steps each": steps, "steps done": done,
                     "steps/s": done / seconds if seconds else None,
                     "configs/s": configs / seconds if seconds else None,
                     "train wall s (all folds)": round(wall, 1), "oof": oof[coll]})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for gpu_steps.json and the log")
    p.add_argument("--root", type=Path, default=Path("/tmp/gpu-steps"), help="scratch folder")
    p.add_argument("--steps", type=int, default=200, help="optimiser steps of every fold model")
    p.add_argument("--folds", type=int, default=3, help="grouped folds (OOF)")
    p.add_argument("--scale", default="small", help="generated sample scale (features.sample)")
    p.add_argument("--collections", default="layout:xla:random,layout:nlp:random")
    p.add_argument("--archs", default="factorized,copy")
    args = p.parse_args(argv)
    from features.sample import generate_dataset

    data, work, log = args.root / f"sample-{args.scale}", args.root / "work", args.out / "gpu_steps.log"
    args.out.mkdir(parents=True, exist_ok=True)
    if not (data / ".complete").is_file():
        generate_dataset(data, scale=args.scale, seed=0)
    common = ["--data", str(data), "--work", str(work), "--preset", "full", "--collections", args.collections]
    stage(["features", "build", *common], log)
    report: dict[str, Any] = {**device_metadata("gpu_steps", argv), "notes": NOTES, "rows": []}
    for arch in args.archs.split(","):
        report["rows"] += arch_rows(arch, common, work, args.steps, args.folds, log)
        (args.out / "gpu_steps.json").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report["rows"][-2:], indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
