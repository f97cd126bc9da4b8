"""Blend model predictions per graph and write the submission (docs/ensemble.md, "Blend"): per
collection the weights (and the tile top-5 portfolio) are fitted on the models' out-of-fold
predictions for the test, and without each fold (:func:`nested_blend`) for the reported score and
the valid graphs; or, with ``--protocol valid``, on the valid split. Test runtimes are never read.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.atomic import save_npz, write_json
from tpurank.collections import Collection, parse_collections
from tpurank.config import parse_config, run_metadata
from features.io import discover
from models.metrics import final_score
from models.predictions import (NORMALISATIONS, OOF_CONFIG_SPLIT, OOF_SPLIT, model_runs, predictions_path,
                                read_model_predictions, write_predictions)

from ensemble.hedge import blend_or_portfolio, hedged_slots
from ensemble.oof import fold_scores, has_oof, load_oof, run_scores
from ensemble.submission import check_file, submission_rows, write_submission
from ensemble.truth import split_truth, test_sizes as ranked_and_tied
from ensemble.weights import (BLEND_MODEL, BlendConfig, Criterion, FitResult, GraphScorer, _mean_score,
                              blend_costs, fit_weights)


def blend_collection(cfg: BlendConfig, coll: Collection) -> tuple[dict, dict[str, np.ndarray]]:
    """Fit the weights (out of fold, or on valid), hedge the tile top 5, blend the valid and test
    graphs and write them; returns (the collection's summary, its test costs)."""
    crit = cfg.criterion(coll)
    hedge = coll.is_tile and cfg.tile_top5 == "portfolio"
    valid_truth = split_truth(cfg.data, coll, "valid")
    if cfg.protocol == "valid":
        valid = load_normed(cfg, coll, "valid", valid_truth) if valid_truth else []
        k = len(cfg.model_list)
        fit = (fit_weights(coll, valid, valid_truth, cfg.grid_step, cfg.alphas, cfg.max_fit_configs,
                           criterion=crit) if valid_truth
               else FitResult([1.0 / k] * k, 1.0, 0, method="equal (no valid graphs)"))
        summary: dict = {"protocol": "valid (in-sample)"}
        slots = None
        if hedge and valid_truth:
            slots = hedged_slots(valid, valid_truth, crit, sorted(valid_truth))
            summary["portfolio"] = _portfolio(cfg, crit, slots, len(valid_truth))
        per_stem = {s: (fit.weights, slots) for s in valid_truth}
    else:
        lacking = has_oof(cfg.preds_dir, cfg.model_list, coll)
        if lacking:  # never a silent switch of the whole blend to the in-sample valid protocol
            raise FileNotFoundError(lacking_oof(cfg, coll, lacking))
        summary, fit, slots, per_stem = blend_oof(cfg, coll, crit, hedge)
        valid_truth = {s: t for s, t in valid_truth.items() if s in per_stem}
        valid = load_normed(cfg, coll, "valid", valid_truth) if valid_truth else []
    summary.update(weights=dict(zip(cfg.model_list, fit.weights)), fit=dataclasses.asdict(fit),
                   valid_score={}, n_valid=len(valid_truth))
    if valid_truth:
        for model, preds in zip(cfg.model_list, valid):
            summary["valid_score"][model] = _mean_score(coll, preds, valid_truth)
        valid_costs = {s: blend_or_portfolio(valid, per_stem[s][0], [s], per_stem[s][1])[s]
                       for s in sorted(valid_truth)}
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "valid"), valid_costs)
        summary["valid_score"][BLEND_MODEL] = _mean_score(coll, valid_costs, valid_truth)
    test_sizes, tied = ranked_and_tied(cfg.data, coll)
    test_costs: dict[str, np.ndarray] = {}
    if test_sizes:
        test = load_normed(cfg, coll, "test", test_sizes)
        test_costs = blend_or_portfolio(test, fit.weights, sorted(test_sizes), slots)
    summary["n_test"] = len(test_sizes)
    if tied:  # no configurable node (features.repair): every config ties, the submission keeps file order
        test_costs.update({stem: np.zeros(n) for stem, n in tied.items()})
        summary["tied_test_graphs"] = {stem: "no configurable node: every config ties, file order"
                                       for stem in sorted(tied)}
    if test_costs:
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "test"), test_costs)
    return summary, test_costs


def blend_oof(cfg: BlendConfig, coll: Collection, crit: Criterion, hedge: bool):
    """Out of fold: the weights (and tile slots) fitted on every OOF graph, and nested; returns
    (summary, fit, slots, ``{stem: (weights, slots)}`` of the fold that held each graph out)."""
    oof = load_oof(cfg, coll)
    scorer = GraphScorer(coll, oof.normed, oof.truth, cfg.max_fit_configs)
    fit = fit_weights(coll, oof.normed, oof.truth, cfg.grid_step, cfg.alphas, scorer=scorer,
                      criterion=crit, groups=oof.fold_of)
    nested = nested_blend(coll, oof.normed, oof.truth, oof.fold_of, cfg.grid_step, cfg.alphas,
                          scorer, crit, hedge)
    blend = {"scores": fold_scores(coll, nested.costs, oof.truth, oof.fold_of),
             "weights": {k: f.weights for k, f in nested.fits.items()}}
    summary: dict = {"protocol": "oof", "oof": {
        "folds": oof.folds, "n_graphs": len(oof.truth), "manifests": oof.manifests,
        "n_labelled": len(oof.labelled), "n_configs": int(sum(t.size for t in oof.truth.values())),
        "blend": blend,
        "models": {m: fold_scores(coll, p, oof.truth, oof.fold_of) for m, p in zip(cfg.model_list, oof.normed)},
        "runs": {m: run_scores(cfg, coll, m, oof) for m in cfg.model_list}}}
    slots = None
    if hedge:  # the weighted average's nested scores stay beside the portfolio's, for comparison
        summary["oof"]["average"] = fold_scores(coll, nested.average, oof.truth, oof.fold_of)
        slots = hedged_slots(oof.normed, oof.truth, crit, sorted(oof.truth))
        summary["portfolio"] = dict(_portfolio(cfg, crit, slots, len(oof.truth)), fold_slots=nested.slots)
    write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, OOF_SPLIT), nested.costs)
    save_npz(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, OOF_CONFIG_SPLIT),
             **{s: oof.index[s] for s in nested.costs})
    per_stem = {s: (nested.fits[str(k)].weights, nested.slots.get(str(k))) for s, k in oof.fold_of.items()
                if s in oof.truth}
    return summary, fit, slots, per_stem


@dataclasses.dataclass
class NestedBlend:
    """Leave-one-fold-out: per fold the weights (and tile slots) fitted on the other folds, and
    every graph's costs with the weights of its fold."""

    fits: dict[str, FitResult] = dataclasses.field(default_factory=dict)  # fold -> fit
    slots: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # fold -> tile slots
    average: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # the weighted average's
    costs: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # the blend's (tile: portfolio)


def nested_blend(coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                 truth: Mapping[str, np.ndarray], fold_of: Mapping[str, int], grid_step: float,
                 alphas: Sequence[float], scorer: GraphScorer, criterion: Criterion,
                 hedge: bool = False) -> NestedBlend:
    """For every fold k: the blend fitted on the other folds' graphs (shrinkage held out by fold
    within them; ``hedge``: the tile slots too), applied to fold k's graphs."""
    stems = sorted(truth)
    out = NestedBlend()
    for k in sorted(set(fold_of[s] for s in stems)):
        fit_on = [s for s in stems if fold_of[s] != k]
        scored = [s for s in stems if fold_of[s] == k]
        fit = out.fits[str(k)] = fit_weights(coll, normed, truth, grid_step, alphas, stems=fit_on,
                                             scorer=scorer, criterion=criterion, groups=fold_of)
        out.average.update(blend_costs(normed, fit.weights, scored))
        if hedge:
            out.slots[str(k)] = hedged_slots(normed, truth, criterion, fit_on)
        out.costs.update(blend_or_portfolio(normed, fit.weights, scored, out.slots.get(str(k))))
    return out


def _portfolio(cfg: BlendConfig, crit: Criterion, slots: list[int], n: int) -> dict:
    """What the summary records of the tile portfolio."""
    return {"members": [*cfg.model_list, BLEND_MODEL], "slots": slots, "criterion": crit.describe(),
            "n_graphs": n}


def load_normed(cfg: BlendConfig, coll: Collection, split: str,
                sizes: Mapping[str, int | np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Each model's normalised costs of ``split``, checked: the models predict the same graphs,
    every graph of ``sizes`` (its config count or truth) with one cost per config (stale
    predictions fail here, by name)."""
    normed = [read_model_predictions(cfg.preds_dir, m, coll, split, cfg.norm) for m in cfg.model_list]
    sizes = {s: n if isinstance(n, int) else len(n) for s, n in sizes.items()}
    for model, preds in zip(cfg.model_list, normed):
        if set(preds) != set(normed[0]):
            diff = sorted(set(preds) ^ set(normed[0]))
            raise ValueError(f"{coll.name}/{split}: models {cfg.model_list[0]!r} and {model!r} predict "
                             f"different graphs (e.g. {diff[:3]})")
    for model, preds in zip(cfg.model_list, normed):
        what = f"{coll.name}/{split}, model {model}"
        missing = sorted(set(sizes) - set(preds))
        if missing:
            raise ValueError(f"{what}: no prediction for {len(missing)} graph(s), e.g. {missing[:3]}")
        wrong = sorted(s for s, n in sizes.items() if len(preds[s]) != n)
        if wrong:
            s = wrong[0]
            raise ValueError(f"{what}: graph {s!r} has {len(preds[s])} predicted costs but {sizes[s]} "
                             f"configs ({len(wrong)} such graph(s); stale predictions? re-run predict)")
    return normed


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


def run_id(cfg: BlendConfig) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{Path(cfg.data).name}-{cfg.preset}-seed{cfg.seed}"


def run_blend(cfg: BlendConfig) -> dict:
    """Blend every collection, write the submission (+ a copy in ``submissions/<run>/``), check it."""
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
        summary["collections"][coll.name] = coll_summary
        rows.update(submission_rows(coll, test_costs))
        _print_collection(coll, coll_summary)
    summary["valid_final"] = {m: final_score({c: s["valid_score"][m] for c, s in summary["collections"].items()
                                              if m in s["valid_score"]})
                              for m in cfg.model_list + [BLEND_MODEL]
                              if any(m in s["valid_score"] for s in summary["collections"].values())}
    summary["oof_final"] = oof_final(summary["collections"])
    submission = write_submission(cfg.submission, rows)
    run_dir = submission.parent / rid
    write_submission(run_dir / "submission.csv", rows)
    problems = check_file(submission, cfg.data)
    summary["check"] = problems or "ok"
    summary["submission"] = str(submission)
    summary["run_dir"] = str(run_dir)
    write_json(run_dir / "blend.json", summary)
    write_json(Path(cfg.work) / "blend" / "summary.json", summary)
    if problems:
        raise ValueError(f"{submission} failed the checker: " + "; ".join(problems[:5]))
    return summary


def read_summary(work: str | Path) -> dict:
    """``WORK/blend/summary.json``, written by :func:`run_blend`."""
    path = Path(work) / "blend" / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no blend summary (run `python -m ensemble blend` first)")
    return json.loads(path.read_text())


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
