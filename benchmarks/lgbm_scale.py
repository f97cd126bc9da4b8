"""Peak memory of LightGBM pairwise training and scoring as the pair count grows.

    .venv/bin/python -m benchmarks.lgbm_scale [--pairs 100000,1000000] [--features 100]
        [--root DIR]   # another checkout's tree (e.g. an older commit) to compare with

Each measurement runs in a fresh subprocess (so ``ru_maxrss`` is its own): it builds a toy of
20 graphs x 2,000 configs x F float32 features, then fits the pairwise classifier for 10 rounds
on ``pairs`` sampled pairs (1 thread) and scores one 2,000-config graph against 32 references.
Printed: the process's peak RSS, its RSS before fitting (imports + toy rows), fit seconds,
scoring seconds and peak RSS growth while scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

GRAPHS, CONFIGS, ROUNDS = 20, 2000, 10


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(root: str, pairs: int, n_features: int) -> dict:
    sys.path.insert(0, root)
    import numpy as np

    from tpurank.collections import get_collection
    from tpurank.config import with_preset
    from models.lgbm.config import LgbmConfig
    from models.lgbm.data import Rows
    try:
        from models.lgbm.fit import fit_model

        def fit_pairwise(rows, valid, cfg, collection, seed):
            return fit_model("pairwise", rows, valid, cfg, collection).booster
    except ImportError:  # before models.lgbm.fit existed
        from models.lgbm.train import fit_pairwise
    from models.lgbm.model import ModelInfo, RankerModel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(GRAPHS * CONFIGS, n_features)).astype(np.float32)
    target = np.exp(X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=len(X)))
    rows = Rows(X=X, graph_code=np.repeat(np.arange(GRAPHS), CONFIGS),
                config=np.tile(np.arange(CONFIGS), GRAPHS), target=target,
                graphs=[f"g{k}" for k in range(GRAPHS)],
                feature_names=[f"f_{k}" for k in range(n_features)])
    cfg = with_preset(LgbmConfig, "quick", num_boost_round=ROUNDS, min_rounds=1, threads=1,
                      pairs_per_graph=pairs // GRAPHS)
    collection = get_collection("layout:xla:random")
    before = _rss_mb()
    t0 = time.perf_counter()
    booster = fit_pairwise(rows, None, cfg, collection, 0)
    fit_s = time.perf_counter() - t0
    fit_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = RankerModel(booster, ModelInfo("pairwise", rows.feature_names, collection.name))
    t0 = time.perf_counter()
    model.score_graph(X[:CONFIGS], X[:32])
    score_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"pairs": pairs, "features": n_features, "rss_before_mb": round(before, 1),
            "fit_peak_rss_mb": round(fit_peak, 1), "fit_s": round(fit_s, 2),
            "score_s": round(score_s, 2), "score_extra_peak_mb": round(peak - fit_peak, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="100000,1000000")
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.root, int(args.pairs), args.features)))
        return
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    print(f"root {args.root}; {GRAPHS} graphs x {CONFIGS} configs x {args.features} features, "
          f"{ROUNDS} rounds, 1 thread")
    for pairs in (int(p) for p in args.pairs.split(",")):
        out = subprocess.run([sys.executable, __file__, "--worker", "--root", args.root,
                              "--pairs", str(pairs), "--features", str(args.features)],
                             capture_output=True, text=True, env=env, cwd=args.root, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
