"""``python -m models.gnn train|predict|rank [options]``.

train/predict options are the fields of :class:`models.gnn.config.GnnConfig` (``--preset quick``
first, then overrides), e.g.::

    python -m models.gnn train --data data/sample-small --work work/x --preset quick --seed 0
    python -m models.gnn predict --data data/sample-small --work work/x --preset quick --collection tile:xla
    torchrun --nproc_per_node 2 -m models.gnn train --data data/sample-small --work work/x
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from tpurank.cli import dispatch
from tpurank.collections import held_collections
from tpurank.config import parse_config


def _held(cfg):
    """``cfg`` with ``--collections all`` narrowed to the collections the data root holds."""
    if cfg.collection:
        return cfg
    names = ",".join(c.name for c in held_collections(cfg.data, cfg.collections))
    return dataclasses.replace(cfg, collections=names or cfg.collections)


def train_main(argv: list[str]) -> int:
    """Train every selected collection (or its ``--folds`` fold models) within ``--time-budget``;
    under ``torchrun`` every rank runs this and rank 0 alone prints and writes summaries."""
    from tpurank.atomic import write_json
    from models.budget import TimeBudget
    from models.gnn.config import GnnConfig
    from models.gnn.folds import train_folds, usable_folds
    from models.gnn.train import choose_regime, summary_line, train_collection
    from models.training import (barrier, budget_clock, init_distributed, set_cpu_threads,
                                 shutdown_distributed)

    cfg = _held(parse_config(GnnConfig, argv, prog="python -m models.gnn train"))
    set_cpu_threads(cfg.threads)
    ctx, device = init_distributed(cfg.device)
    budget = TimeBudget(cfg.time_budget, clock=budget_clock(cfg.budget_clock))
    try:
        reports = []
        collections = cfg.collection_list()
        if cfg.regime and ctx.is_main:
            choose_regime(cfg, collections, device)
        barrier(ctx)
        cfgs = [cfg.regimed(coll) for coll in collections]
        runs = [max(1, usable_folds(c, coll)) for c, coll in zip(cfgs, collections)]  # models per collection
        weights = [cfg.budget_weight(coll) for coll in collections]  # time share of one model
        for i, coll in enumerate(collections):
            units_left = sum(r * w for r, w in zip(runs[i:], weights[i:]))
            if runs[i] >= 2:
                report = train_folds(cfgs[i], coll, budget, units_left, ctx, device)
            else:
                report = train_collection(cfgs[i], coll, budget.share(units_left, weights[i]), ctx,
                                          device)
            if ctx.is_main:
                print(summary_line(report), flush=True)
            reports.append(report)
        if ctx.is_main:
            keys = ("collection", "score", "n_graphs", "seed", "best_step", "train_seconds",
                    "stopped_by", "world_size", "cross_attn")
            write_json(Path(cfg.work) / "models" / cfg.model_name / f"summary-seed{cfg.seed}.json",
                       [{k: r.get(k) for k in keys} for r in reports])
    finally:
        shutdown_distributed(ctx)
    return 0


def predict_main(argv: list[str]) -> int:
    from models.gnn.config import GnnConfig
    from models.gnn.folds import predict_folds, usable_folds
    from models.gnn.infer import predict_collection

    cfg = _held(parse_config(GnnConfig, argv, prog="python -m models.gnn predict"))
    for coll in cfg.collection_list():
        if usable_folds(chosen := cfg.regimed(coll), coll) >= 2:
            r = predict_folds(chosen, coll)
            print(f"{coll.name}: OOF {r['oof_score']:.4f} over {r['oof_graphs']} graphs "
                  f"({r['folds']} folds), official valid {r['valid_score']:.4f} over "
                  f"{r['valid_graphs']} graphs; oof/valid/test-fold<k>/test written", flush=True)
            continue
        for split, path in predict_collection(cfg, coll).items():
            print(f"{coll.name}/{split}: {path}", flush=True)
    return 0


COMMANDS = {
    "train": ("models.gnn.__main__:train_main", "train one model per collection"),
    "predict": ("models.gnn.__main__:predict_main", "write valid+test predictions (with --folds "
                                                     "also oof and test-fold<k>)"),
    "rank": ("models.gnn.rank:main", "rank the configs of one graph with a trained model"),
    "search": ("models.gnn.search:main", "propose the configs predicted fastest (autotune a graph "
                                         "or an HLO module)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("models.gnn", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
