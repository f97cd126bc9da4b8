"""``python -m models.gnn compare``: validation scores of GNN variants over several seeds, next to
the heuristic baseline and a random ranking, as a Markdown table (mean ± sd over seeds).

Example (the README numbers)::

    python -m models.gnn compare --data data/sample-small --work work/gnn-small --preset quick \\
        --seeds 0,1,2 --variants "xattn:cross_attn=true;plain:cross_attn=false"

Each (variant, seed) model goes to ``WORK/models/gnn/<slug>-<variant>/seed<k>/`` (finished runs
are reused); the table is written to ``WORK/reports/gnn_compare.{md,json}``.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json, write_text
from tpurank.collections import Collection
from tpurank.config import apply_overrides, config_from_args, add_config_arguments
from features.io import discover, load_graph
from models import metrics
from models.gnn.config import GnnConfig


def parse_variants(spec: str) -> dict[str, dict[str, str]]:
    """``"a:cross_attn=true,loss=hinge;b:cross_attn=false"`` -> {name: {field: value}}."""
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
    from models.baseline import graph_costs

    files = discover(data, [collection], ["valid"])
    truth = {gf.stem: load_graph(gf.path).target() for gf in files}
    base = {gf.stem: graph_costs(gf.path, collection.is_tile) for gf in files}
    out = {"baseline": metrics.score_collection(collection, base, truth)["score"]}
    rng = np.random.default_rng(0)
    rand = [metrics.score_collection(collection, {s: rng.random(len(t)) for s, t in truth.items()},
                                     truth)["score"] for _ in range(seeds)]
    out["random"] = float(np.mean(rand))
    return out


def run_compare(cfg: GnnConfig, variants: dict[str, dict[str, str]], seeds: list[int]) -> dict:
    from models.gnn.train import train_collection

    results: dict = {}
    for coll in cfg.collection_list():
        row: dict = {"reference": reference_scores(cfg.data, coll), "variants": {}}
        for name, overrides in variants.items():
            scores = []
            for seed in seeds:
                run = apply_overrides(cfg, {**overrides, "tag": name, "seed": seed})
                report = train_collection(run, coll)
                scores.append(report["score"])
                print(f"{coll.name} {name} seed {seed}: {report['score']:.4f} "
                      f"({report['train_seconds']:.0f} s)", flush=True)
            row["variants"][name] = {"scores": scores, "mean": float(np.mean(scores)),
                                     "sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.gnn compare", description=__doc__)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds trained for every variant")
    parser.add_argument("--variants", default="xattn:cross_attn=true;plain:cross_attn=false",
                        help="variants as NAME:field=value,field=value joined by ;")
    add_config_arguments(parser, GnnConfig)
    args = parser.parse_args(argv)
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
