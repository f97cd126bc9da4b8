"""``python -m ensemble score CSV --data ROOT``: the official score of a submission.

Needs the true test runtimes, which only generated samples have (``ROOT/hidden/``); on Kaggle
data it says so and exits 0. The submission is checked strictly first (exit 1 when invalid).
Sample-only numbers: never used to choose anything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from tpurank.collections import COLLECTIONS
from features.io import read_hidden_runtimes
from models.metrics import final_score, tau_from_ranking, tile_score_from_ranking

from ensemble.submission import check_file, collection_of, read_submission


def score_rows(rows: Mapping[str, list[int]], hidden: Mapping[str, np.ndarray]) -> dict:
    """Per-collection mean, per-graph scores and final mean, for the IDs that have hidden truth."""
    per_graph: dict[str, dict[str, float]] = {}
    for sub_id, truth in hidden.items():
        coll = collection_of(sub_id)
        if coll is None:
            raise ValueError(f"hidden runtimes: unknown ID {sub_id!r}")
        if sub_id not in rows:
            raise KeyError(f"submission has no row for {sub_id}")
        score = (tile_score_from_ranking(rows[sub_id], truth) if coll.is_tile
                 else tau_from_ranking(np.asarray(rows[sub_id]), truth))
        per_graph.setdefault(coll.name, {})[sub_id] = score
    collections = {c.name: float(np.mean(list(per_graph[c.name].values())))
                   for c in COLLECTIONS if c.name in per_graph}
    return {"collections": collections, "final": final_score(collections) if collections else float("nan"),
            "per_graph": per_graph}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ensemble score",
                                     description="Score a submission on a sample's hidden test runtimes.")
    parser.add_argument("submission")
    parser.add_argument("--data", required=True)
    args = parser.parse_args(argv)
    problems = check_file(args.submission, args.data)
    if problems:
        print(f"INVALID submission {args.submission} (run `python -m ensemble check` for all problems): "
              + problems[0], file=sys.stderr)
        return 1
    hidden = read_hidden_runtimes(args.data)
    if hidden is None:
        print(f"no ground truth: {args.data} has no hidden test runtimes (Kaggle data never does); "
              f"the submission is valid but cannot be scored here.")
        return 0
    scores = score_rows(read_submission(args.submission), hidden)
    print(f"hidden-test score of {Path(args.submission)} (generated sample {args.data}; sample-only, "
          "never used for fitting):")
    for name, value in scores["collections"].items():
        print(f"  {name:22s} {value:8.4f}  ({len(scores['per_graph'][name])} graphs)")
    print(f"  {'final (mean)':22s} {scores['final']:8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
