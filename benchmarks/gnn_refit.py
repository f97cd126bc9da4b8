"""Fold average vs refit for the GNN ranker's test predictions (issue 12), on the hidden test
runtimes of generated samples.

For each collection's trained fold models in a WORK (``models.gnn train --folds K``, any tag),
the K fold models' z-scored test average (``test.npz``, the default) is scored against one model
trained on every labelled graph (train + valid)
with the fold models' config, for ``round(mean best step × K / (K − 1))`` steps (the folds saw
(K − 1)/K of the graphs) and no early stopping. No choice here looks at test runtimes except the
score that is reported. The table format is ``bench_refit.py``'s (LightGBM).

    python -m benchmarks.gnn_refit --run DATA WORK [--run DATA WORK ...] [--tag TAG] \\
        [--out benchmarks/gnn_refit.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from benchmarks.refit import score, summary  # noqa: E402


def fold_runs(data: str, work: str, tag: str, collections: str = "all") -> list[tuple[object, object]]:
    """``(GnnConfig, Collection)`` of every seed of every selected collection trained with folds."""
    from models.gnn.config import GnnConfig
    from tpurank.collections import parse_collections
    from tpurank.config import load_run_config

    runs = []
    for coll in parse_collections(collections):
        name = coll.slug + (f"-{tag}" if tag else "")
        for seed_dir in sorted(Path(work, "models", "gnn", name).glob("seed*")):
            saved = seed_dir / "fold0" / "config.json"
            if (seed_dir / "folds.json").is_file() and saved.is_file():
                cfg = dataclasses.replace(load_run_config(GnnConfig, saved), data=data, work=work,
                                          features="", collection="", collections=coll.name)
                runs.append((cfg, coll))
    if not runs:
        raise SystemExit(f"{work}: no GNN fold models under models/gnn/*{'-' + tag if tag else ''}/seed*")
    return runs


def refit_costs(cfg, coll) -> tuple[dict[str, np.ndarray], int]:
    """Test costs of one model trained on every labelled graph for the CV-chosen step count."""
    from models.gnn.data import load_graphs, trainable
    from models.gnn.folds import fold_dir, labelled_graphs
    from models.gnn.infer import load_trained_dir, predict_costs, source_order
    from models.gnn.train import fit
    from models.training import DistContext, choose_device

    reports = [json.loads((p / "report.json").read_text())
               for p in sorted(cfg.model_dir(coll).glob("fold*")) if (p / "report.json").is_file()]
    folds = len(reports)
    steps = max(1, round(float(np.mean([r["best_step"] for r in reports])) * folds / (folds - 1)))
    train = [g for g in labelled_graphs(cfg, coll).values() if trainable(g)]
    run = dataclasses.replace(cfg, steps=steps, eval_every=steps + 1, patience=0, time_budget=0.0,
                              resume=False, folds=0)
    out = fold_dir(cfg, coll, 0).parent / "refit"
    device = choose_device(cfg.device)
    fit(run, coll, train, [], out, math.inf, DistContext(), device)
    model, _ = load_trained_dir(out, device)
    test = load_graphs(cfg.features_dir(), coll, "test")
    return {g.stem: source_order(g, predict_costs(model, g, cfg.predict_batch)) for g in test}, steps


def compare(data: str, work: str, tag: str, collections: str = "all") -> list[dict[str, object]]:
    from ensemble.truth import truth as read_truth
    from models.predictions import predictions_path, read_predictions

    rows = []
    for cfg, coll in fold_runs(data, work, tag, collections):
        truth = read_truth(data, coll, "test")
        average = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), coll, "test"))
        start = time.perf_counter()
        refit, steps = refit_costs(cfg, coll)
        rows.append({"data": Path(data).name, "work": f"{Path(work).name}@seed{cfg.seed}",
                     "seed": cfg.seed, "collection": coll.name, "graphs": len(truth),
                     "fold_average": score(coll, average, truth), "refit": score(coll, refit, truth),
                     "refit_steps": steps, "refit_s": round(time.perf_counter() - start, 1)})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=2, action="append", metavar=("DATA", "WORK"), required=True,
                   help="a generated dataset (with hidden test runtimes) and a WORK whose GNN was "
                        "trained on it with --folds")
    p.add_argument("--tag", default="", help="the GNN runs' --tag (WORK/models/gnn/<slug>-<tag>)")
    p.add_argument("--collections", default="all", help="collections to refit (comma list or all)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "gnn_refit.json"), help="artifact written")
    a = p.parse_args(argv)
    from models.training import set_cpu_threads
    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    set_cpu_threads(a.threads)
    rows = [r for data, work in a.run for r in compare(data, work, a.tag, a.collections)]
    table = summary(rows)
    command = "python -m benchmarks.gnn_refit " + " ".join(sys.argv[1:] if argv is None else argv)
    write_json(Path(a.out), {**bench_metadata(command), "rows": rows,
                             "tables": {"Mean over collections": {"rows": table}}})
    for r in table:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
