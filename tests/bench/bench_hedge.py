"""Tile top-5 hedging (``ensemble.hedge``) on out-of-fold predictions (issue 12).

For each given run's tile OOF predictions (every labelled graph scored by a fold model that never
saw it), the top-5 score of the plain ranking is compared with the hedged one for each
``per_group`` (at most that many of the five from one predicted tile-count group), with each
ranking's worst graph (the tile score is unbounded below). Nothing is
fitted: the hedge is a fixed rule, so the OOF score is held-out for every setting, and no test
runtime is read.

    python tests/bench/bench_hedge.py --run LABEL DATA WORK MODEL_RUN [--run ...] \\
        [--per-group 1,2,3] [--out benchmarks/hedge.json]

e.g. ``--run tpu data/sample-small work/sample-small-quick lgbm@seed0``. Writes one row per run
and a table of the mean ± sd over the runs of each label (physics).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def run_scores(data: str, work: str, run: str, settings: list[int]) -> dict:
    """Mean OOF tile score of one model run, plain and hedged with each ``per_group``."""
    from ensemble.hedge import graph_groups, hedged_costs
    from ensemble.oof import labelled_truth
    from features.io import discover
    from models.metrics import tile_score
    from models.predictions import read_oof
    from tpurank.collections import get_collection

    coll = get_collection("tile:xla")
    truth = labelled_truth(data, coll)
    paths = {gf.stem: gf.path for gf in discover(data, [coll], ["train", "valid"])}
    oof = read_oof(Path(work) / "preds", run, coll)
    per = {f"per_group={k}" if k else "plain": [] for k in [0, *settings]}
    stems, corr = [], []
    changed = {k: 0 for k in settings}
    for stem, (rows, cost) in sorted(oof.items()):
        rows = np.asarray(rows, dtype=np.int64)
        target = np.asarray(truth[stem], dtype=np.float64)[rows]
        if len(rows) < 2 or np.ptp(target) <= 0:
            continue
        groups = graph_groups(paths[stem])[rows]
        plain = tile_score(cost, target)
        per["plain"].append(plain)
        stems.append(stem)
        corr.append(float(np.corrcoef(cost, target)[0, 1]) if np.ptp(cost) > 0 else 0.0)
        for k in settings:
            hedged = tile_score(hedged_costs(cost, groups, k), target)
            per[f"per_group={k}"].append(hedged)
            changed[k] += int(hedged != plain)
    out = {name: float(np.mean(v)) for name, v in per.items()}
    # the tile score is unbounded below (2 - rt/best): one inverted kernel moves the mean a lot
    out.update({f"worst graph ({name})": float(np.min(v)) for name, v in per.items()})
    worst = int(np.argmin(per["plain"]))
    out["worst graph"] = stems[worst]
    out["its cost/runtime correlation"] = corr[worst]
    out["graphs"] = len(per["plain"])
    out.update({f"graphs changed (per_group={k})": n for k, n in changed.items()})
    return out


def summary(rows: list[dict], settings: list[int]) -> list[dict]:
    """Mean ± sd over the runs of each label, and how many runs each setting beats plain in."""
    out = []
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        row = {"label": label, "runs": len(mine)}
        for name in ["plain", *[f"per_group={k}" for k in settings]]:
            vals = np.array([r[name] for r in mine])
            sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
            row[name] = f"{vals.mean():.4f} ± {sd:.4f}"
            if name != "plain":
                row[f"{name} better in"] = f"{sum(r[name] > r['plain'] for r in mine)} of {len(mine)}"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    from tpurank.atomic import write_json
    from tpurank.results.artifacts import bench_metadata

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=4, action="append", required=True,
                   metavar=("LABEL", "DATA", "WORK", "MODEL_RUN"),
                   help="a label (e.g. the physics), the data root, the WORK and the model run "
                        "(e.g. lgbm@seed0, gnn@seed1, blend) whose tile OOF predictions are scored")
    p.add_argument("--per-group", default="1,2,3", help="comma list of per_group settings to try")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "hedge.json"), help="artifact written")
    args = p.parse_args(argv)
    settings = [int(s) for s in args.per_group.split(",") if s.strip()]
    rows = []
    for label, data, work, run in args.run:
        scores = run_scores(data, work, run, settings)
        rows.append({"label": label, "data": Path(data).name, "work": Path(work).name, "run": run,
                     **scores})
        print(json.dumps(rows[-1]), flush=True)
    command = "python tests/bench/bench_hedge.py " + " ".join(
        f"--run {' '.join(r)}" for r in args.run) + f" --per-group {args.per_group}"
    table = summary(rows, settings)
    names = ["plain", *[f"per_group={k}" for k in settings]]
    columns = (["label", "data", "work", "run", "graphs", *names]
               + [f"worst graph ({n})" for n in names] + ["worst graph", "its cost/runtime correlation"]
               + [f"graphs changed (per_group={k})" for k in settings])
    write_json(args.out, {**bench_metadata(command), "rows": rows, "columns": columns,
                          "tables": {"Mean over runs (OOF tile score)": {"rows": table}}})
    for row in table:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
