"""``python -m models.lgbm compare``: official validation scores of several models' predictions.

Reads ``WORK/preds/<model>/<slug>/valid.npz`` for each model and the true runtimes from the
tabular valid parquet; prints one row per collection and the mean, and writes a JSON summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from features.atomic import write_json
from features.collections import parse_collections
from features.processed import tabular_path
from models.lgbm.data import truth_by_graph
from models.metrics import score_collection
from models.predictions import predictions_path, read_predictions


def compare(work: str, models: list[str], collections: str = "all", features_dir: str = "",
            split: str = "valid") -> dict[str, dict[str, float | None]]:
    """``{model: {collection: score or None}}`` (None when predictions are missing)."""
    feats = Path(features_dir) if features_dir else Path(work) / "features"
    table: dict[str, dict[str, float | None]] = {m: {} for m in models}
    for collection in parse_collections(collections):
        truth = truth_by_graph(tabular_path(feats, collection, split))
        for model in models:
            path = predictions_path(Path(work) / "preds", model, collection, split)
            if not truth or not path.is_file():
                table[model][collection.name] = None
                continue
            table[model][collection.name] = score_collection(collection, read_predictions(path),
                                                             truth)["score"]
    return table


def format_table(table: dict[str, dict[str, float | None]]) -> str:
    models = list(table)
    collections = list(next(iter(table.values()))) if table else []
    lines = [f"{'collection':22s}" + "".join(f"{m:>12s}" for m in models)]
    for c in collections + ["mean"]:
        cells = []
        for m in models:
            if c == "mean":
                vals = [v for v in table[m].values() if v is not None]
                v = float(np.mean(vals)) if len(vals) == len(table[m]) and vals else None
            else:
                v = table[m][c]
            cells.append(f"{'n/a' if v is None else f'{v:.4f}':>12s}")
        lines.append(f"{c:22s}" + "".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.lgbm compare", description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--models", default="lgbm,baseline,gnn")
    parser.add_argument("--collections", default="all")
    parser.add_argument("--features-dir", default="")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--out", default="", help="JSON file for the table (optional)")
    args = parser.parse_args(argv)
    table = compare(args.work, [m for m in args.models.split(",") if m], args.collections,
                    args.features_dir, args.split)
    print(format_table(table))
    if args.out:
        write_json(args.out, table)
    return 0
