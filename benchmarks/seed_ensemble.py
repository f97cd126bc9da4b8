"""How much a further GNN seed adds: the out-of-fold score of the mean of n seeds' costs.

A run planned to a time budget spends the GNN's time on seeds (``ensemble.run.split_seeds``),
each at least ``MIN_SEED_SHARE`` of the preset's share. This reads a finished run's seeds'
out-of-fold predictions (``WORK/preds/gnn@seed<k>``), scores the mean of every subset of ``n``
seeds' min-max normalised costs (the blend's normalisation) on the configs all of them predicted,
averages over the subsets of each size, and fits ``score(n) = limit - gap / n`` by least squares:
``limit`` is what unboundedly many seeds of the same quality would reach. Writes
``benchmarks/seed_ensemble.json``::

    .venv/bin/python -m benchmarks.seed_ensemble --work W1 --work W2 ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.render.artifacts import bench_metadata
from models.metrics import kendall_tau
from models.predictions import model_runs, normalise_costs, predictions_path, read_oof
from tpurank.atomic import write_json
from tpurank.collections import Collection, get_collection

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ("layout-xla-default", "layout-xla-random", "layout-nlp-default", "layout-nlp-random")


def load_seed(preds: Path, run: str, coll: Collection) -> dict[str, dict[int, tuple[float, float]]]:
    """Per OOF graph: config index -> (cost, runtime) of one seed's predictions
    (:func:`models.predictions.read_oof`, and the runtimes the fold models wrote beside them)."""
    with np.load(predictions_path(preds, run, coll, "oof-target")) as target:
        runtimes = {g: target[g] for g in target.files}
    return {g: dict(zip(idx.tolist(), zip(cost, runtimes[g]))) for g, (idx, cost) in
            read_oof(preds, run, coll).items()}


def subset_score(seeds: list[dict], combo: tuple[int, ...]) -> float:
    """Mean Kendall tau over graphs of the mean normalised cost of the seeds in ``combo``."""
    taus = []
    for g in seeds[combo[0]]:
        common = sorted(set.intersection(*[set(seeds[k].get(g, {})) for k in combo]))
        if len(common) < 2:
            continue
        cost = np.mean([normalise_costs(np.array([seeds[k][g][c][0] for c in common])) for k in combo], 0)
        taus.append(kendall_tau(cost, np.array([seeds[combo[0]][g][c][1] for c in common])))
    return float(np.mean(taus))


def curve(work: Path, slug: str) -> dict:
    coll = get_collection(slug.replace("-", ":"))
    runs = model_runs(work / "preds", "gnn")
    seeds = [load_seed(work / "preds", run, coll) for run in runs]
    scores = [float(np.mean([subset_score(seeds, c) for c in itertools.combinations(range(len(seeds)), n)]))
              for n in range(1, len(seeds) + 1)]
    gap, limit = np.polyfit(-1.0 / np.arange(1, len(scores) + 1), scores, 1)
    return {"work": work.name, "collection": slug.replace("-", ":"), "seeds": len(seeds),
            "score by seeds": scores, "limit": float(limit), "gap": float(gap)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", action="append", required=True, help="a finished run's WORK (repeat)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "seed_ensemble.json"))
    args = ap.parse_args(argv)
    rows = [curve(Path(w), slug) for w in args.work for slug in LAYOUT]
    for r in rows:
        print(json.dumps(r), flush=True)
    write_json(args.out, {**bench_metadata(".venv/bin/python -m benchmarks.seed_ensemble "
                                           + " ".join(argv if argv is not None else sys.argv[1:])),
                          "rows": rows})


if __name__ == "__main__":
    main()
