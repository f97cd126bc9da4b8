"""How the GNN's layout fold models train, measured as arms on finished quick runs: writes
``benchmarks/gnn_fold_training.json`` (``make docs`` renders it into BENCHMARKS.md, "How the
GNN's fold models train").

An arm retrains the GNN fold models of a finished quick run of :mod:`benchmarks.budget` (or of
any quick ``make run`` WORK, e.g. ``benchmarks.scale --run --keep``'s, given ``--label --data
--seed``; its feature store linked; its LightGBM and baseline predictions kept) with one option
set, then reruns the predict, blend and report stages:

* every fold model gets the quick preset's share (``make run PRESET=quick``: 66.7 s a layout one,
  33.3 s a tile one), counted in CPU seconds on one thread (``--budget-clock cpu --threads 1``):
  two arms at once on 2 cores get the same compute;
* every score is the blend stage's out-of-fold one (each graph by fold models that never saw it,
  the blend nested), and the report's hidden-test one where a generated sample has it (read only
  to be shown). The learning curves are those of the report.

    python -m benchmarks.fold_training train --source work/bench/tpu-s0-quick --arm base \\
        [--root work/bench-folds] [-- GNN OPTIONS ...]
    python -m benchmarks.fold_training collect [--root work/bench-folds] \\
        [--earlier benchmarks/gnn_fold_training.json --retire ARM,...] \\
        [--out benchmarks/gnn_fold_training.json]

``train`` is resumable (a trained model is not trained again); run two at once with one thread
each, from the directory the runs were made in (their fold manifests name relative paths).
``collect`` reads every arm under ``--root`` (``<label>-s<seed>-<arm>``) and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.keep import blend, run_command

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = "layout:xla:default,layout:xla:random,layout:nlp:default,layout:nlp:random"
#: quick's 900 s: 4 layout collections at weight 1 a fold model, tile at 0.5 (each call its share;
#: the same split at 3 and 5 folds)
SHARES = ((LAYOUT, 800), ("tile:xla", 100))
KEPT = ("preds/lgbm@seed{s}", "preds/baseline", "models/lgbm")  # what the blend reads of the source
NOTES = ("Data: tpu-2700, alt-2700: the 45-minute runs (`make run BUDGET=2700`) at c92b298 of "
         "data/sample-small (tpu) and data/sample-alt (alt), seeds 0 and 1 "
         "(`benchmarks/budget_layout.json` at 2199178), as sources; tpu-q, alt-q: the quick "
         "`make run` of the same samples at e0bfec1 (`benchmarks.budget --quick --threads 1`, seeds 0 "
         "and 1) "
         "as sources; g1, the real shape (G=1, F=1/32, tpu "
         "physics), the quick `make run` of `benchmarks.scale --run --keep` at ded2b43 (seed 0) as "
         "source; base and folds2 also at seed 1, LightGBM retrained at seed 1 with their fold "
         "count. Arms (earlier ones, and the rows of lean, patterns, heur2, attn, heur, twins, pair, "
         "close, gate1, h128, gap, ema0.1, drop0.2, lprod, wd0.05, noxattn, f5drop, gsp1, gsp0.5, "
         "g1's drop0.1, warm, l2, js, cps128, g13, idrop, nosum, g9 and mm, are in git history), "
         "each against base, the defaults: folds5 `--folds 5`, LightGBM "
         "retrained with 5 folds too (`python -m models.lgbm train|predict --folds 5`, one thread), "
         "the GNN at the same 800 s layout share (40 s a fold model, each on 4/5 of the labelled "
         "graphs instead of 2/3); folds2 (g1) `--folds 2` likewise (100 s a fold model, each on half "
         "the graphs); drop0.1 `--dropout 0.1` (full's value, and main's regime on the samples). "
         "Against drop0.1, with `--dropout 0.1` too (seed 0 unless said): h32 (seeds 0, 1) "
         "`--hidden 32`, half the width; at tpu-q and alt-q (seeds 0, 1), "
         "psz (23a8566, the default since f5c47b8) `--head-sizes true`, per "
         "configurable node, config and tensor its log padded elements, the same where the config "
         "sets the layout, and their excess over the all-default config's; against psz: shares "
         "(2171cd1, the default since d64284e) `--head-shares true`, per configurable node, config "
         "and tensor its padded elements over the all-default config's mean tensor, the same where "
         "the config sets the layout, and there its default's. "
         "At g1, against folds2 and with its LightGBM: h32 `--folds 2 "
         "--hidden 32`. Each arm retrains every GNN fold "
         "model of a finished run with one option set, at the quick share (66.7 CPU s a layout fold "
         "model, 33.3 a tile one, one thread, two to ten arms at once); the run's LightGBM is "
         "kept. Scores: the blend stage's nested out-of-fold score (gnn: the GNN's own); held-out: "
         "the report's hidden-test score (never fitted on); tile worst 5%: the mean of the worst 5 % "
         "of tile kernels; mean ± sd over seeds; Δ: the arm minus the arm it builds on, seed by seed, "
         "averaged. "
         "climbing: layout fold models whose last watched score beat all their earlier ones; last "
         "quarter: the last score minus the best before 75 % of the time (on held-out graphs).")


def train(source: Path, arm: str, root: Path, options: list[str], against: str = "base",
          run: dict[str, Any] | None = None) -> Path:
    """One arm on one finished run (see the module docstring); returns its WORK. ``run``
    (label, data, seed) describes a source that ``benchmarks.budget`` did not write."""
    row = run or json.loads((source / "bench_row.json").read_text())
    work = root / f"{row['label']}-s{row['seed']}-{arm}"
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "features").exists():
        (work / "features").symlink_to((source / "features").resolve())
    shutil.copy(source / "validate_report.json", work / "validate_report.json")
    common = ["--work", str(work), "--data", row["data"], "--preset", "quick",
              "--seed", str(row["seed"])]
    for collections, seconds in SHARES:
        run_command([sys.executable, "-m", "models.gnn", "train", *common, "--collections",
                     collections, "--threads", "1", "--budget-clock", "cpu", "--time-budget",
                     str(seconds), "--regime", "false", *options])
    run_command([sys.executable, "-m", "models.gnn", "predict", *common, "--collections", "all",
                 "--predict-threads", "1", "--regime", "false", *options])
    for rel in KEPT:
        rel = rel.format(s=row["seed"])
        if not (work / rel).exists():
            shutil.copytree(source / rel, work / rel, dirs_exist_ok=True)
    blend(row, work, ("blend", "report"))
    (work / "arm.json").write_text(json.dumps({**row, "arm": arm, "options": options,
                                               "against": against, "source": str(source)}, indent=1))
    return work


def arm_row(work: Path) -> dict[str, Any]:
    """An arm's OOF scores and its layout learning curves' summary."""
    from benchmarks.keep import scores
    from ensemble.report import curve_summary, learning_curves

    meta = json.loads((work / "arm.json").read_text())
    curves = curve_summary({c: v for c, v in learning_curves(work).items()
                            if c.startswith("layout")})
    return {"label": meta["label"], "seed": meta["seed"], "arm": meta["arm"],
            "against": meta.get("against", "base"),
            "options": " ".join(meta["options"]), **scores(work), "held-out": held_out(work),
            "climbing": sum(s["climbing"] for s in curves.values()),
            "models": sum(s["models"] for s in curves.values()),
            "last quarter": float(np.mean([s["late_gain"] for s in curves.values()]))}


def held_out(work: Path) -> dict[str, dict[str, float]]:
    """The report's hidden-test scores (generated samples only; never used to choose anything):
    per collection and model; empty before the report stage ran."""
    from benchmarks.render.artifacts import ArtifactError
    from benchmarks.render.capture import newest_report

    try:
        return json.loads(newest_report(work / "sub").read_text())["hidden_test"]
    except ArtifactError:
        return {}


def tables(rows: list[dict[str, Any]]) -> dict[str, dict]:
    """One row per data set and arm: the GNN's OOF per layout collection, the GNN's and the
    blend's layout mean and tile (mean ± sd over seeds; Δ: against the arm it builds on, seed by
    seed) and the layout learning curves."""
    table = []
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        colls = sorted(c for c in mine[0]["collections"] if c.startswith("layout"))
        for arm in sorted({r["arm"] for r in mine}, key=lambda a: (a != "base", a)):
            runs = [r for r in mine if r["arm"] == arm]
            base = {r["seed"]: r for r in mine if r["arm"] == runs[0].get("against", "base")}
            cells: dict[str, Any] = {"data": label, "arm": arm, "seeds": len(runs)}
            getters = {f"gnn {c.split(':', 1)[1]}": (lambda r, c=c: r["collections"][c]["gnn"])
                       for c in colls}
            for model in ("gnn", "blend"):
                getters[f"{model} layout mean"] = (lambda r, m=model: float(np.mean(
                    [r["collections"][c][m] for c in colls])))
                getters[f"{model} tile"] = lambda r, m=model: r["collections"]["tile:xla"][m]
            getters["blend tile worst 5%"] = lambda r: r["tile worst 5%"]["blend"]
            if all(r["held-out"] for r in runs):  # the sample's hidden test, never fitted on
                for model in ("gnn", "blend"):
                    getters[f"{model} layout held-out"] = (lambda r, m=model: float(np.mean(
                        [r["held-out"][c][m] for c in colls])))
            for name, get in getters.items():
                vals = [get(r) for r in runs]
                cells[name] = f"{np.mean(vals):.3f}±{np.std(vals):.3f}"
                compared = name.startswith(("gnn layout", "gnn tile", "blend"))
                if base and runs[0] is not base.get(runs[0]["seed"]) and compared:
                    delta = [get(r) - get(base[r["seed"]]) for r in runs if r["seed"] in base]
                    cells[name] += f" (Δ {np.mean(delta):+.3f})"
            climbing, models = (sum(r[k] for r in runs) for k in ("climbing", "models"))
            cells["climbing"] = f"{climbing}/{models}"
            cells["last quarter"] = f"{np.mean([r['last quarter'] for r in runs]):+.3f}"
            table.append(cells)
    columns = list(dict.fromkeys(k for row in table for k in row))
    table = [{k: row.get(k, "—") for k in columns} for row in table]
    return {"Out of fold, per data set and arm": {"rows": table, "columns": columns}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="one arm on one finished quick run")
    t.add_argument("--source", type=Path, required=True, help="a finished quick run (WORK)")
    t.add_argument("--arm", required=True, help="the arm's name (base: the defaults)")
    t.add_argument("--against", default="base", help="the arm its Δ is taken against")
    t.add_argument("--label", help="a source without bench_row.json: its data set's name")
    t.add_argument("--data", help="a source without bench_row.json: its data root")
    t.add_argument("--seed", type=int, default=0, help="a source without bench_row.json: its seed")
    t.add_argument("options", nargs="*", help="GNN options of the arm (after --)")
    c = sub.add_parser("collect", help="write the artifact from every arm under --root")
    c.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gnn_fold_training.json")
    c.add_argument("--earlier", type=Path, help="also the rows of this earlier artifact (arms whose WORKs "
                   "are gone), but for the arms under --root")
    c.add_argument("--retire", default="", help="comma list of arms whose earlier rows are dropped "
                   "(their verdicts stay in BENCHMARKS' text; the rows stay in git history)")
    for q in (t, c):
        q.add_argument("--root", type=Path, default=Path("work/bench-folds"),
                       help="the arms' WORKs")
    args = p.parse_args(argv)
    if args.command == "train":
        run = {"label": args.label, "data": args.data, "seed": args.seed} if args.label else None
        train(args.source, args.arm, args.root, args.options, args.against, run)
        return 0
    from benchmarks.render.artifacts import bench_metadata
    from tpurank.atomic import write_json

    rows = [arm_row(w.parent) for w in sorted(args.root.glob("*/arm.json"))]
    if args.earlier:
        mine = {(r["label"], r["seed"], r["arm"]) for r in rows}
        retired = set(filter(None, args.retire.split(",")))
        rows += [r for r in json.loads(args.earlier.read_text())["raw"]
                 if (r["label"], r["seed"], r["arm"]) not in mine and r["arm"] not in retired]
    command = "python -m benchmarks.fold_training " + " ".join(argv or sys.argv[1:])
    write_json(args.out, {**bench_metadata(command), "raw": rows, "notes": NOTES,
                          "tables": tables(rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
