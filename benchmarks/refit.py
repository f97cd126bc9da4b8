"""Fold average vs refit for the LightGBM ranker's test predictions (issue 12), on the hidden test
runtimes of generated samples.

For each trained WORK (``make run`` with ``--folds K``) and collection, the K fold models'
z-scored test average (``test.npz``, the default) is scored against one model refitted on every
labelled graph (train + valid, the fold models' rows) in the folds' majority mode, for
``round(mean best iteration × K / (K − 1))`` rounds (the folds saw (K − 1)/K of the graphs).
No choice here looks at test runtimes except the score that is reported.

    python -m benchmarks.refit --run DATA WORK [--run DATA WORK ...] [--out benchmarks/refit.json]

Writes one row per (data, WORK, collection) and a mean per (data, WORK), then the mean ± sd over
the WORKs of each dataset.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]


def lgbm_configs(data: str, work: str) -> list:
    """The ``LgbmConfig`` of every seed trained in a WORK (as saved beside its fold models)."""
    from models.lgbm.config import LgbmConfig
    from tpurank.config import load_run_config

    seeds = sorted({p.name for p in Path(work, "models", "lgbm").glob("*/seed*") if p.is_dir()})
    configs = []
    for seed in seeds:
        saved = sorted(Path(work, "models", "lgbm").glob(f"*/{seed}/fold0/config.json"))
        if saved:
            configs.append(dataclasses.replace(load_run_config(LgbmConfig, saved[0]), data=data,
                                               work=work, collection="", features=""))
    if not configs:
        raise SystemExit(f"{work}: no fold models under models/lgbm/*/seed*/fold0 (train with --folds K)")
    return configs


def refit_costs(cfg, coll) -> dict[str, np.ndarray]:
    """Test costs of one model fitted on every labelled graph for the CV-chosen round count."""
    from features.processed import tabular_path
    from models.lgbm.data import feature_columns
    from models.lgbm.fit import fit_model
    from models.cv import fold_plan
    from models.lgbm.folds import load_graphs

    metrics = json.loads((cfg.model_dir(coll) / "metrics.json").read_text())
    folds = int(metrics["folds"])
    rounds = max(1, round(float(np.mean(metrics["best_iteration"])) * folds / (folds - 1)))
    names = feature_columns(tabular_path(cfg.features_dir(), coll, "train"))
    plan = fold_plan(cfg.work, cfg.features_dir(), coll, folds=cfg.folds, seed=cfg.seed)
    rows = load_graphs(cfg, coll, list(plan.graphs()), cfg.max_train_configs_per_graph, cfg.seed, names)
    model = fit_model(metrics["mode"], rows, None, dataclasses.replace(cfg, num_boost_round=rounds), coll)
    return model.predict_file(tabular_path(cfg.features_dir(), coll, "test"), cfg.predict_batch_rows)


def score(coll, costs: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> float:
    from models.metrics import graph_score

    return float(np.mean([graph_score(coll, costs[s], truth[s]) for s in sorted(truth)]))


def compare(data: str, work: str) -> list[dict[str, object]]:
    from ensemble.truth import truth as read_truth
    from models.predictions import predictions_path, read_predictions

    rows = []
    for cfg in lgbm_configs(data, work):
        rows += _compare_seed(cfg, data, work)
    return rows


def _compare_seed(cfg, data: str, work: str) -> list[dict[str, object]]:
    from ensemble.truth import truth as read_truth
    from models.predictions import predictions_path, read_predictions

    rows = []
    for coll in tqdm(cfg.selected_collections(), desc=f"refit {Path(work).name} seed {cfg.seed}"):
        truth = read_truth(data, coll, "test")
        average = read_predictions(predictions_path(cfg.preds_dir(), cfg.run_name(), coll, "test"))
        start = time.perf_counter()
        refit = refit_costs(cfg, coll)
        rows.append({"data": Path(data).name, "work": f"{Path(work).name}@seed{cfg.seed}", "seed": cfg.seed,
                     "collection": coll.name, "graphs": len(truth),
                     "fold_average": score(coll, average, truth), "refit": score(coll, refit, truth),
                     "refit_s": round(time.perf_counter() - start, 1)})
    return rows


def summary(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per dataset: mean over collections per WORK, then mean ± sd over WORKs (seeds)."""
    out = []
    for data in sorted({r["data"] for r in rows}):
        per_work = {}
        for r in rows:
            if r["data"] == data:
                per_work.setdefault(r["work"], []).append(r)
        means = {k: [float(np.mean([r[k] for r in rs])) for rs in per_work.values()]
                 for k in ("fold_average", "refit")}
        out.append({"data": data, "works": len(per_work),
                    **{f"{k} (mean ± sd over seeds)": f"{np.mean(v):.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0:.4f}"
                       for k, v in means.items()},
                    "refit better in": f"{sum(b > a for a, b in zip(means['fold_average'], means['refit']))} of {len(per_work)}"})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=2, action="append", metavar=("DATA", "WORK"), required=True,
                   help="a generated dataset (with hidden test runtimes) and a WORK trained on it with --folds")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "refit.json"))
    a = p.parse_args(argv)
    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    rows = [r for data, work in a.run for r in compare(data, work)]
    table = summary(rows)
    write_json(Path(a.out), {**bench_metadata("python -m benchmarks.refit " + " ".join(sys.argv[1:])),
                             "rows": rows, "tables": {"Mean over collections": {"rows": table}}})
    for r in table:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
