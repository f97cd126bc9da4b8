"""``python -m models.lgbm compare``: official validation scores of several models' predictions.

For each model name it scores every run under ``WORK/preds`` (``<model>`` and ``<model>@seed<k>``,
see :func:`models.predictions.model_runs`) against the true runtimes of the tabular valid
parquet, and prints the mean ± std over runs per collection (and the five-collection mean).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import parse_collections
from features.processed import tabular_path
from models.lgbm.data import truth_by_graph
from models.metrics import score_collection
from models.predictions import model_runs, predictions_path, read_predictions


def compare(work: str, models: list[str], collections: str = "all", features_dir: str = "",
            split: str = "valid",
            extra_preds: tuple[str, ...] = ()) -> dict[str, dict[str, dict[str, float]]]:
    """``{model: {collection: {run: score}}}`` over the runs that have predictions.

    Runs are looked for in ``WORK/preds`` and then in each ``extra_preds`` directory (another
    work dir's ``preds/`` built from the same data root: the truth is the same source files).
    """
    feats = Path(features_dir) if features_dir else Path(work) / "features"
    preds_dirs = [Path(work) / "preds", *map(Path, extra_preds)]
    table: dict[str, dict[str, dict[str, float]]] = {m: {} for m in models}
    for collection in parse_collections(collections):
        truth = truth_by_graph(tabular_path(feats, collection, split))
        for model in models:
            runs: dict[str, float] = {}
            for preds_dir in preds_dirs:
                for run in model_runs(preds_dir, model):
                    path = predictions_path(preds_dir, run, collection, split)
                    if truth and path.is_file() and run not in runs:
                        runs[run] = score_collection(collection, read_predictions(path),
                                                     truth)["score"]
            table[model][collection.name] = runs
    return table


def _cell(scores: list[float]) -> str:
    if not scores:
        return "n/a"
    if len(scores) == 1:
        return f"{scores[0]:.4f}"
    return f"{np.mean(scores):.4f}±{np.std(scores):.4f}"


def format_table(table: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown table: mean ± std over runs (seeds); the last row is the per-run collection mean."""
    models = list(table)
    collections = list(next(iter(table.values()))) if table else []
    lines = ["| collection | " + " | ".join(models) + " |", "|---" * (len(models) + 1) + "|"]
    for c in collections:
        lines.append(f"| {c} | " + " | ".join(_cell(list(table[m][c].values())) for m in models) + " |")
    means = []
    for m in models:
        runs = set.intersection(*(set(table[m][c]) for c in collections)) if collections else set()
        means.append(_cell([float(np.mean([table[m][c][r] for c in collections])) for r in sorted(runs)]))
    lines.append("| mean | " + " | ".join(means) + " |")
    n_runs = {m: max((len(v) for v in table[m].values()), default=0) for m in models}
    lines.append("")
    lines.append("runs: " + ", ".join(f"{m}={n}" for m, n in n_runs.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.lgbm compare", description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--models", default="lgbm,baseline,gnn")
    parser.add_argument("--collections", default="all")
    parser.add_argument("--features-dir", default="")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--extra-preds", default="",
                        help="comma-separated other preds/ directories (same data root)")
    parser.add_argument("--out", default="", help="JSON file for the per-run scores (optional)")
    args = parser.parse_args(argv)
    table = compare(args.work, [m for m in args.models.split(",") if m], args.collections,
                    args.features_dir, args.split,
                    tuple(p for p in args.extra_preds.split(",") if p))
    print(format_table(table))
    if args.out:
        write_json(args.out, table)
    return 0
