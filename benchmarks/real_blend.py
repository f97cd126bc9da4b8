"""The blend's tile top 5 on the real TPU kernels: each model, the weighted average and the hedged
portfolio the run submits, against the same run's out-of-fold tile scores (issue 22).

Per finished run (a WORK of ``make run`` or of ``bench_budget.py``, blend stage done):
``python -m ensemble real --work WORK`` scores every trained model and, from the run's blend
summary, the weighted average and the hedged top 5 with the weights and slots the blend fitted out
of fold (nothing refitted, no real runtime read before scoring). The out-of-fold columns are the
blend stage's own (``blend/summary.json``): the mean of the worst 5 % of the sample's tile kernels.

    python -m benchmarks.real_blend --run LABEL WORK SEED [--run ...] \\
        [--out benchmarks/real_blend.json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.keep import ROOT, columns, run_command, scores, write_artifact  # noqa: E402

METHODS = ("gnn", "lgbm", "average", "blend")
NOTES = ("real: the tile top-5 score on the 15 real TPU kernels (> 5 configs: the 8 a ranking can "
         "get wrong); gnn, lgbm: each model's fold models averaged; average: the blend's weighted "
         "average; blend: what the run submits, the hedged top 5 (one slot a model, the rest to the "
         "model better out of fold). oof worst 5%: the mean of the worst 5 % of the sample's tile "
         "kernels out of fold (blend: nested, as the blend stage reports it). ≥ better model in: in "
         "how many runs the blend is at least the better of gnn and lgbm.")


def one_run(label: str, work: Path, seed: int) -> dict[str, Any]:
    run_command([sys.executable, "-m", "ensemble", "real", "--work", str(work)])
    report = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    tile = {r["method"]: r for r in report["results"] if r["collection"] == "tile:xla"}
    missing = [m for m in METHODS if "score" not in tile.get(m, {})]
    if missing:
        raise SystemExit(f"{work}: ensemble real scored no {missing} on tile "
                         f"({[tile.get(m) for m in missing]})")
    oof = scores(work)["tile worst 5%"]
    slots = json.loads((work / "blend" / "summary.json").read_text())[
        "collections"]["tile:xla"]["portfolio"]["slots"]
    return {"label": label, "seed": seed, "work": str(work), "slots": slots,
            "references": {m: tile[m]["score"] for m in ("random", "heuristic")},
            **{f"real {m}": tile[m]["score"] for m in METHODS},
            **{f"real > 5 configs {m}": tile[m]["score_gt5"] for m in METHODS},
            **{f"oof worst 5% {m}": oof[m] for m in ("gnn", "lgbm", "blend")},
            "real per kernel": {m: tile[m]["per_graph"] for m in METHODS}}


def tables(rows: list[dict[str, Any]]) -> dict[str, dict]:
    kinds = ("real", "real > 5 configs", "oof worst 5%")
    per_run = [{"label": r["label"], "seed": r["seed"], "slots": "/".join(map(str, r["slots"])),
                **{f"{k} {m}": round(r[f"{k} {m}"], 3) for k in kinds for m in METHODS
                   if f"{k} {m}" in r}} for r in sorted(rows, key=lambda r: (r["label"], r["seed"]))]
    summary = []
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        cells: dict[str, Any] = {"label": label, "runs": len(mine)}
        for k in kinds:
            for m in METHODS:
                if f"{k} {m}" in mine[0]:
                    cells[f"{k} {m}"] = round(float(np.mean([r[f"{k} {m}"] for r in mine])), 3)
            cells[f"{k}: blend ≥ better model in"] = sum(
                r[f"{k} blend"] >= max(r[f"{k} gnn"], r[f"{k} lgbm"]) - 1e-12 for r in mine)
        summary.append(cells)
    return {"Per data set: means over runs": {"rows": summary, "columns": columns(summary)},
            "Per run": {"rows": per_run, "columns": columns(per_run)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=3, action="append", required=True, metavar=("LABEL", "WORK", "SEED"),
                   help="a finished run: a label (the physics), its WORK and seed; repeated")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "real_blend.json"))
    args = p.parse_args(argv)
    command = ("python -m benchmarks.real_blend "
               + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    rows = [one_run(label, Path(work), int(seed)) for label, work, seed in args.run]
    write_artifact(args.out, command, rows, NOTES, tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
