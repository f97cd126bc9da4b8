"""LightGBM's tile model with and without the heuristic columns (``f_heur_cost`` /
``f_heur_rank``, :mod:`features.heuristic`), out of fold on the generated samples and on the real
TPU kernels (issue 22).

The heuristic's VMEM-spill term counts a reduction's reads as the tpu generator's tile cost does
(``features/sample/tile_cost.py``), so its worth on that physics proves little; the other physics
(``alt``) and the 15 real kernels (``python -m ensemble real``) are the evidence that does not
share its authors' cost model. Per data set and seed, two tile feature stores
(``features build --collections tile:xla --heuristic true|false``) and, on each, the quick
preset's LightGBM tile training (``models.lgbm train --preset quick --collections tile:xla``,
its 3-fold cross-validation, one thread): the runs the budget benchmark's LightGBM stage makes,
restricted to tile. The GNN's tile features never had the columns (BENCHMARKS.md, "Tile models
with the heuristic columns").

    python -m benchmarks.lgbm_heuristic --data tpu=data/sample-small \\
        --data alt=data/sample-alt --data kaggle=data/sample-kaggle15 --seeds 0,1 \\
        [--work-root work/bench-lgbm-heur] [--out benchmarks/lgbm_heuristic.json]

Finished runs are reused (each WORK's ``row.json``); nothing reads a test runtime.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import oof as oof_bench  # noqa: E402

from benchmarks.keep import columns, run_command, write_artifact  # noqa: E402

ROOT = oof_bench.ROOT
HEURISTIC = ("with", "without")
NOTES = ("with / without: LightGBM's tile rows with or without f_heur_cost / f_heur_rank (the "
         "features build's --heuristic true / false). oof: the tile score out of fold (3 folds) on "
         "the sample's labelled kernels; worst 5%: the mean of the worst 5 % of kernels. real: "
         "the 15 real TPU kernels (`python -m ensemble real`, the 3 fold models averaged; > 5 "
         "configs: the 8 kernels a ranking can get wrong; the references: random rankings and the "
         "heuristic alone). without ≥ with in: in how many seeds.")


def build_features(data: str, out: Path, heuristic: str) -> None:
    if not (out / "tile-xla" / "build.json").is_file():
        run_command([sys.executable, "-m", "features", "build", "--data", data, "--work", str(out.parent),
                     "--collections", "tile:xla", "--heuristic", heuristic, "--out", str(out)])


def real_scores(work: Path) -> dict[str, Any]:
    """LightGBM's tile scores on the real kernels (``ensemble real``'s report)."""
    run_command([sys.executable, "-m", "ensemble", "real", "--work", str(work), "--models", "lgbm",
                 "--skip-missing"])
    report = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    tile = {r["method"]: r for r in report["results"] if r["collection"] == "tile:xla"}
    return {"real": tile["lgbm"]["score"], "real > 5 configs": tile["lgbm"]["score_gt5"],
            "real per kernel": tile["lgbm"]["per_graph"],
            "real references": {m: {"real": r["score"], "real > 5 configs": r["score_gt5"],
                                    "real per kernel": r["per_graph"]}
                                for m, r in tile.items() if m != "lgbm"}}


def one_run(label: str, data: str, seed: int, heuristic: str, root: Path) -> dict[str, Any]:
    """Train (if not done) and score one LightGBM tile run; its row is kept as ``row.json``."""
    from tpurank.collections import get_collection

    work = root / label / f"{heuristic}-s{seed}"
    done = work / "row.json"
    if done.is_file():
        return json.loads(done.read_text())
    features = root / label / f"features-{heuristic}"
    build_features(data, features, "true" if heuristic == "with" else "false")
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "features").exists():
        (work / "features").symlink_to(features.resolve())
    run_command([sys.executable, "-m", "models.lgbm", "train", "--data", data, "--work", str(work),
                 "--preset", "quick", "--seed", str(seed), "--collections", "tile:xla", "--threads", "1"])
    coll = get_collection("tile:xla")
    inputs = oof_bench.load(data, str(work), seed, coll, models="lgbm")
    if inputs is None:
        raise SystemExit(f"{work}: LightGBM wrote no tile OOF predictions")
    oof = oof_bench.summarise(oof_bench.per_graph(coll, inputs.normed[0], inputs.truth))
    row = {"label": label, "data": data, "seed": seed, "heuristic": heuristic,
           "oof": oof["mean"], "oof worst 5%": oof["worst 5%"], **real_scores(work)}
    done.write_text(json.dumps(row, indent=1))
    return row


def tables(rows: list[dict[str, Any]]) -> dict[str, dict]:
    """Per data set: the means with and without and in how many seeds without ≥ with; per run (and
    the real kernels' references); per run the score of each real kernel a ranking can get wrong."""
    metrics = ("oof", "oof worst 5%", "real", "real > 5 configs")
    pairs: dict[tuple[str, int], dict[str, dict]] = {}
    for r in rows:
        pairs.setdefault((r["label"], r["seed"]), {})[r["heuristic"]] = r
    pairs = {k: p for k, p in pairs.items() if set(p) == set(HEURISTIC)}
    summary = []
    for label in sorted({k[0] for k in pairs}):
        ps = [p for (lab, _), p in sorted(pairs.items()) if lab == label]
        cells: dict[str, Any] = {"label": label, "seeds": len(ps)}
        for m in metrics:
            for h in HEURISTIC:
                cells[f"{m} ({h})"] = round(float(np.mean([p[h][m] for p in ps])), 4)
            cells[f"{m}: without ≥ with in"] = sum(p["without"][m] >= p["with"][m] - 1e-12 for p in ps)
        summary.append(cells)
    per_run = [{"label": r["label"], "seed": r["seed"], "heuristic": r["heuristic"],
                **{m: round(r[m], 4) for m in metrics}} for r in sorted(
                    rows, key=lambda r: (r["label"], r["seed"], r["heuristic"]))]
    random = rows[0]["real references"]["random"]["real per kernel"]
    kernels = sorted(k for k, v in random.items() if v < 1.0)  # the kernels with > 5 configs
    references = [{"label": m, "seed": "—", "heuristic": "—", **{k: "—" for k in metrics[:2]},
                   **{k: round(v, 4) for k, v in ref.items() if k in metrics}}
                  for m, ref in rows[0]["real references"].items()]
    per_run += references
    per_kernel = [{"label": r["label"], "seed": r["seed"], "heuristic": r["heuristic"],
                   **{k.split("__")[-1]: round(r["real per kernel"][k], 3) for k in kernels}}
                  for r in sorted(rows, key=lambda r: (r["label"], r["seed"], r["heuristic"]))
                  + [dict(ref, label=m, seed="—", heuristic="—")
                     for m, ref in rows[0]["real references"].items()]]
    return {"Per data set: means over runs": {"rows": summary, "columns": columns(summary)},
            "Per run": {"rows": per_run, "columns": columns(per_run)},
            "Real kernels with > 5 configs (tile score per kernel)": {
                "rows": per_kernel, "columns": columns(per_kernel)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", action="append", required=True, metavar="LABEL=ROOT",
                   help="a data set: its label (the physics) and root; repeated")
    p.add_argument("--seeds", default="0,1", help="comma list of the LightGBM runs' seeds")
    p.add_argument("--work-root", default="work/bench-lgbm-heur", help="feature stores and runs")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "lgbm_heuristic.json"))
    args = p.parse_args(argv)
    command = ("python -m benchmarks.lgbm_heuristic "
               + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    rows = [one_run(label, data, seed, h, Path(args.work_root))
            for label, data in (d.split("=", 1) for d in args.data) for seed in seeds for h in HEURISTIC]
    write_artifact(args.out, command, rows, NOTES, tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
