"""Validation scores side by side: the lab's two comparison tools (until issue 40 the product's
``models.gnn compare`` and ``models.lgbm compare``).

``gnn``: scores of GNN variants over several seeds, next to the heuristic baseline and a random
ranking, as a Markdown table (mean ± sd over seeds). With ``--folds K`` (K >= 2, the quick
preset's default) a variant's score is its **out-of-fold** score: K fold models per (variant,
seed) on the grouped folds of ``models.cv`` (early-stopped on an inner slice of their own
training graphs), each scored on the graphs it never saw; the official-valid score of the same
OOF predictions is recorded beside it. ``--time-budget`` is then the seconds of one (variant,
seed, collection): its K fold models share them. With ``--folds 0`` the score is the old
valid-split score (one model, early-stopped on valid). Each (variant, seed) model goes to
``WORK/models/gnn/<slug>-<variant>/seed<k>/`` (finished runs are reused); the table is written
to ``WORK/reports/gnn_compare.{md,json}``, the input of :mod:`benchmarks.gnn_cv`::

    python -m benchmarks.compare gnn --data data/sample-small --work work/gnn-small --preset quick \\
        --seeds 0,1 --collections layout:xla:random --time-budget 0 --steps 400 \\
        --variants "base:;drop:dropout=0.1;h128:hidden=128"

``preds``: for each model name, every run under ``WORK/preds`` (``<model>`` and
``<model>@seed<k>``, see :func:`models.predictions.model_runs`) scored against the true runtimes
of the tabular valid parquet; mean ± std over runs per collection (and the five-collection mean)::

    python -m benchmarks.compare preds --work W --models lgbm,baseline,gnn
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json, write_text
from tpurank.collections import Collection, parse_collections
from tpurank.config import add_config_arguments, apply_overrides, config_from_args
from features.io import discover, load_npz
from features.processed import tabular_path
from models import metrics
from models.gnn.config import GnnConfig
from models.predictions import model_runs, predictions_path, read_predictions


# ---- gnn: variants x seeds -------------------------------------------------------------------
def parse_variants(spec: str) -> dict[str, dict[str, str]]:
    """``"a:cross_attn=true,hidden=128;b:cross_attn=false"`` -> {name: {field: value}}."""
    variants: dict[str, dict[str, str]] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, _, body = part.partition(":")
        overrides = dict(kv.split("=", 1) for kv in body.split(",") if kv.strip())
        variants[name.strip()] = {k.strip(): v.strip() for k, v in overrides.items()}
    if not variants:
        raise ValueError(f"no variants in {spec!r}; expected 'name:field=value,...;name2:...'")
    return variants


def reference_scores(data: str, collection: Collection, seeds: int = 20) -> dict[str, float]:
    """Validation score of the heuristic baseline (``models.baseline``) and of random rankings."""
    from features.heuristic import graph_costs

    files = discover(data, [collection], ["valid"])
    truth = {gf.stem: load_npz(gf.path).target() for gf in files}
    base = {gf.stem: graph_costs(gf.path, collection.is_tile) for gf in files}
    out = {"baseline": metrics.score_collection(collection, base, truth)["score"]}
    rng = np.random.default_rng(0)
    rand = [metrics.score_collection(collection, {s: rng.random(len(t)) for s, t in truth.items()},
                                     truth)["score"] for _ in range(seeds)]
    out["random"] = float(np.mean(rand))
    return out


def _mean_sd(values: list[float]) -> dict[str, float]:
    return {"mean": float(np.mean(values)),
            "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0}


def score_variant(run: GnnConfig, coll: Collection) -> dict:
    """Train and score one (variant, seed) on one collection: out-of-fold with ``run.folds``
    >= 2 (and the official valid graphs' OOF score), else the valid-split score."""
    from models.gnn.folds import predict_folds, train_folds, usable_folds
    from models.gnn.train import train_collection
    from models.budget import TimeBudget
    from models.training import DistContext, budget_clock, choose_device

    folds = usable_folds(run, coll)
    if folds < 2:
        report = train_collection(run, coll)
        return {"score": report["score"], "seconds": report["train_seconds"], "kind": "valid"}
    weight = run.budget_weight(coll)
    budget = TimeBudget(run.time_budget, clock=budget_clock(run.budget_clock))
    trained = train_folds(run, coll, budget, folds * weight, DistContext(), choose_device(run.device))
    scored = predict_folds(run, coll)
    return {"score": scored["oof_score"], "valid": scored["valid_score"],
            "oof_graphs": scored["oof_graphs"], "per_graph": scored["oof_per_graph"],
            "seconds": trained["train_seconds"], "best_step": trained["best_step"], "kind": "oof"}


def run_compare(cfg: GnnConfig, variants: dict[str, dict[str, str]], seeds: list[int]) -> dict:
    results: dict = {}
    for coll in cfg.collection_list():
        row: dict = {"reference": reference_scores(cfg.data, coll), "variants": {}}
        for name, overrides in variants.items():
            runs = []
            for seed in seeds:
                run = apply_overrides(cfg, {**overrides, "tag": name, "seed": seed})
                runs.append(score_variant(run, coll))
                extra = f", official valid {runs[-1]['valid']:.4f}" if "valid" in runs[-1] else ""
                print(f"{coll.name} {name} seed {seed}: {runs[-1]['kind']} {runs[-1]['score']:.4f}"
                      f"{extra} ({runs[-1]['seconds']:.0f} s)", flush=True)
            scores = [r["score"] for r in runs]
            entry = {"scores": scores, **_mean_sd(scores), "runs": runs}
            if all("valid" in r for r in runs):
                entry["valid"] = _mean_sd([r["valid"] for r in runs])
            row["variants"][name] = entry
        results[coll.name] = row
    return results


def to_markdown(results: dict, variants: dict[str, dict[str, str]]) -> str:
    names = list(variants)
    head = "| collection | baseline | random | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for coll, row in results.items():
        cells = [f"{row['reference']['baseline']:.3f}", f"{row['reference']['random']:.3f}"]
        cells += [f"{row['variants'][n]['mean']:.3f} ± {row['variants'][n]['sd']:.3f}" for n in names]
        lines.append(f"| {coll} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def gnn_main(args: argparse.Namespace) -> int:
    if not hasattr(args, "preset"):
        args.preset = "quick"
    cfg = config_from_args(GnnConfig, args)
    variants = parse_variants(args.variants)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    results = run_compare(cfg, variants, seeds)
    table = to_markdown(results, variants)
    out = Path(cfg.work) / "reports"
    write_json(out / "gnn_compare.json", {"config": dataclasses.asdict(cfg), "seeds": seeds,
                                          "variants": variants, "results": results})
    write_text(out / "gnn_compare.md", table)
    print(table)
    return 0


# ---- preds: scored prediction runs of several models -------------------------------------------
def score_runs(work: str, models: list[str], collections: str = "all", features_dir: str = "",
               split: str = "valid",
               extra_preds: tuple[str, ...] = ()) -> dict[str, dict[str, dict[str, float]]]:
    """``{model: {collection: {run: score}}}`` over the runs that have predictions.

    Runs are looked for in ``WORK/preds`` and then in each ``extra_preds`` directory (another
    work dir's ``preds/`` built from the same data root: the truth is the same source files).
    """
    from models.lgbm.data import truth_by_graph

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
                        runs[run] = metrics.score_collection(collection, read_predictions(path),
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


def preds_main(args: argparse.Namespace) -> int:
    table = score_runs(args.work, [m for m in args.models.split(",") if m], args.collections,
                       args.features_dir, args.split,
                       tuple(p for p in args.extra_preds.split(",") if p))
    print(format_table(table))
    if args.out:
        write_json(args.out, table)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    gnn = commands.add_parser("gnn", help="validation scores of GNN variants x seeds vs the baseline")
    gnn.add_argument("--seeds", default="0,1,2", help="comma-separated seeds trained for every variant")
    gnn.add_argument("--variants", default="xattn:cross_attn=true;plain:cross_attn=false",
                     help="variants as NAME:field=value,field=value joined by ;")
    add_config_arguments(gnn, GnnConfig)
    preds = commands.add_parser("preds", help="validation scores of models' predictions (Markdown table)")
    preds.add_argument("--work", required=True)
    preds.add_argument("--models", default="lgbm,baseline,gnn")
    preds.add_argument("--collections", default="all")
    preds.add_argument("--features-dir", default="")
    preds.add_argument("--split", default="valid")
    preds.add_argument("--extra-preds", default="",
                       help="comma-separated other preds/ directories (same data root)")
    preds.add_argument("--out", default="", help="JSON file for the per-run scores (optional)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return gnn_main(args) if args.command == "gnn" else preds_main(args)


if __name__ == "__main__":
    sys.exit(main())
