"""``python -m ensemble report``: ``submissions/<run>/report.{md,html,json}`` and PNG plots from
what ``blend`` left (``WORK/blend/summary.json``) and the prediction files; what it shows:
docs/ensemble.md, "Report"."""

from __future__ import annotations

import html
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy.stats import rankdata

from tpurank.atomic import atomic_path, write_json, write_text
from tpurank.collections import Collection, get_collection
from tpurank.config import parse_config, run_metadata
from models.metrics import graph_score
from models.predictions import model_runs, read_model_predictions

from ensemble.blend import read_summary
from ensemble.truth import truth as read_truth
from ensemble.weights import BLEND_MODEL, WORST_FRACTION, BlendConfig, tail_mean

BASELINE_MODEL = "baseline"
MAX_SCATTER_POINTS = 5000
SCATTER_GRAPHS = 3  # largest valid graphs per collection drawn as blend-vs-true rank scatter plots


@dataclass
class ReportConfig(BlendConfig):
    """Write the run report beside the submission (python -m ensemble report)."""

    plan: str = ""  # the plan of a run with a time budget (WORK/plan/plan.json, written by ensemble.run): planned vs actual seconds per stage


Block = tuple  # ("h2", text) | ("p", text) | ("table", header, rows) | ("img", file, caption) | ("pre", text)


def per_graph_scores(cfg: ReportConfig, coll: Collection, models: Sequence[str], split: str,
                     norm: str) -> dict[str, dict[str, float]]:
    """``{model: {stem: score}}`` on ``split`` for the models that have predictions there."""
    truth = read_truth(cfg.data, coll, split)
    out: dict[str, dict[str, float]] = {}
    if not truth:
        return out
    for model in models:
        try:
            preds = read_model_predictions(cfg.preds_dir, model, coll, split, norm)
        except FileNotFoundError:
            continue
        out[model] = {s: graph_score(coll, preds[s], truth[s]) for s in sorted(truth) if s in preds}
    return out


def _figure(width: float, height: float):
    """A matplotlib Figure outside pyplot (no backend, nothing to close)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _save(fig, path: Path) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=90, bbox_inches="tight")


def collection_scores_figure(scores: Mapping[str, Mapping[str, float]], title: str):
    """Grouped bars: x = collection, one bar per model (the blend last); the report's and the
    notebooks' (a Figure)."""
    fig = _figure(max(6, 1.6 * len(scores)), 3.6)
    ax = fig.subplots()
    colls = list(scores)
    models = sorted({m for s in scores.values() for m in s}, key=lambda m: (m == BLEND_MODEL, m))
    width = 0.8 / max(len(models), 1)
    for i, model in enumerate(models):
        ax.bar(np.arange(len(colls)) + i * width, [scores[c].get(model, np.nan) for c in colls],
               width, label=model)
    ax.set_xticks(np.arange(len(colls)) + 0.4 - width / 2, colls, rotation=20, ha="right")
    ax.axhline(0, color="black", lw=0.5)
    ax.set(ylabel="score (tile: top-5 score, layout: Kendall τ)", title=title)
    ax.legend(fontsize=8)
    return fig


def plot_rank_scatter(coll: Collection, preds: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray],
                      stems: Sequence[str], path: Path) -> None:
    """Predicted rank vs true rank (blend) for a few graphs."""
    fig = _figure(3.2 * len(stems), 3.2)
    axes = fig.subplots(1, len(stems), squeeze=False)
    for ax, stem in zip(axes[0], stems):
        pred_rank, true_rank = rankdata(preds[stem]), rankdata(truth[stem])
        if len(pred_rank) > MAX_SCATTER_POINTS:  # 100k-config graphs: a fixed random subset
            keep = np.random.default_rng(0).choice(len(pred_rank), MAX_SCATTER_POINTS, replace=False)
            pred_rank, true_rank = pred_rank[keep], true_rank[keep]
        ax.scatter(true_rank, pred_rank, s=4, alpha=0.5)
        ax.set_title(f"{stem}\n{'score' if coll.is_tile else 'τ'}="
                     f"{graph_score(coll, preds[stem], truth[stem]):.3f}", fontsize=8)
        ax.set(xlabel="true rank (1 = fastest)", ylabel="blend rank")
    fig.suptitle(f"{coll.name}: blend vs truth (valid)", fontsize=9, y=1.08)
    _save(fig, path)


def _mean_table(scores: Mapping[str, Mapping[str, float]], models: Sequence[str],
                n_graphs: Mapping[str, int]) -> tuple:
    rows = [[c, str(n_graphs.get(c, "—"))] + [f"{scores[c][m]:.4f}" if m in scores[c] else "—" for m in models]
            for c in scores]
    finals = [f"**{np.mean([scores[c][m] for c in scores]):.4f}**" if all(m in scores[c] for c in scores)
              else "—" for m in models]
    rows.append(["**final (mean)**", ""] + finals)
    return ("table", ["collection", "graphs"] + list(models), rows)


def distribution_rows(per_graph: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """One row per model: graphs, worst graph, mean of the worst 5 %, 10th/25th/50th
    percentiles, mean."""
    rows = []
    for model, scores in per_graph.items():
        v = np.asarray(list(scores.values()), dtype=np.float64)
        if not v.size:
            continue
        q10, q25, q50 = np.percentile(v, [10, 25, 50])
        rows.append([model, str(v.size), f"{v.min():.4f}", f"{tail_mean(v, WORST_FRACTION):.4f}",
                     f"{q10:.4f}", f"{q25:.4f}", f"{q50:.4f}", f"{v.mean():.4f}"])
    return rows


DISTRIBUTION_HEADER = ["model", "graphs", "worst", f"worst {WORST_FRACTION:.0%} (mean)", "10th pct",
                       "25th pct", "median", "mean"]


def plot_distributions(per_coll: Mapping[str, Mapping[str, Mapping[str, float]]], title: str,
                       path: Path) -> None:
    """One panel per collection: a box per model (whiskers to the 5th/95th percentile, every
    graph beyond them drawn as a point)."""
    colls = list(per_coll)
    fig = _figure(3.0 * len(colls) + 1, 3.4)
    axes = fig.subplots(1, len(colls), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        models = list(per_coll[coll])
        ax.boxplot([list(per_coll[coll][m].values()) for m in models], whis=(5, 95),
                   tick_labels=models, flierprops={"markersize": 3})
        ax.axhline(0, color="black", lw=0.5)
        ax.set_title(coll, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    axes[0][0].set_ylabel("per-graph score (tile: top-5 score, layout: τ)")
    fig.suptitle(title, fontsize=9, y=1.04)
    _save(fig, path)


def _score_blocks(summary: dict, models: Sequence[str], shown: Sequence[str],
                  valid: Mapping[str, dict], valid_means: dict, run_dir: Path) -> list[Block]:
    """The scores of every model and of the blend: out of fold per collection (graphs, folds,
    each model's mean ± sd over folds and over seed runs × folds, the blend's leave-one-fold-out
    mean ± sd), the per-graph distribution (out of fold where the models were cross-validated,
    else on the official valid split) and the official valid split's means."""
    colls = summary["collections"]
    header = (["collection", "graphs", "folds"] + [f"{m}, seed runs averaged (± sd over folds)" for m in models]
              + [f"{m} (± sd over seed runs × folds)" for m in models] + [f"{BLEND_MODEL} (nested, ± sd over folds)"])

    def pm(v: dict) -> str:
        return f"{v['mean']:.4f} ± {v['sd']:.4f}"

    rows, means, per_coll = [], {}, {}
    for c, s in colls.items():
        o = s.get("oof")
        if not o:
            if valid.get(c):
                per_coll[c] = dict(valid[c])
            continue
        n = o["n_graphs"] if o["n_graphs"] == o["n_labelled"] else f"{o['n_graphs']} of {o['n_labelled']}"
        spreads = [o["runs"].get(m, {}).get("spread") for m in models]
        rows.append([c, str(n), str(o["folds"]), *(pm(o["models"][m]) for m in models),
                     *(f"{pm(sp)} ({sp['runs']}×)" if sp else "—" for sp in spreads), pm(o["blend"]["scores"])])
        means[c] = {**{m: o["models"][m]["mean"] for m in models}, BLEND_MODEL: o["blend"]["scores"]["mean"]}
        per_coll[c] = {m: o["models"][m]["per_graph"] for m in models}
        if "average" in o:  # the tile portfolio's weighted average
            per_coll[c][f"{BLEND_MODEL} (average)"] = o["average"]["per_graph"]
        per_coll[c][BLEND_MODEL] = o["blend"]["scores"]["per_graph"]
    if means:
        final = [f"**{np.mean([means[c][m] for c in means]):.4f}**" for m in [*models, BLEND_MODEL]]
        rows.append(["**final (mean)**", str(sum(colls[c]["oof"]["n_graphs"] for c in means)), "", *final[:-1],
                     *[""] * len(models), final[-1]])
        _save(collection_scores_figure(means, "out-of-fold (blend: nested)"), run_dir / "scores_oof.png")
        blocks: list[Block] = [
            ("h2", "Out-of-fold scores (every labelled graph: train + valid)"),
            ("p", "Each graph is scored on the prediction of the fold model that did not see it. "
                  "The blend is scored leave-one-fold-out: its weights (and shrinkage) are fitted on "
                  "the other folds' OOF predictions and applied to the left-out fold. Mean over "
                  "folds of the per-fold mean score, ± the sd over folds. \"N of M\" graphs: the "
                  "others had fewer than 2 configs predicted by every run (nothing to rank)."),
            ("table", header, rows), ("img", "scores_oof.png", "OOF score per collection")]
    else:
        blocks = [("h2", "Out-of-fold scores"),
                  ("p", "No out-of-fold predictions (models trained without `--folds K`): only the "
                        "in-sample valid table below is available.")]
    if per_coll:
        blocks += [("h2", "Per-graph score distribution"),
                   ("p", "The tile score is unbounded below: the worst graph and the mean of the worst "
                         f"{WORST_FRACTION:.0%} show what a mean hides.")]
        for c, per_graph in per_coll.items():
            kind = "out of fold, blend nested" if c in means else "valid"
            blocks += [("p", f"**{c}** ({kind})"), ("table", DISTRIBUTION_HEADER, distribution_rows(per_graph))]
        plot_distributions(per_coll, "per-graph scores", run_dir / "distribution.png")
        blocks.append(("img", "distribution.png", "per-graph score distribution per collection"))
    blocks.append(("h2", "Official valid split (mean per-graph official metric)"))
    if not valid_means:
        return blocks + [("p", "No valid graphs with runtimes under the data root.")]
    if all(s.get("protocol") == "oof" for s in colls.values()):
        note = ("Models: out-of-fold predictions of the official valid graphs (each from the fold "
                "model that did not see it). Blend: each valid graph blended with the weights "
                "fitted on the other folds (nested), so no number here was fitted on its graph.")
    else:
        note = ("**In-sample numbers.** The models early-stopped and chose their options on these "
                "graphs and the blend weights were fitted on them: these scores are optimistic. Train "
                "with `--folds K` for out-of-fold scores.")
    _save(collection_scores_figure(valid_means, "valid"), run_dir / "scores_valid.png")
    return blocks + [("p", note), _mean_table(valid_means, shown, {c: s["n_valid"] for c, s in colls.items()}),
                     ("img", "scores_valid.png", "official valid score per collection")]


def build_report(cfg: ReportConfig) -> tuple[list[Block], dict]:
    summary = read_summary(cfg.work)
    run_dir = Path(cfg.submission).parent / summary["run_id"]
    norm = summary["norm"]
    models = list(summary["models"])
    shown = models + ([BASELINE_MODEL] if BASELINE_MODEL not in models
                      and model_runs(cfg.preds_dir, BASELINE_MODEL) else []) + [BLEND_MODEL]
    blocks: list[Block] = [("h1", f"tpurank run {summary['run_id']}"),
                           ("p", f"Data `{cfg.data}`, work `{cfg.work}`, preset `{cfg.preset}`, models "
                                 f"{', '.join(models)} (seed runs: {summary['runs']}), per-graph "
                                 f"normalisation `{norm}`. Submission `{summary['submission']}` — "
                                 f"checker: {summary['check']}.")]
    details: dict = {"valid": {}, "test": {}}
    graph_blocks: list[Block] = []
    for name in summary["collections"]:
        coll = get_collection(name)
        valid = per_graph_scores(cfg, coll, shown, "valid", norm)
        test = per_graph_scores(cfg, coll, shown, "test", norm)
        details["valid"][name], details["test"][name] = valid, test
        if valid:  # the per-graph scores' distribution is in _score_blocks
            truth = read_truth(cfg.data, coll, "valid")
            blend = read_model_predictions(cfg.preds_dir, BLEND_MODEL, coll, "valid", norm)
            stems = sorted(truth, key=lambda s: -len(truth[s]))[:SCATTER_GRAPHS]
            plot_rank_scatter(coll, blend, truth, stems, run_dir / f"scatter_{coll.slug}.png")
            graph_blocks.append(("img", f"scatter_{coll.slug}.png", f"{name}: blend rank vs true rank"))
    valid_means, test_means = ({c: {m: float(np.mean(list(v.values()))) for m, v in per_graph.items()}
                                for c, per_graph in details[split].items() if per_graph} for split in ("valid", "test"))
    repaired = repaired_test_graphs(cfg, summary)
    if repaired:
        blocks += [("h2", "Repaired test graphs"),
                   ("p", "Every test graph is ranked: these had a problem with a documented repair "
                         "(features.repair); train and valid files with problems are skipped instead."),
                   ("table", ["graph", "problem", "repair"], repaired)]
    blocks += _score_blocks(summary, models, shown, details["valid"], valid_means, run_dir)
    blocks += [("h2", "Blend weights"), _weights_table(summary, models),
               ("p", "Weights: the coarse simplex grid point that maximises the criterion on the "
                     "fitted graphs (OOF predictions of every labelled graph, or the valid split), "
                     "shrunk by `a` toward the anchor (equal weights over the models whose worst "
                     "graphs are not worse than the best model's); `a` chosen on left-out graphs: by fold "
                     "(method lofo-shrinkage: refitted on the other folds) on OOF predictions, by graph "
                     "(loo-shrinkage) on valid. Columns = candidate `a`: the criterion in-sample / "
                     "left out (optimistic for the chosen `a`, which was picked by it), "
                     f"then the left-out mean and worst {WORST_FRACTION:.0%}."),
               _shrink_table(summary)] + _portfolio_blocks(summary)
    if test_means:
        n_test = {c: len(next(iter(details["test"][c].values()))) for c in test_means}
        blocks += [("h2", "Hidden-test scores — generated sample only"),
                   ("p", "These runtimes exist only for generated samples and were never used to fit "
                         "or choose anything. Kaggle data has no such section."),
                   _mean_table(test_means, shown, n_test), ("img", "scores_test.png", "hidden test per collection")]
        _save(collection_scores_figure(test_means, "hidden test (sample only)"), run_dir / "scores_test.png")
    curve_blocks, curves = _curve_blocks(cfg, run_dir)
    blocks += [("h2", "Rank scatter (valid)")] + graph_blocks + curve_blocks
    plan = _plan_blocks(cfg)
    blocks += plan[0]
    meta = {"blend": summary["metadata"], "report": run_metadata(cfg)}
    blocks += [("h2", "Run configuration"),
               ("p", f"git SHA `{summary['metadata']['git_sha']}`"),
               ("pre", json.dumps(meta, indent=2, sort_keys=True, default=str))]
    oof = {c: {"n_graphs": s["oof"]["n_graphs"], "folds": s["oof"]["folds"],
               "models": {m: {k: v[k] for k in ("mean", "sd", "pooled", "n_graphs")}
                          for m, v in s["oof"]["models"].items()},
               "blend_nested": {k: s["oof"]["blend"]["scores"][k]
                                for k in ("mean", "sd", "pooled", "n_graphs")}}
           for c, s in summary["collections"].items() if s.get("oof")}
    data = {"run_id": summary["run_id"], "oof": oof, "valid": valid_means,
            "valid_protocol": {c: s.get("protocol", "valid (in-sample)")
                               for c, s in summary["collections"].items()},
            "hidden_test": test_means,
            "repaired_test_graphs": [dict(zip(("graph", "problem", "repair"), r)) for r in repaired],
            "per_graph": details, "learning_curves": curves}
    if plan[1] is not None:
        data["plan"] = plan[1]
    return blocks, data


def learning_curves(work: str | Path) -> dict[str, list[dict]]:
    """collection -> ``{"model", "seconds", "valid"}`` of every trained model, fold models
    included, whose report records its held-out score against its training time (``history``)."""
    from tpurank.registry import MODELS

    curves: dict[str, list[dict]] = {}
    for m in MODELS:
        for rep in m.ranker.runs(work, folds=True) if m.trains else []:
            hist = [h for h in rep.get("history", []) if "seconds" in h and np.isfinite(h["valid"])]
            if hist:
                curves.setdefault(rep["collection"], []).append(
                    {"model": m.name, "seconds": [h["seconds"] for h in hist], "valid": [h["valid"] for h in hist]})
    return curves


def curve_summary(curves: Mapping[str, list[dict]]) -> dict[str, dict[str, float]]:
    """Per collection: models, median evaluations and training seconds, mean first and last
    score, and the last quarter of training: the mean gain of the last score over the best before
    75 % of the time, and how many models' last score beat all their earlier ones (still climbing)."""
    out = {}
    for coll, cs in curves.items():
        late = [c["valid"][-1] - max([v for t, v in zip(c["seconds"], c["valid"]) if t <= 0.75 * c["seconds"][-1]]
                                     or [-np.inf]) for c in cs]
        out[coll] = {"models": len(cs), "evaluations": float(np.median([len(c["valid"]) for c in cs])),
                     "seconds": float(np.median([c["seconds"][-1] for c in cs])),
                     "first": float(np.mean([c["valid"][0] for c in cs])),
                     "last": float(np.mean([c["valid"][-1] for c in cs])),
                     "late_gain": float(np.mean([g for g in late if np.isfinite(g)] or [np.nan])),
                     "climbing": sum(g > 0 for g in late)}
    return out


def learning_curves_figure(curves: Mapping[str, list[dict]]):
    """One panel per collection: each model's held-out score against its training seconds."""
    fig = _figure(4.0 * max(1, len(curves)), 3.2)
    axes = fig.subplots(1, max(1, len(curves)), squeeze=False)[0]
    colors = {}
    for ax, (coll, cs) in zip(axes, sorted(curves.items())):
        for c in cs:
            color = colors.setdefault(c["model"], f"C{len(colors)}")
            ax.plot(c["seconds"], c["valid"], "-", color=color, alpha=0.6, lw=1, label=c["model"])
        handles = {h.get_label(): h for h in ax.get_lines()}
        ax.legend(handles.values(), handles.keys(), fontsize=7)
        ax.set(title=coll, xlabel="training seconds", ylabel="held-out score")
    if not curves:
        axes[0].text(0.5, 0.5, "no training history found", ha="center", transform=axes[0].transAxes)
    return fig


def _curve_blocks(cfg: ReportConfig, run_dir: Path) -> tuple[list[Block], dict]:
    curves = learning_curves(cfg.work)
    if not curves:
        return [], {}
    summary = curve_summary(curves)
    _save(learning_curves_figure(curves), run_dir / "learning_curves.png")
    rows = [[c, str(s["models"]), f"{s['evaluations']:.0f}", f"{s['seconds']:.0f}", f"{s['first']:.3f}",
             f"{s['last']:.3f}", f"{s['late_gain']:+.3f}", f"{s['climbing']}/{s['models']}"]
            for c, s in sorted(summary.items())]
    return [("h2", "Learning curves"),
            ("p", "Each trained model's score on the graphs it watches (quick layout fold models: "
                  "held-out ones) against its training seconds. Last quarter: the last score minus "
                  "the best before 75 % of the time; climbing: models whose last score beat all "
                  "their earlier ones."),
            ("table", ["collection", "models", "evaluations", "seconds", "first", "last",
                       "last quarter", "climbing"], rows),
            ("img", "learning_curves.png", "held-out score against training time")], summary


def _plan_blocks(cfg: ReportConfig) -> tuple[list[Block], dict | None]:
    """The time plan of a budgeted run: per stage planned (at the start), given (when it
    started) and actual seconds; this report is its last stage, so its own time is not in it."""
    if not cfg.plan:
        return [], None
    from ensemble.plan import Plan, utc

    path = Path(cfg.plan)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no plan (--plan names the plan.json of a run with a budget)")
    plan = Plan.load(path)
    spent = max((s.start + s.actual for s in plan.stages if s.done), default=0.0)
    blocks: list[Block] = [
        ("h2", "Time plan: planned vs actual"),
        ("p", f"Budget {plan.budget:,.0f} s, started {utc(plan.started_at)}. "
              "Planned: the seconds of the plan printed at the start (validate, features, the "
              "baseline and the GNN probe are measured before it); given: what the stage was given "
              "when it started (every measured stage moves the plan of the ones after it); "
              f"actual: what it took. {spent:,.0f} s spent before this report "
              f"({spent / plan.budget:.1%} of the budget); the run's total is printed at its end "
              f"and saved in `{path}`."),
        ("table", Plan.HEADER, plan.rows())]
    blocks += [("p", note) for note in plan.notes]
    return blocks, plan.to_json()


def repaired_test_graphs(cfg: ReportConfig, summary: dict) -> list[list[str]]:
    """``[graph id, problem, repair]`` of every repaired test graph: the validate report's
    ``repaired_files`` (when ``WORK/validate_report.json`` exists) and the blend's tied graphs."""
    rows: dict[str, list[str]] = {}
    report = Path(cfg.work) / "validate_report.json"
    if report.is_file():
        for entry in json.loads(report.read_text()).get("repaired_files", []):
            graph = f"{entry['collection']}:{entry['stem']}"
            rows[graph] = [graph, "; ".join(entry["problems"]), "; ".join(entry["repairs"])]
    for name, s in summary["collections"].items():
        for stem, repair in s.get("tied_test_graphs", {}).items():
            rows.setdefault(f"{name}:{stem}", [f"{name}:{stem}", "no configurable node", repair])
    return [rows[g] for g in sorted(rows)]


def _weights_table(summary: dict, models: Sequence[str]) -> tuple:
    rows = [[c, "OOF" if s.get("protocol") == "oof" else "valid", s["fit"]["method"],
             s["fit"]["criterion"], str(s["fit"]["n_graphs"])]
            + [f"{s['weights'][m]:.2f}" for m in models]
            + [" / ".join(f"{a:.2f}" for a in s["fit"]["anchor"]) if s["fit"].get("anchor") else "equal",
               f"{s['fit']['alpha']:g}"]
            for c, s in summary["collections"].items()]
    return ("table", ["collection", "fitted on", "method", "criterion", "graphs"] + list(models)
            + ["anchor", "shrink a"], rows)


def _portfolio_blocks(summary: dict) -> list[Block]:
    """The tile top-5 portfolio's slots (``--tile-top5 portfolio``), when it was used."""
    out: list[Block] = []
    for c, s in summary["collections"].items():
        port = s.get("portfolio")
        if port:
            slots = ", ".join(f"{m} {n}" for m, n in zip(port["members"], port["slots"]))
            folds = "; ".join(f"fold {k}: " + "/".join(str(n) for n in v)
                              for k, v in sorted(port.get("fold_slots", {}).items()))
            out.append(("p", f"**{c}** top 5: a portfolio of {slots} slots (shared among the "
                             "models, the odd slot to the best by the criterion "
                             f"{port['criterion']}, on {port['n_graphs']} graphs"
                             + (f"; nested, without each fold: {folds}" if folds else "") + ")."))
    return out


def _shrink_table(summary: dict) -> tuple:
    alphas = sorted({a for s in summary["collections"].values() for a in s["fit"]["loo"]}, key=float)
    rows = []
    for c, s in summary["collections"].items():
        fit = s["fit"]
        rows.append([c] + [f"{fit['in_sample'][a]:.4f} / {fit['loo'][a]:.4f} (mean {fit['loo_mean'][a]:.4f}, "
                           f"worst {fit['loo_worst'][a]:.4f})" if a in fit["loo"] else "—" for a in alphas])
    return ("table", ["collection"] + [f"a={a}" for a in alphas], rows)


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


#: block kind -> its Markdown, from the block's other items
MARKDOWN = {"h1": lambda text: "# " + text, "h2": lambda text: "## " + text, "p": lambda text: text,
            "pre": lambda text: f"```\n{text}\n```", "img": lambda file, caption: f"![{caption}]({file})",
            "table": lambda header, rows: "\n".join([_markdown_row(header), "|" + "---|" * len(header)]
                                                    + [_markdown_row(r) for r in rows])}


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n\n".join(MARKDOWN[kind](*rest) for kind, *rest in blocks) + "\n"


def to_html(blocks: Sequence[Block], title: str) -> str:
    def inline(text: str) -> str:
        text = html.escape(text)
        parts = text.split("`")
        text = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
        parts = text.split("**")
        return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))

    def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        head = "".join(f"<th>{inline(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{head}</tr>{body}</table>"

    render = {"h1": lambda text: f"<h1>{inline(text)}</h1>", "h2": lambda text: f"<h2>{inline(text)}</h2>",
              "p": lambda text: f"<p>{inline(text)}</p>", "pre": lambda text: f"<pre>{html.escape(text)}</pre>",
              "img": lambda file, caption: f'<figure><img src="{html.escape(file)}" alt="{html.escape(caption)}">'
                                           f"<figcaption>{html.escape(caption)}</figcaption></figure>",
              "table": table}
    body = [render[kind](*rest) for kind, *rest in blocks]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}img{max-width:100%}"
             "pre{background:#f4f4f4;padding:8px;overflow:auto;font-size:11px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(cfg: ReportConfig) -> Path:
    """Build and write report.md / report.html / report.json; returns the run folder."""
    blocks, data = build_report(cfg)
    run_dir = Path(cfg.submission).parent / data["run_id"]
    write_text(run_dir / "report.md", to_markdown(blocks))
    write_text(run_dir / "report.html", to_html(blocks, f"tpurank run {data['run_id']}"))
    write_json(run_dir / "report.json", data)
    return run_dir


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(ReportConfig, argv, prog="python -m ensemble report")
    run_dir = write_report(cfg)
    print(f"report: {run_dir / 'report.html'} and {run_dir / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
