"""Graph Segment Training on whole graphs vs the k=1 pruned default, at equal wall-clock budgets.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.gst_quality --name kaggle \\
        --data work/data/kaggle15 --pruned-features work/k15-k1/features \\
        --whole-features work/k15-whole/features --collections layout:xla:random \\
        --seeds 0,1,2 --budget 600 --folds 2

Needs two feature builds of the same data: ``features build`` (k=1 pruning, the default) into
``--pruned-features`` and ``features build --prune-hops -1`` into ``--whole-features``. For every
(seed, collection, variant) the K fold models of ``python -m models.gnn train --folds K`` (quick
preset, one thread) share ``--budget`` seconds of training (``--steps N``: N steps each instead),
with no early stopping and no evaluation before the end; then every labelled graph is scored
(τ on at most ``--max-configs`` configs, exact inference) by the fold model that never saw it
(``--folds 0``: one model, scored on the official valid graphs). Scoring time is not training
time. Both variants use the same fold plan. Variants run one after another for each seed and
collection, so they see about the same machine load. ``--variants`` lists the GST variants,
``name:field=value,...`` joined by ``;`` on top of ``--segment-size`` (the k=1 pruned default
always runs first). Writes ``benchmarks/gst_quality_<name>.json``: every run (out-of-fold τ,
worst graph, steps, seconds) and per collection and variant the mean and sd over seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

from tpurank.atomic import write_json  # noqa: E402
from tpurank.collections import get_collection  # noqa: E402
from tpurank.config import apply_overrides  # noqa: E402
from benchmarks.compare import parse_variants  # noqa: E402
from benchmarks.render.artifacts import bench_metadata  # noqa: E402
from models.gnn.config import GnnConfig  # noqa: E402
from models.gnn.folds import (fold_dir, get_plan, labelled_graphs, train_folds,  # noqa: E402
                              usable_folds)
from models.gnn.data import load_graphs  # noqa: E402
from models.gnn.infer import evaluate, load_trained_dir  # noqa: E402
from models.gnn.train import train_collection  # noqa: E402
from models.budget import TimeBudget  # noqa: E402
from models.training import DistContext  # noqa: E402

PRUNED = "k=1 pruned (default)"


def run_one(base: GnnConfig, coll_name: str, seed: int, tag: str, overrides: dict,
            max_configs: int) -> dict:
    """Train one (variant, seed) and score its held-out graphs on at most ``max_configs`` configs:
    with ``folds`` >= 2 every labelled graph by the fold model that never saw it, else the
    official valid graphs."""
    run = apply_overrides(base, {**overrides, "tag": tag, "seed": seed, "resume": "false"})
    coll = get_collection(coll_name)
    start = time.perf_counter()
    if run.folds >= 2:
        if usable_folds(run, coll) < 2:
            raise SystemExit(f"{coll_name}: --folds {run.folds} not usable on {run.features_dir()}")
        train_folds(run, coll, TimeBudget(run.time_budget), run.folds * run.budget_weight(coll),
                    DistContext(), torch.device("cpu"))
        plan, graphs = get_plan(run, coll), labelled_graphs(run, coll)
        models = [(fold_dir(run, coll, k), [graphs[key] for key in plan.held_out(k) if key in graphs])
                  for k in range(plan.folds)]
        folds = [sorted(map(str, plan.held_out(k))) for k in range(plan.folds)]
    else:
        train_collection(run, coll)
        models = [(run.model_dir(coll), load_graphs(run.features_dir(), coll, "valid"))]
        folds = []
    trained = time.perf_counter()
    per_graph: dict[str, float] = {}
    for model_dir, held_out in models:
        model, saved = load_trained_dir(model_dir)
        per_graph.update(evaluate(model, coll, held_out, saved, max_configs=max_configs)["per_graph"])
    reports = [json.loads((d / "report.json").read_text()) for d, _ in models]
    steps = sum(int(r.get("last_step") or 0) for r in reports)
    seconds = sum(float(r["train_seconds"]) for r in reports)
    return {"collection": coll_name, "seed": seed,
            "tau": round(statistics.mean(per_graph.values()), 4),
            "worst_graph": round(min(per_graph.values()), 4), "graphs": len(per_graph),
            "steps": steps, "train_seconds": round(seconds, 1),
            "s_per_step": round(seconds / max(steps, 1), 2),
            "wall_seconds": round(trained - start, 1),
            "score_seconds": round(time.perf_counter() - trained, 1), "_plan": folds}


def write_artifact(args: argparse.Namespace, variants: dict, rows: list[dict],
                   argv: list[str] | None) -> list[dict]:
    """Write every run so far and the mean and sd over seeds per collection and variant."""
    summary = []
    for coll in args.collections.split(","):
        for name in variants:
            runs = [r for r in rows if r["variant"] == name and r["collection"] == coll]
            if not runs:
                continue
            scores = [r["tau"] for r in runs]
            summary.append({"collection": coll, "variant": name, "seeds": len(scores),
                            "mean": statistics.mean(scores),
                            "sd": statistics.stdev(scores) if len(scores) > 1 else 0.0,
                            "worst_graph_mean": statistics.mean(r["worst_graph"] for r in runs),
                            "steps_mean": statistics.mean(r["steps"] for r in runs)})
    command = ("OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.gst_quality "
               + " ".join(argv if argv is not None else sys.argv[1:]))
    notes = "Variants (GnnConfig fields on top of the quick preset): " + "; ".join(
        f"{k}: " + ", ".join(f"{f}={v}" for f, v in o.items() if f != "work")
        for k, o in variants.items())
    write_json(Path(args.out or ROOT / "benchmarks" / f"gst_quality_{args.name}.json"),
               {**bench_metadata(command), "data": args.data,
                "budget_s": 0.0 if args.steps else args.budget, "steps": args.steps,
                "folds": args.folds, "segment_size": args.segment_size, "notes": notes,
                "rows": rows, "tables": {"Mean and sd over seeds": {"rows": summary}}})
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="data set label: benchmarks/gst_quality_<name>.json")
    ap.add_argument("--data", required=True)
    ap.add_argument("--pruned-features", required=True)
    ap.add_argument("--whole-features", required=True)
    ap.add_argument("--work", default="work/gst-quality", help="where models and predictions go")
    ap.add_argument("--collections", default="layout:xla:random")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=450.0, help="training seconds per run")
    ap.add_argument("--steps", type=int, default=0, help="equal steps instead of seconds")
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--max-configs", type=int, default=200, help="configs scored per held-out graph")
    ap.add_argument("--segment-size", type=int, default=1000)
    ap.add_argument("--variants", default="GST:", help="GST variants, NAME:field=value,...;...")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    # no early stopping and no evaluation before the end (a model is scored on graphs nothing
    # was selected on, and evaluation time, which grows with the graph, does not eat the budget);
    # the training report's own last evaluation is kept small: the scores come from run_one
    settings = {**GnnConfig.PRESETS["quick"], "data": args.data, "threads": 1,
                "predict_threads": 1, "folds": args.folds, "time_budget": args.budget,
                "eval_every": 10**9, "patience": 0, "val_max_configs": 16,
                "final_val_max_configs": 16}
    if args.steps > 0:
        settings.update(time_budget=0.0, steps=args.steps)
    base = dataclasses.replace(GnnConfig(), **settings)
    gst = parse_variants(args.variants)
    variants = {PRUNED: {"work": f"{args.work}/pruned", "features": args.pruned_features}}
    for name, overrides in gst.items():
        variants[name] = {"work": f"{args.work}/whole", "features": args.whole_features,
                          "segment_size": str(args.segment_size), **overrides}
    rows, plans = [], {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for coll in args.collections.split(","):
            for name, overrides in variants.items():
                tag = "k1" if name == PRUNED else "gst-" + "".join(c for c in name if c.isalnum())
                row = run_one(base, coll, seed, tag, overrides, args.max_configs)
                plans.setdefault((seed, coll), row["_plan"])
                if row.pop("_plan") != plans[(seed, coll)]:  # same held-out graphs for every variant
                    raise SystemExit(f"{coll} seed {seed}: {name} has other folds than {PRUNED}")
                rows.append({"variant": name, **row})
                print(json.dumps(rows[-1]), flush=True)
                write_artifact(args, variants, rows, argv)  # a partial artifact survives a crash
    print(json.dumps(write_artifact(args, variants, rows, argv), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
