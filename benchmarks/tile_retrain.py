"""The GNN's tile models retrained with this tree's code in finished runs, the rest of each run
kept: writes ``benchmarks/tile_retrain.json`` (``make docs`` renders it into BENCHMARKS.md,
"Tile models retrained").

A run is a finished WORK of ``benchmarks/budget.py`` (its ``bench_row.json`` names the
data, seed and run; its ``stages.jsonl`` the stages it ran). Each is copied twice under
``--work-root`` (the feature stores linked, not copied):

* ``as-trained/<run>``: the models as the run trained them;
* ``retrained/<run>``: for every GNN seed of the run, its ``tile:xla`` fold models deleted and
  trained again by the run's own ``gnn-train`` command restricted to ``--collections tile:xla``
  and given ``--train-args`` (the variant measured, e.g. ``--cross-attn false``: with tile:xla
  alone an option of every model is the tile models'), with the CPU seconds the run's tile fold
  models trained for (the sum of their reports' ``train_seconds``, ``--budget-clock cpu``), then
  that seed's tile predictions made again by the run's ``gnn-predict`` command restricted the
  same way. With ``--rebuild-features`` (a change to the tile features) the copy first gets
  its own feature store: the run's layout collections linked, ``tile-xla`` built again by the
  run's ``features`` command restricted to tile:xla. The layout models and every other model's
  predictions are the run's own.

Then the blend stage of both copies with this tree's code. Every score is the blend stage's
out-of-fold one (each graph by fold models that never saw it, the blend nested); no test
runtime is read. A change to the tile models alone is measured on the 24 budget runs this way,
at the compute each run gave its tile models, without training the layout models again.

    python -m benchmarks.tile_retrain work/bench-keep/last/* --train-args="--cross-attn false" \\
        [--work-root work/bench-tile] [--out benchmarks/tile_retrain.json]

Run it from a directory whose ``data/`` holds the runs' data roots and with this tree on
``PYTHONPATH``. A copy that holds its scores (``tile_row.json``) is not redone, so the command
can be stopped and started again.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from benchmarks.keep import (blend, columns, complete_pairs, copy_run, run_command,  # noqa: E402
                        scores, stage_commands, with_options, write_artifact)

COPIES = ("as-trained", "retrained")
TILE = "tile:xla"
NOTES = ("as-trained: the run's models; retrained: its GNN tile models trained again with this "
         "tree's code for the CPU seconds the run's tile models trained (tile seconds), every "
         "other model as trained. oof final: the mean over the five collections of the blend "
         "stage's nested out-of-fold score (gnn, lgbm: each model's own); gnn tile: the GNN's "
         "tile OOF score. tile worst 5%: the mean of the worst 5 % of tile kernels, out of fold "
         "(hedged: the blend's tile top 5). retrained ≥ as-trained in, hedged ≥ the better model in: "
         "in how many runs.")


def tile_seconds(model_dir: Path) -> float:
    """Training seconds of one seed's tile fold models (their reports' ``train_seconds``)."""
    reports = sorted(model_dir.glob("fold*/report.json"))
    if not reports:
        raise FileNotFoundError(f"{model_dir}: no fold reports")
    return float(sum(json.loads(r.read_text())["train_seconds"] for r in reports))


def rebuild_tile_features(work: Path) -> None:
    """The copy's own feature store: every collection linked to the run's, but ``tile-xla``
    built again by the run's ``features`` command restricted to tile:xla (this tree's code)."""
    own = work / "features"
    shared = own.resolve()
    own.unlink()
    own.mkdir()
    for coll in shared.iterdir():
        if coll.name != "tile-xla":
            (own / coll.name).symlink_to(coll)
    run_command(with_options(stage_commands(work, "features")[0], work, collections=TILE,
                             skip_bad_report=str(work / "validate_report.json")))


def retrain_tile(work: Path, train_args: list[str]) -> dict[str, dict[str, float]]:
    """Every GNN seed's tile models trained (with ``train_args`` added) and predicted again
    (module docstring); returns ``{seed: {"before": s, "after": s}}`` training seconds."""
    seconds = {}
    for train, predict in zip(stage_commands(work, "gnn-train"),
                              stage_commands(work, "gnn-predict")):
        seed = train[train.index("--seed") + 1]
        model_dir = work / "models" / "gnn" / "tile-xla" / f"seed{seed}"
        before = tile_seconds(model_dir)
        shutil.rmtree(model_dir)
        shutil.rmtree(work / "preds" / f"gnn@seed{seed}" / "tile-xla", ignore_errors=True)
        run_command(with_options(train, work, collections=TILE, time_budget=f"{before:.1f}",
                                 budget_clock="cpu") + train_args)
        run_command(with_options(predict, work, collections=TILE))
        seconds[seed] = {"before": round(before, 1), "after": round(tile_seconds(model_dir), 1)}
    return seconds


def one_copy(src: Path, root: Path, copy: str, train_args: list[str],
             rebuild_features: bool = False) -> dict[str, Any]:
    row = json.loads((src / "bench_row.json").read_text())
    name = f"{row['label']}-s{row['seed']}-{row['run']}"
    work = root / copy / name
    done = work / "tile_row.json"
    if done.is_file():
        return json.loads(done.read_text())
    copy_run(src, work)
    for stale in ("keep_row.json", "tile_row.json"):
        (work / stale).unlink(missing_ok=True)
    if copy == "retrained" and rebuild_features:
        rebuild_tile_features(work)
    seconds = retrain_tile(work, train_args) if copy == "retrained" else {}
    blend(row, work)
    out = {"label": row["label"], "seed": row["seed"], "run": row["run"], "copy": copy,
           "trained_at": row["commit"], "source": str(src), "tile seconds": seconds,
           "train args": train_args if copy == "retrained" else [],
           "tile features rebuilt": copy == "retrained" and rebuild_features, **scores(work)}
    done.write_text(json.dumps(out, indent=1))
    return out


MEASURES = (("oof final", lambda r: r["final"]["blend"]),
            ("gnn", lambda r: r["final"]["gnn"]),
            ("gnn tile", lambda r: r["collections"][TILE]["gnn"]),
            ("gnn tile worst 5%", lambda r: r["tile worst 5%"]["gnn"]),
            ("hedged tile worst 5%", lambda r: r["tile worst 5%"]["blend"]))


def hedge_holds(row: dict[str, Any]) -> bool:
    """The hedged tile top 5's worst 5 % is at least the better single model's."""
    tail = row["tile worst 5%"]
    return tail["blend"] >= max(tail["gnn"], tail["lgbm"]) - 1e-12


def tables(rows: list[dict[str, Any]]) -> dict[str, dict]:
    """Per run: as trained vs retrained; per data set: means over runs and in how many runs the
    retrained copy is at least the run as trained."""
    per_run, by_label = [], {}
    for (label, seed, run), p in complete_pairs(rows, "copy", COPIES):
        cells = {"label": label, "seed": seed, "run": run}
        for what, get in MEASURES:
            for copy in COPIES:
                cells[f"{what} ({copy})"] = round(get(p[copy]), 4)
        cells["tile seconds"] = " / ".join(f"{s['before']:.0f}→{s['after']:.0f}"
                                           for s in p["retrained"]["tile seconds"].values())
        per_run.append(cells)
        by_label.setdefault(label, []).append(p)
    summary = []
    for label, ps in sorted(by_label.items()):
        cells = {"label": label, "runs": len(ps)}
        for what, get in MEASURES:
            for copy in COPIES:
                cells[f"{what} ({copy})"] = round(float(np.mean([get(p[copy]) for p in ps])), 4)
            cells[f"{what}: retrained ≥ as-trained in"] = sum(
                get(p["retrained"]) >= get(p["as-trained"]) - 1e-12 for p in ps)
        for copy in COPIES:
            cells[f"hedged ≥ the better model in ({copy})"] = sum(hedge_holds(p[copy]) for p in ps)
        summary.append(cells)
    return {"Per data set: means over runs": {"rows": summary, "columns": columns(summary)},
            "Per run": {"rows": per_run, "columns": columns(per_run)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="finished WORKs of bench_budget.py (with bench_row.json)")
    p.add_argument("--work-root", default="work/bench-tile", help="where the two copies of each run go")
    p.add_argument("--train-args", default="",
                   help="options added to the tile models' retraining (the variant measured)")
    p.add_argument("--rebuild-features", action="store_true",
                   help="build the retrained copies' tile features again with this tree's code "
                        "(for a change to the tile features)")
    p.add_argument("--copies", default=",".join(COPIES),
                   help="which copies to make now (both are needed for the tables)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "tile_retrain.json"))
    args = p.parse_args(argv)
    command = ("python -m benchmarks.tile_retrain "
               + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])))
    wanted = args.copies.split(",")
    train_args = shlex.split(args.train_args)
    rows = [one_copy(Path(src), Path(args.work_root), copy, train_args, args.rebuild_features)
            for src in args.runs for copy in wanted]
    write_artifact(args.out, command, rows, NOTES, tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
