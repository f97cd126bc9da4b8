"""``python -m ensemble seeds``: each model alone and the blend, per seed and per collection.

Per seed ``k`` the runs ``<model>@seed<k>`` are blended as ``blend --protocol valid`` does; the
valid score of each and of the blend (and, on generated samples, the hidden-test score) goes to
stdout and ``WORK/reports/seeds.{json,md}``, with a last row for the seed-averaged models.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json, write_text
from tpurank.collections import Collection, parse_collections
from tpurank.config import parse_config
from features.io import discover
from models.predictions import model_runs, read_model_predictions, run_name

from ensemble.report import to_markdown_table
from ensemble.weights import BLEND_MODEL, BlendConfig, _mean_score, blend_costs, fit_weights
from ensemble.truth import truth as read_truth


@dataclass
class SeedsConfig(BlendConfig):
    """Per-seed scores of each model and of their blend (python -m ensemble seeds)."""

    seeds: str = "0,1,2"  # comma list of the seeds whose runs are scored


def evaluate(cfg: SeedsConfig, coll: Collection, runs: list[str]) -> dict[str, dict[str, float]]:
    """``{split: {model-or-blend: mean score}}`` for one set of runs blended on valid."""
    def scores(split: str, truth: dict) -> dict[str, float]:
        preds = [read_model_predictions(cfg.preds_dir, r, coll, split, cfg.norm) for r in runs]
        out = {r: _mean_score(coll, p, truth) for r, p in zip(runs, preds)}
        return {**out, BLEND_MODEL: _mean_score(coll, blend_costs(preds, fit.weights, sorted(truth)), truth)}

    valid_truth = read_truth(cfg.data, coll, "valid")
    valid = [read_model_predictions(cfg.preds_dir, r, coll, "valid", cfg.norm) for r in runs]
    fit = fit_weights(coll, valid, valid_truth, cfg.grid_step, cfg.alphas, cfg.max_fit_configs,
                      criterion=cfg.criterion(coll))
    out = {"valid": scores("valid", valid_truth), "weights": dict(zip(runs, fit.weights))}
    test_truth = read_truth(cfg.data, coll, "test")
    if test_truth:
        out["test"] = scores("test", test_truth)
    return out


def run_seeds(cfg: SeedsConfig) -> dict:
    seeds = [int(s) for s in cfg.seeds.split(",") if s.strip()]
    models = cfg.model_list
    colls = [c for c in parse_collections(cfg.collections) if discover(cfg.data, [c], ["valid"])]
    result: dict = {"models": models, "seeds": seeds, "collections": {}}
    for coll in colls:
        per_seed = {}
        for seed in seeds:
            runs = [_seed_run(cfg, m, seed) for m in models]
            res = evaluate(cfg, coll, runs)
            per_seed[seed] = {split: {_model_of(k, models): v for k, v in scores.items()}
                              for split, scores in res.items()}
        averaged = evaluate(cfg, coll, models)
        result["collections"][coll.name] = {"per_seed": per_seed, "seed_averaged": averaged}
        print(f"{coll.name}: done", file=sys.stderr, flush=True)
    return result


def _seed_run(cfg: SeedsConfig, model: str, seed: int) -> str:
    """``model@seed<k>``; a seed-free model (only ``model/`` exists, e.g. baseline) as it is."""
    runs = model_runs(cfg.preds_dir, model)
    if run_name(model, seed) in runs:
        return run_name(model, seed)
    if runs == [model]:
        return model
    raise FileNotFoundError(f"{cfg.preds_dir}: no run {run_name(model, seed)} (found {runs})")


def _model_of(run: str, models: list[str]) -> str:
    return next((m for m in models if run == m or run.startswith(m + "@seed")), run)


def to_markdown(result: dict) -> str:
    models = result["models"] + [BLEND_MODEL]
    lines = []
    for split in ("valid", "test"):
        title = ("valid (the blend column is in-sample: its weights were fitted on these graphs)"
                 if split == "valid" else "hidden test (generated sample only)")
        header = (["collection"] + [f"{m} (mean ± sd over seeds {result['seeds']})" for m in models]
                  + [f"{m} seed-avg" for m in models])
        rows = []
        for name, coll in result["collections"].items():
            if split in coll["seed_averaged"]:
                per_seed = [[coll["per_seed"][s][split][m] for s in coll["per_seed"]] for m in models]
                rows.append([name, *(f"{np.mean(v):.4f} ± {np.std(v):.4f}" for v in per_seed),
                             *(f"{coll['seed_averaged'][split][m]:.4f}" for m in models)])
        if rows:
            rows.append(["**final (mean)**", *(f"**{np.mean([float(r[i].split()[0]) for r in rows]):.4f}**"
                                               for i in range(1, len(header)))])
            lines += [f"### {title}", "", to_markdown_table(header, rows), ""]
    lines.append("Blend weights per seed (valid-fitted):")
    for name, coll in result["collections"].items():
        ws = "; ".join(f"seed {s}: " + ", ".join(f"{_model_of(k, result['models'])}={w:.2f}"
                                                  for k, w in v["weights"].items())
                       for s, v in coll["per_seed"].items())
        lines.append(f"- {name}: {ws}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(SeedsConfig, argv, prog="python -m ensemble seeds")
    result = run_seeds(cfg)
    md = to_markdown(result)
    out = Path(cfg.work) / "reports"
    write_json(out / "seeds.json", result)
    write_text(out / "seeds.md", md)
    print(md)
    print(f"wrote {out / 'seeds.md'} and {out / 'seeds.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
