"""Blend model predictions per graph and write the submission.

Per collection:

1. each model's costs are normalised per graph (``--norm rank|minmax|zscore``); the seed runs of
   a model (``gnn@seed0``, ``gnn@seed1``, ...) are averaged first (:mod:`models.predictions`);
2. blend weights are fitted to maximise the selection criterion over per-graph scores (tile
   top-5 score / Kendall τ): ``(1 - w) * mean + w * (mean of the worst --tail-fraction of
   graphs)`` with ``w = --tail-weight`` (:class:`ensemble.weights.Criterion`; ``w = 0`` is the
   official metric, the mean), on
   * the models' **out-of-fold predictions** (``oof``: every labelled graph, train + valid,
     predicted by a fold model that did not see it) when every model has them — the default
     protocol with ``--folds K`` models (:mod:`ensemble.oof`). The reported blend score is
     *nested*: leave-one-fold-out (weights fitted on the other folds, scored on the left-out
     fold), mean ± sd over folds; the official valid graphs are scored with the weights of the
     fold that held them out;
   * with ``--protocol valid`` only, the *valid* split, as before cross-validation existed. The
     blend's valid score is then **in-sample** (its weights were fitted on those graphs, and the
     models early-stopped on them) and is labelled so. A model without ``oof`` predictions (one
     trained without folds, or the training-free baseline) stops the default protocol with a
     message naming it: the blend never switches protocol on its own;
3. the test costs are the weighted sums; the submission holds every test graph of the data root.
   With ``--tile-top5 portfolio`` (the default) a tile kernel's five submitted configs are
   shared among the models: one for each model (its top pick), the rest to the model with the
   better criterion on the same graphs, 4 + 1 for two (nested the same way; :mod:`ensemble.hedge`).

Guarding against overfitting few graphs: weights are searched on a coarse simplex grid (step
``--grid-step``, 0.1 by default) and then shrunk toward an *anchor*,
``w = (1 - a) * w_best + a * anchor``: equal weights over the models whose mean over their worst
graphs (the criterion's tail fraction) is within ``TAIL_TOLERANCE`` = 0.01 of the best model's,
so shrinkage never moves weight to a model the fitted graphs show to be worse on the
collection's tail (issue 22; before, the anchor was equal weights over every model). The
shrinkage ``a`` is picked from ``--alphas`` on held-out graphs: on OOF predictions by fold (for
each fold of the models' fold plan, the anchor and the grid optimum of the *other* folds are
refitted, shrunk and scored on its graphs: a fold's OOF predictions all come from one fold model,
so a model weak in one fold is weak on all its graphs at once, issue 22), on the valid split by
graph (leave-one-graph-out); the ``a`` whose held-out scores have the best criterion wins (within
``LOO_TOLERANCE`` = 0.001 of the best, the most shrinkage wins). ``a = 1`` (the anchor) wins
whenever fitting does not help on held-out graphs; with fewer than ``MIN_GRAPHS_TO_FIT`` graphs
the weights are simply equal. ``summary.json`` records the in-sample and held-out criterion of
every ``a``, with the held-out mean and worst 5 % (the held-out number of the chosen ``a`` is
itself optimistic: ``a`` was chosen by it).

Why a leave-one-graph-out tile score can sit far below the in-sample one over hundreds of
kernels: the tile score is unbounded below, so a single kernel that one model ruins (-10) can by
itself decide the grid optimum; left out, the other kernels' optimum ruins it, and that one
kernel moves the mean by 11/n. It is what the fit does to an unseen kernel like it, not an
error (issue 22; ``tests/ensemble/test_weights.py`` checks the estimate against refits).

Test runtimes are never read here.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection, parse_collections
from tpurank.config import parse_config, run_metadata
from features.io import discover
from models.metrics import final_score
from models.predictions import NORMALISATIONS, model_runs, predictions_path, write_predictions

from ensemble.hedge import blend_members, blend_or_portfolio, hedge_portfolio, portfolio_summary
from ensemble.submission import check_file, submission_rows, write_submission
from ensemble.truth import split_truth, test_sizes as ranked_and_tied
from ensemble.weights import (BLEND_MODEL, BlendConfig, FitResult, _load_normed, _mean_score, _require,
                              blend_costs, fit_weights)

PROTOCOLS = ("auto", "oof", "valid")
TILE_TOP5 = ("blend", "portfolio")


def blend_collection(cfg: BlendConfig, coll: Collection) -> tuple[dict, dict[str, np.ndarray]]:
    """Blend one collection by the configured protocol; returns (summary, test costs)."""
    from ensemble.oof import blend_collection_oof, has_oof

    if cfg.protocol == "valid":
        return blend_collection_valid(cfg, coll)
    lacking = has_oof(cfg.preds_dir, cfg.model_list, coll)
    if lacking:  # never a silent switch of the whole blend to the in-sample valid protocol
        raise FileNotFoundError(lacking_oof(cfg, coll, lacking))
    return blend_collection_oof(cfg, coll)


def lacking_oof(cfg: BlendConfig, coll: Collection, lacking: list[str]) -> str:
    """Why the blend stops: which models have no out-of-fold predictions, and the two ways on."""
    from tpurank.registry import BY_NAME, base_name

    absent = [m for m in lacking if not model_runs(cfg.preds_dir, m)]
    if absent:
        return (f"no predictions of model {absent[0]!r} under {cfg.preds_dir} (run the model's "
                "predict step first)")
    why = [f"{m} (training-free: it writes none)" if base_name(m) in BY_NAME and not BY_NAME[base_name(m)].has_oof
           else m for m in lacking]
    return (f"{coll.name}: no out-of-fold predictions of {', '.join(why)} under {cfg.preds_dir}. The "
            "blend is fitted on the models' out-of-fold predictions: train them with --folds K (the "
            "quick and full presets do) and predict again, or fit it on the valid split with "
            "--protocol valid (make run PROTOCOL=valid; in-sample: the models early-stopped on those graphs)")


def blend_collection_valid(cfg: BlendConfig, coll: Collection) -> tuple[dict, dict[str, np.ndarray]]:
    """Fit weights on valid, blend valid and test; the blend's valid score is in-sample."""
    truth = split_truth(cfg.data, coll, "valid")
    valid_normed = _load_normed(cfg, coll, "valid") if truth else []
    for model, preds in zip(cfg.model_list, valid_normed):
        _require(preds, {s: len(t) for s, t in truth.items()}, f"{coll.name}/valid, model {model}")
    fit = (fit_weights(coll, valid_normed, truth, cfg.grid_step, cfg.alphas, cfg.max_fit_configs,
                       criterion=cfg.criterion(coll))
           if truth else FitResult([1.0 / len(cfg.model_list)] * len(cfg.model_list), 1.0, [], 0,
                     method="equal (no valid graphs)"))
    test_sizes = ranked_test_sizes(cfg.data, coll)
    test_normed = _load_normed(cfg, coll, "test") if test_sizes else []
    for model, preds in zip(cfg.model_list, test_normed):
        _require(preds, test_sizes, f"{coll.name}/test, model {model}")
    summary = {"protocol": "valid (in-sample)",
               "weights": dict(zip(cfg.model_list, fit.weights)), "fit": dataclasses.asdict(fit),
               "valid_score": {}, "n_valid": len(truth), "n_test": len(test_sizes)}
    counts = None
    if coll.is_tile and cfg.tile_top5 == "portfolio" and truth:
        port = hedge_portfolio(blend_members(valid_normed, fit.weights, sorted(truth)),
                               [*cfg.model_list, BLEND_MODEL], truth, cfg.criterion(coll),
                               len(cfg.model_list))
        counts, summary["portfolio"] = port.counts, portfolio_summary(port)
    test_costs = blend_or_portfolio(test_normed, fit.weights, sorted(test_sizes), counts) if test_sizes else {}
    if truth:
        valid_costs = blend_or_portfolio(valid_normed, fit.weights, sorted(truth), counts)
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "valid"), valid_costs)
        for model, preds in zip(cfg.model_list, valid_normed):
            summary["valid_score"][model] = _mean_score(coll, preds, truth)
        summary["valid_score"][BLEND_MODEL] = _mean_score(coll, valid_costs, truth)
    if test_sizes:
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "test"), test_costs)
    return summary, test_costs


def ranked_test_sizes(data: str, coll: Collection) -> dict[str, int]:
    """Config counts of the test graphs the models rank (not those whose configs all tie)."""
    return ranked_and_tied(data, coll)[0]


def with_tied_graphs(cfg: BlendConfig, coll: Collection, test_costs: dict[str, np.ndarray],
                     summary: dict) -> dict[str, np.ndarray]:
    """``test_costs`` plus every test graph without configurable nodes at one equal cost per
    config, so that the submission ranks it in file order (features.repair); recorded in the
    collection's summary and in the blend's test predictions."""
    tied = ranked_and_tied(cfg.data, coll)[1]
    if not tied:
        return test_costs
    costs = {**test_costs, **{stem: np.zeros(n) for stem, n in tied.items()}}
    write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "test"), costs)
    summary["tied_test_graphs"] = {stem: "no configurable node: every config ties, file order"
                                   for stem in sorted(tied)}
    return costs


def run_id(cfg: BlendConfig) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{Path(cfg.data).name}-{cfg.preset}-seed{cfg.seed}"


def run_blend(cfg: BlendConfig) -> dict:
    """Blend every collection, write the submission (+ a copy in ``submissions/<run>/``), check it."""
    if cfg.protocol not in PROTOCOLS:
        raise ValueError(f"--protocol must be one of {PROTOCOLS}, got {cfg.protocol!r}")
    if cfg.tile_top5 not in TILE_TOP5:
        raise ValueError(f"--tile-top5 must be one of {TILE_TOP5}, got {cfg.tile_top5!r}")
    if cfg.norm not in NORMALISATIONS:
        raise ValueError(f"--norm must be one of {NORMALISATIONS}, got {cfg.norm!r}")
    if not cfg.model_list:
        raise ValueError("--models is empty")
    rid = run_id(cfg)
    summary = {"run_id": rid, "models": cfg.model_list, "norm": cfg.norm,
               "runs": {m: model_runs(cfg.preds_dir, m) for m in cfg.model_list},
               "collections": {}, "metadata": run_metadata(cfg)}
    rows: dict[str, list[int]] = {}
    colls = [c for c in parse_collections(cfg.collections) if discover(cfg.data, [c], ["valid", "test"])]
    if not colls:
        raise FileNotFoundError(f"{cfg.data}: no valid/test graphs of collections {cfg.collections!r}")
    for coll in colls:
        coll_summary, test_costs = blend_collection(cfg, coll)
        test_costs = with_tied_graphs(cfg, coll, test_costs, coll_summary)
        summary["collections"][coll.name] = coll_summary
        rows.update(submission_rows(coll, test_costs))
        _print_collection(coll, coll_summary)
    valid_final = {m: final_score({c: s["valid_score"][m] for c, s in summary["collections"].items()
                                   if m in s["valid_score"]})
                   for m in cfg.model_list + [BLEND_MODEL]
                   if any(m in s["valid_score"] for s in summary["collections"].values())}
    summary["valid_final"] = valid_final
    summary["oof_final"] = oof_final(summary["collections"])
    submission = write_submission(cfg.submission, rows)
    run_dir = submission.parent / rid
    write_submission(run_dir / "submission.csv", rows)
    problems = check_file(submission, cfg.data)
    summary["check"] = problems or "ok"
    summary["submission"] = str(submission)
    summary["run_dir"] = str(run_dir)
    write_json(run_dir / "blend.json", summary)
    write_json(cfg.blend_dir / "summary.json", summary)
    if problems:
        raise ValueError(f"{submission} failed the checker: " + "; ".join(problems[:5]))
    return summary


def oof_scores(coll_summary: dict) -> dict[str, dict]:
    """``{model-or-blend: fold_scores}`` of one collection summary (empty without OOF)."""
    oof = coll_summary.get("oof")
    if not oof:
        return {}
    return dict(oof["models"], **{BLEND_MODEL: oof["blend"]["scores"]})


def oof_final(collections: dict[str, dict]) -> dict[str, float]:
    """Mean over collections of each model's OOF mean, when every collection has OOF scores."""
    per = [oof_scores(s) for s in collections.values()]
    if not per or not all(per):
        return {}
    names = [m for m in per[0] if all(m in p for p in per)]
    return {m: final_score({str(i): p[m]["mean"] for i, p in enumerate(per)}) for m in names}


def _print_collection(coll: Collection, s: dict) -> None:
    weights = ", ".join(f"{m}={w:.2f}" for m, w in s["weights"].items())
    scores = ", ".join(f"{m}={v:.4f}" for m, v in s["valid_score"].items())
    oof = ", ".join(f"{m}={v['mean']:.4f}±{v['sd']:.4f}" for m, v in oof_scores(s).items())
    label = "valid (blend nested)" if s["protocol"] == "oof" else "valid (blend in-sample)"
    print(f"{coll.name:22s} [{s['protocol']}] valid graphs={s['n_valid']:4d} "
          f"test graphs={s['n_test']:4d} weights: {weights} ({s['fit']['method']}, "
          f"shrink={s['fit']['alpha']:g})"
          + (f" | OOF over {s['oof']['n_graphs']} graphs, {s['oof']['folds']} folds "
             f"(blend leave-one-fold-out): {oof}" if oof else "")
          + (f" | {label}: {scores}" if scores else "")
          + (f" | note: {s['note']}" if s.get("note") else "")
          + (f" | {len(s['tied_test_graphs'])} test graph(s) without configurable nodes ranked in file "
             f"order: {', '.join(s['tied_test_graphs'])}" if s.get("tied_test_graphs") else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(BlendConfig, argv, prog="python -m ensemble blend")
    summary = run_blend(cfg)
    finals = ", ".join(f"{m}={v:.4f}" for m, v in summary["valid_final"].items())
    if summary["oof_final"]:
        oof = ", ".join(f"{m}={v:.4f}" for m, v in summary["oof_final"].items())
        print(f"OOF final (mean of collections; blend nested leave-one-fold-out): {oof}")
    print(f"official valid final (mean of collections): {finals}")
    print(f"wrote {summary['submission']} (checked OK) and {summary['run_dir']}/ [run {summary['run_id']}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
