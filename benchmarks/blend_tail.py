"""The blend's selection criterion, chosen out of fold on both physics (issue 22).

For every collection of every run (a WORK trained with ``--folds K``), the weighted-average
blend is fitted and scored nested (weights and shrinkage fitted on the other folds, applied to
the held-out fold, as the blend stage reports it) under each candidate criterion
``(1 - w) * mean + w * (mean of the worst 10 % of graphs)`` (``--tail-weights``), and with the
blend stage's defaults (``defaults``: each kind's tail weight, the tile portfolio). Each is
reported by the mean and by the worst 5 % of graphs, beside each model alone, and for tile by how
often its worst 5 % is at least the better single model's. Rerun it on new predictions to
re-check the default (``BlendConfig.tail_weight`` for layout, ``tile_tail_weight`` for tile).
The rules it was measured against (the equal-weights anchor, shrinkage held out by graph) lost
and are gone; ``benchmarks/blend_tail.json`` keeps their rows.

    python -m benchmarks.blend_tail --run LABEL DATA WORK SEED [--run ...] \\
        [--tail-weights 0,0.25,0.5,1] [--out benchmarks/blend_tail.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from benchmarks import oof as oof_bench  # noqa: E402

from benchmarks.oof import per_graph, spread, summarise  # noqa: E402

MODELS = ["gnn", "lgbm"]


def default_label() -> str:
    """The row of the blend stage's defaults (per-kind tail weight, tail anchor, tile top 5)."""
    from ensemble.weights import BlendConfig

    d = BlendConfig()
    return (f"defaults (tile w={d.tile_tail_weight:g}, {d.tile_top5} top 5; "
            f"layout w={d.tail_weight:g}; tail anchor), held out by fold")


def collection_methods(inputs: oof_bench.OofInputs, tail_weights: list[float]) -> dict[str, dict]:
    """``{method: {"mean", "worst 5%"}}`` of one collection of one run."""
    from ensemble.blend import nested_blend
    from ensemble.weights import BlendConfig, Criterion, GraphScorer

    coll, normed, truth, fold_of = inputs.coll, inputs.normed, inputs.truth, inputs.fold_of
    out = {name: summarise(per_graph(coll, m, truth)) for name, m in zip(inputs.names, normed)}
    defaults = BlendConfig()
    scorer = GraphScorer(coll, normed, truth, defaults.max_fit_configs)
    for lam in tail_weights:
        nested = nested_blend(coll, normed, truth, fold_of, defaults.grid_step, defaults.alphas,
                              scorer, Criterion(lam, defaults.tail_fraction))
        out[f"w={lam:g}, tail anchor"] = summarise(per_graph(coll, nested.costs, truth))
    # what the blend stage does with its defaults (per-kind tail weight, tile portfolio)
    nested = nested_blend(coll, normed, truth, fold_of, defaults.grid_step, defaults.alphas, scorer,
                          defaults.criterion(coll), hedge=coll.is_tile and defaults.tile_top5 == "portfolio")
    out[default_label()] = summarise(per_graph(coll, nested.costs, truth))
    return out


def tile_tail_wins(mine: list[dict], method: str, models: list[str]) -> str:
    """In how many (run, tile collection) cells ``method``'s worst 5 % is at least the better
    single model's."""
    cells = [c for r in mine for name, c in r["collections"].items() if name.startswith("tile")]
    if not cells or method in models:
        return "—"
    wins = sum(c[method]["worst 5%"] >= max(c[m]["worst 5%"] for m in models) - 1e-12 for c in cells)
    return f"{wins} of {len(cells)}"


def table(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """Per label and method: each collection's ``mean / worst 5 %`` (mean over runs) and, over
    collections, the mean of the means (the final) and of the worst 5 %, ± sd over runs."""
    out = []
    colls = sorted({c for r in rows for c in r["collections"]})
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        methods = list(next(iter(mine[0]["collections"].values())))
        for method in methods:
            row = {"label": label, "method": method, "runs": len(mine),
                   "tile worst 5% ≥ better model in": tile_tail_wins(mine, method, MODELS)}
            for c in colls:
                vals = [r["collections"][c][method] for r in mine if c in r["collections"]]
                if vals:
                    row[c] = (f"{np.mean([v['mean'] for v in vals]):.4f} / "
                              f"{np.mean([v['worst 5%'] for v in vals]):.4f}")
            full = [r for r in mine if set(r["collections"]) == set(colls)]
            if full and len(colls) > 1:
                row["final"] = spread([np.mean([r["collections"][c][method]["mean"] for c in colls])
                                       for r in full])
                row["worst 5%, mean over collections"] = spread(
                    [np.mean([r["collections"][c][method]["worst 5%"] for c in colls]) for r in full])
            out.append(row)
    return out, colls


def main(argv: list[str] | None = None) -> int:
    from tpurank.atomic import write_json
    from tpurank.collections import COLLECTIONS
    from benchmarks.render.artifacts import bench_metadata

    args, tail_weights, command = oof_bench.parse_args(__doc__, argv, "0,0.25,0.5,1", "blend_tail")
    rows = []
    for label, data, work, seed in args.run:
        per_coll = {}
        for coll in COLLECTIONS:
            inputs = oof_bench.load(data, work, int(seed), coll)
            if inputs is not None:
                per_coll[coll.name] = collection_methods(inputs, tail_weights)
        rows.append({"label": label, "data": Path(data).name, "seed": int(seed), "collections": per_coll})
        print(json.dumps(rows[-1]), flush=True)
    summary, colls = table(rows)
    notes = ("w: the criterion's tail weight, (1 - w) x mean + w x mean of the worst 10 % of graphs; "
             "anchor: what the weights are shrunk toward (tail: equal over the models not worse on "
             "the tail). final: the mean over the five collections.")
    write_json(args.out, {**bench_metadata(command), "raw": rows, "notes": notes, "tables": {
        "Nested OOF per collection (mean / worst 5 %, mean over seeds); over collections mean ± sd over seeds":
            {"rows": summary,
             "columns": ["label", "method", "runs", *colls, "final", "worst 5%, mean over collections",
                         "tile worst 5% ≥ better model in"]}}})
    for row in summary:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
