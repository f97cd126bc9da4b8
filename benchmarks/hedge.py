"""Tile top 5: the portfolio (``ensemble.hedge``) against the weighted-average blend and each model
alone, out of fold, by the mean and by the worst 5 % of kernels (issue 22).

Per run (a WORK trained with ``--folds K``), on the tile OOF predictions of every labelled kernel:

* ``gnn``, ``lgbm``: each model's own OOF ranking (nothing fitted);
* ``average``: the weighted-average blend, weights fitted on the other folds (nested, as the
  blend stage reports it), with the selection criterion of each ``--tail-weights`` value;
* ``portfolio (hedged)``: the blend stage's rule, one of the five slots for each model and the
  rest to the model with the better criterion on the other folds (4 + 1;
  :func:`ensemble.hedge.hedged_slots`).

The rules it was measured against (3 + 2, and the slot split among gnn, lgbm and the average
searched by the criterion, guarded or not) lost and are gone; ``benchmarks/hedge.json`` keeps
their rows. Every number is held out: the kernel is scored by fold models that never saw it,
with weights and slots fitted without its fold. No test runtime is read.

    python -m benchmarks.hedge --run LABEL DATA WORK SEED [--run ...] \\
        [--tail-weights 0,0.5] [--out benchmarks/hedge.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import oof as oof_bench  # noqa: E402

from benchmarks.oof import per_graph, spread, summarise  # noqa: E402


NOTES = ("worst 5%: the mean of the worst 5 % of kernels. \"≥ … in\": in how many runs (seeds) the "
         "method is at least the average blend of the same tail weight, or the better single "
         "model by its worst 5 %. slots: per fold (fitted without it), the slots of gnn / lgbm / "
         "the average (which has none). The average's weights: shrinkage chosen on held-out folds.")


def methods(inputs: oof_bench.OofInputs, tail_weights: list[float]) -> dict[str, dict]:
    """``{method: {"mean", "worst 5%", "slots"?}}`` for one run."""
    from ensemble.blend import nested_blend
    from ensemble.weights import BlendConfig, Criterion, GraphScorer

    coll, normed, truth, fold_of = inputs.coll, inputs.normed, inputs.truth, inputs.fold_of
    out = {name: summarise(per_graph(coll, m, truth)) for name, m in zip(inputs.names, normed)}
    scorer = GraphScorer(coll, normed, truth)
    defaults = BlendConfig()
    for lam in tail_weights:
        tag = f" (tail weight {lam:g})"
        nested = nested_blend(coll, normed, truth, fold_of, defaults.grid_step, defaults.alphas,
                              scorer, Criterion(lam, defaults.tail_fraction), hedge=True)
        out["average" + tag] = summarise(per_graph(coll, nested.average, truth))
        out["portfolio (hedged)" + tag] = dict(summarise(per_graph(coll, nested.costs, truth)),
                                               slots=" ".join("/".join(map(str, c)) for c in nested.slots.values()))
    return out


def table(rows: list[dict]) -> list[dict]:
    """Per label and method: mean ± sd over runs of the mean and of the worst 5 %, and in how
    many runs it is at least the average blend's (same tail weight) and the better model's."""
    out = []
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        for method in mine[0]["methods"]:
            vals = [r["methods"][method] for r in mine]
            row = {"label": label, "method": method, "runs": len(mine),
                   "mean": spread([v["mean"] for v in vals]),
                   "worst 5%": spread([v["worst 5%"] for v in vals])}
            tag = method[method.find(" (tail weight"):] if " (tail weight" in method else ""
            ref = "average" + tag if tag and method.startswith("portfolio") else None
            if ref:
                row["mean ≥ average in"] = sum(
                    r["methods"][method]["mean"] >= r["methods"][ref]["mean"] - 1e-12 for r in mine)
                row["worst 5% ≥ average in"] = sum(
                    r["methods"][method]["worst 5%"] >= r["methods"][ref]["worst 5%"] - 1e-12 for r in mine)
            best_model = [max(r["methods"][m]["worst 5%"] for m in r["models"]) for r in mine]
            row["worst 5% ≥ better model in"] = sum(
                r["methods"][method]["worst 5%"] >= b - 1e-12 for r, b in zip(mine, best_model))
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    from ensemble.weights import BlendConfig
    from tpurank.atomic import write_json
    from tpurank.collections import get_collection
    from benchmarks.render.artifacts import bench_metadata

    args, tail_weights, command = oof_bench.parse_args(__doc__, argv, "0,0.5", "hedge")
    coll = get_collection("tile:xla")
    rows = []
    for label, data, work, seed in args.run:
        inputs = oof_bench.load(data, work, int(seed), coll)
        if inputs is None:
            raise SystemExit(f"{work}: no tile OOF predictions of gnn and lgbm")
        rows.append({"label": label, "data": Path(data).name, "seed": int(seed),
                     "graphs": len(inputs.truth), "models": inputs.names,
                     "methods": methods(inputs, tail_weights)})
        print(json.dumps(rows[-1]), flush=True)
    default = f" (tail weight {BlendConfig().tile_tail_weight:g})"  # per run: the default criterion only
    per_run = [{"label": r["label"], "data": r["data"], "seed": r["seed"], "graphs": r["graphs"],
                "method": m, **v} for r in rows for m, v in r["methods"].items()
               if m in r["models"] or m.endswith(default)]
    summary_columns = ["label", "method", "runs", "mean", "worst 5%", "mean ≥ average in",
                       "worst 5% ≥ average in", "worst 5% ≥ better model in"]
    write_json(args.out, {**bench_metadata(command), "raw": rows, "notes": NOTES, "tables": {
        "Mean ± sd over seeds (tile OOF score, nested)": {"rows": table(rows), "columns": summary_columns},
        "Per run (the default tile tail weight)": {
            "rows": per_run,
            "columns": ["label", "data", "seed", "graphs", "method", "mean", "worst 5%", "slots"]}}})
    for row in table(rows):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
