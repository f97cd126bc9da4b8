"""GNN variants under cross-validation (issue 12): one artifact from ``benchmarks.compare gnn --folds K``
reports, one per (physics, collection set).

Each report scored every (variant, seed) by its **out-of-fold** score (K fold models early-stopped
on inner slices of their own training graphs, each graph scored by the model that never saw it),
with the official-valid graphs' OOF score beside it. This collects them into rows and, per
(label, collection, variant), the mean ± sd over seeds, the change against the ``base`` variant
and in how many seeds the variant beat it.

    python -m benchmarks.compare gnn --folds 3 ... --variants "base:;tabular:tabular=true;..."   # per physics
    python -m benchmarks.gnn_cv --report tpu WORK/reports/compare-xla.json \\
        --report alt WORK2/reports/compare-xla.json ... [--base base] [--out benchmarks/gnn_cv.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def report_rows(label: str, path: Path) -> list[dict]:
    """One row per (collection, variant, seed) of a ``gnn_compare.json``."""
    data = json.loads(path.read_text())
    cfg = data["config"]
    rows = []
    for coll, row in data["results"].items():
        for name, entry in row["variants"].items():
            for seed, run in zip(data["seeds"], entry["runs"]):
                rows.append({"physics": label, "data": Path(cfg["data"]).name, "collection": coll,
                             "variant": name, "overrides": ",".join(f"{k}={v}" for k, v in
                                                                    data["variants"][name].items()),
                             "seed": seed, "oof": run["score"], "official_valid": run.get("valid"),
                             "oof_low_decile": low_decile(run.get("per_graph")),
                             "train_s": round(run["seconds"], 1), "folds": cfg["folds"],
                             "steps": cfg["steps"],
                             "steps_trained": steps_trained(path, cfg, coll, name, seed)})
    return rows


def steps_trained(report: Path, cfg: dict, collection: str, variant: str, seed: int) -> float | None:
    """Mean training steps of the (variant, seed)'s fold models, from their own reports (the
    compare's WORK, resolved against the current directory or the report's run directory)."""
    from models.gnn.config import GnnConfig
    from tpurank.collections import get_collection

    for work in (cfg["work"], str(report.parents[1])):
        model = GnnConfig(work=work, tag=variant, seed=seed).model_dir(get_collection(collection))
        found = sorted(model.glob("fold*/report.json"))
        if found:
            return float(np.mean([json.loads(f.read_text())["last_step"] for f in found]))
    return None


def low_decile(per_graph: dict[str, float] | None) -> float | None:
    """Mean of the lowest tenth (at least one) of the per-graph OOF scores: the tail."""
    if not per_graph:
        return None
    scores = np.sort(np.asarray(list(per_graph.values()), dtype=float))
    return float(scores[:max(1, len(scores) // 10)].mean())


def _cell(values: list[float]) -> str:
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.3f} ± {sd:.3f}"


def summary(rows: list[dict], base: str) -> list[dict]:
    """Per (physics, collection, variant): OOF and official valid mean ± sd over seeds, the OOF
    change against ``base`` (mean of per-seed differences) and the seeds it beat ``base`` in."""
    out = []
    keys = sorted({(r["physics"], r["collection"]) for r in rows})
    for physics, coll in keys:
        mine = [r for r in rows if r["physics"] == physics and r["collection"] == coll]
        ref = {r["seed"]: r["oof"] for r in mine if r["variant"] == base}
        for name in dict.fromkeys(r["variant"] for r in mine):
            runs = [r for r in mine if r["variant"] == name]
            diffs = [r["oof"] - ref[r["seed"]] for r in runs if r["seed"] in ref]
            row = {"physics": physics, "collection": coll, "variant": name,
                   "OOF (mean ± sd over seeds)": _cell([r["oof"] for r in runs]),
                   "official valid": _cell([r["official_valid"] for r in runs
                                            if r["official_valid"] is not None] or [np.nan]),
                   "OOF lowest decile": _cell([r["oof_low_decile"] for r in runs
                                               if r.get("oof_low_decile") is not None] or [np.nan]),
                   "seeds": len(runs)}
            steps = [r["steps_trained"] for r in runs if r.get("steps_trained") is not None]
            if steps:
                row["steps a fold model"] = f"{np.mean(steps):.0f}"
            if name != base and diffs:
                row[f"OOF − {base}"] = f"{np.mean(diffs):+.3f}"
                row[f"beats {base} in"] = f"{sum(d > 0 for d in diffs)} of {len(diffs)}"
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", nargs=2, action="append", required=True, metavar=("LABEL", "JSON"),
                   help="a label (e.g. the physics) and a gnn_compare.json written with --folds")
    p.add_argument("--base", default="base", help="the variant the others are compared with")
    p.add_argument("--commands", default="", help="the compare commands that wrote the reports "
                                                  "(recorded in the artifact's notes)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "gnn_cv.json"), help="artifact written")
    a = p.parse_args(argv)
    rows = [r for label, path in a.report for r in report_rows(label, Path(path))]
    table = summary(rows, a.base)
    command = "python -m benchmarks.gnn_cv " + " ".join(
        f"--report {label} {Path(path).name}" for label, path in a.report)
    notes = f"Reports written by: {a.commands}" if a.commands else ""
    # per-seed rows are kept in the artifact (``per_seed``) but only the summary is rendered
    write_json(a.out, {**bench_metadata(command), "notes": notes,
                       "tables": {"Per variant (mean ± sd over seeds)": {"rows": table, "columns": [
                           "physics", "collection", "variant", "seeds", "OOF (mean ± sd over seeds)",
                           f"OOF − {a.base}", f"beats {a.base} in", "OOF lowest decile",
                           "official valid", "steps a fold model"]}},
                       "per_seed": rows})
    for row in table:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
