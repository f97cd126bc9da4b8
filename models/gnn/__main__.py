"""``python -m models.gnn train|predict|rank [options]``.

train/predict options are the fields of :class:`models.gnn.config.GnnConfig` (``--preset quick``
first, then overrides), e.g.::

    python -m models.gnn train --data data/sample-small --work work/x --preset quick --seed 0
    python -m models.gnn predict --data data/sample-small --work work/x --preset quick --collection tile:xla
    torchrun --nproc_per_node 2 -m models.gnn train --data data/sample-small --work work/x

``--time-budget SECONDS`` bounds the whole ``train`` invocation (shared by its collections and
folds); with ``--folds K`` train fits K fold models per collection and predict writes the
out-of-fold, valid, test-fold<k> and test predictions (``models.gnn.folds``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from tpurank.config import parse_config


def _with_default_preset(argv: list[str]) -> list[str]:
    if any(a == "--preset" or a.startswith("--preset=") for a in argv):
        return argv
    return ["--preset", "quick", *argv]


def _held(cfg):
    """``cfg`` with ``--collections all`` narrowed to the collections the data root holds."""
    import dataclasses

    from tpurank.collections import held_collections

    if cfg.collection:
        return cfg
    names = ",".join(c.name for c in held_collections(cfg.data, cfg.collections))
    return dataclasses.replace(cfg, collections=names or cfg.collections)


def train_main(argv: list[str]) -> int:
    """Train every selected collection (or its ``--folds`` fold models) within ``--time-budget``;
    under ``torchrun`` every rank runs this and rank 0 alone prints and writes summaries."""
    from models.gnn.config import GnnConfig
    from models.gnn.train import dump_summary, summary_line, train_collection
    from models.training import (TimeBudget, budget_clock, init_distributed, set_cpu_threads,
                                 shutdown_distributed)

    cfg = _held(parse_config(GnnConfig, _with_default_preset(argv), prog="python -m models.gnn train"))
    set_cpu_threads(cfg.threads)
    ctx, device = init_distributed(cfg.device)
    budget = TimeBudget(cfg.time_budget, clock=budget_clock(cfg.budget_clock))
    try:
        from models.gnn.folds import train_folds, usable_folds

        reports = []
        collections = cfg.collection_list()
        runs = [max(1, usable_folds(cfg, coll)) for coll in collections]  # models per collection
        weights = [cfg.budget_weight(coll) for coll in collections]  # time share of one model
        for i, coll in enumerate(collections):
            units_left = sum(r * w for r, w in zip(runs[i:], weights[i:]))
            if runs[i] >= 2:
                report = train_folds(cfg, coll, budget, units_left, ctx, device)
            else:
                report = train_collection(cfg, coll, budget.share(units_left, weights[i]), ctx,
                                          device)
            if ctx.is_main:
                print(summary_line(report), flush=True)
            reports.append(report)
        if ctx.is_main:
            tag = f"-{cfg.tag}" if cfg.tag else ""
            dump_summary(Path(cfg.work) / "models" / "gnn" / f"summary{tag}-seed{cfg.seed}.json",
                         reports)
    finally:
        shutdown_distributed(ctx)
    return 0


def predict_main(argv: list[str]) -> int:
    from models.gnn.config import GnnConfig
    from models.gnn.infer import predict_collection

    cfg = _held(parse_config(GnnConfig, _with_default_preset(argv), prog="python -m models.gnn predict"))
    for coll in cfg.collection_list():
        from models.gnn.folds import predict_folds, usable_folds

        if usable_folds(cfg, coll) >= 2:
            r = predict_folds(cfg, coll)
            print(f"{coll.name}: OOF {r['oof_score']:.4f} over {r['oof_graphs']} graphs "
                  f"({r['folds']} folds), official valid {r['valid_score']:.4f} over "
                  f"{r['valid_graphs']} graphs; oof/valid/test-fold<k>/test written", flush=True)
            continue
        for split, path in predict_collection(cfg, coll).items():
            print(f"{coll.name}/{split}: {path}", flush=True)
    return 0


COMMANDS = {
    "train": (lambda argv: train_main(argv), "train one model per collection"),
    "predict": (lambda argv: predict_main(argv), "write valid+test predictions (model 'gnn'; "
                                                 "with --folds also oof and test-fold<k>)"),
    "compare": (lambda argv: importlib.import_module("models.gnn.experiment").main(argv),
                "validation scores of variants x seeds vs the baseline (Markdown table)"),
    "rank": (lambda argv: int(importlib.import_module("models.gnn.rank").main(argv) or 0),
             "rank the configs of one graph with a trained model"),
    "search": (lambda argv: int(importlib.import_module("models.gnn.search").main(argv) or 0),
               "propose the configs predicted fastest (autotune a graph or an HLO module)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m models.gnn {" + "|".join(COMMANDS) + "} [options]\n")
        for name, (_, help_) in COMMANDS.items():
            print(f"  {name:8s} {help_}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]][0](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
