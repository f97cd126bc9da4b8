"""Shared by the out-of-fold selection benchmarks (``bench_hedge.py``, ``bench_blend_tail.py``):
one WORK's OOF inputs of a collection, per-graph scores, and the mean ± sd over runs.

A *run* is ``LABEL DATA WORK SEED``: a WORK trained with ``--folds K`` (``make run`` or the stages
by hand) whose ``gnn`` and ``lgbm`` runs of that seed wrote ``oof`` predictions. Nothing here
reads a test runtime.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from ensemble.weights import WORST_FRACTION, BlendConfig, tail_mean  # noqa: E402
from models.metrics import graph_score  # noqa: E402
from tpurank.collections import Collection  # noqa: E402

RUN_METAVAR = ("LABEL", "DATA", "WORK", "SEED")
RUN_HELP = ("a label (the physics, e.g. tpu), the data root, a WORK trained with --folds K and the "
            "seed of its model runs; the gnn and lgbm OOF predictions of that WORK are read")


@dataclass
class OofInputs:
    """What a blend fit sees for one collection of one run."""

    coll: Collection
    names: list[str]
    normed: list[dict[str, np.ndarray]]
    truth: dict[str, np.ndarray]
    fold_of: dict[str, int]


def load(data: str, work: str, seed: int, coll: Collection, models: str = "gnn,lgbm") -> OofInputs | None:
    """The aligned OOF costs of ``models`` (None when the WORK has no OOF for ``coll``)."""
    from ensemble.oof import has_oof, load_oof

    cfg = BlendConfig(data=data, work=work, seed=seed, models=models)
    if has_oof(cfg.preds_dir, cfg.model_list, coll):
        return None
    oof = load_oof(cfg, coll)
    return OofInputs(coll, cfg.model_list, oof.normed, oof.truth, oof.fold_of)


def per_graph(coll: Collection, costs: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.array([graph_score(coll, costs[s], truth[s]) for s in sorted(truth)])


def summarise(scores: np.ndarray) -> dict[str, float]:
    """Mean and mean of the worst 5 % of per-graph scores."""
    return {"mean": float(np.mean(scores)), "worst 5%": tail_mean(scores, WORST_FRACTION)}


def spread(values: list[float]) -> str:
    """``mean ± sd`` over runs (sd with ddof 1; 0 for one run)."""
    vals = np.asarray(values, dtype=np.float64)
    sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
    return f"{vals.mean():.4f} ± {sd:.4f}"


def parse_args(doc: str, argv: list[str] | None, tail_weights: str, artifact: str):
    """The benchmarks' shared command line: ``--run`` (repeated), ``--tail-weights``, ``--out``.
    Returns (args, the tail weights as floats, the command that reproduces the run)."""
    import argparse
    import shlex

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=4, action="append", required=True, metavar=RUN_METAVAR, help=RUN_HELP)
    p.add_argument("--tail-weights", default=tail_weights,
                   help="comma list of the selection criterion's tail weights to compare")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / f"{artifact}.json"), help="artifact written")
    args = p.parse_args(argv)
    weights = [float(t) for t in args.tail_weights.split(",") if t.strip()]
    command = (f"python -m benchmarks.{artifact} " + " ".join(f"--run {' '.join(r)}" for r in args.run)
               + f" --tail-weights {shlex.quote(args.tail_weights)}")
    return args, weights, command
