"""The weights a GNN fold model keeps (``--keep best`` or ``last``), compared on finished runs:
writes ``benchmarks/keep.json`` (``make docs`` renders it into BENCHMARKS.md, "Weights kept").

A run is a finished WORK of ``benchmarks/budget.py`` (its ``bench_row.json`` names the
data, seed and run; its ``stages.jsonl`` the stages it ran). Each is copied twice under
``--work-root`` (the feature stores linked, not copied):

* ``best/<run>``: the models as the run trained them (``best.pt``: the best inner-valid score's);
* ``last/<run>``: every fold model's ``best.pt`` replaced by the weights of its ``last.pt`` (the
  final weights of the same training, which is what ``--keep last`` keeps), and the run's own
  ``gnn-predict`` stages rerun.

Then the blend stage of both copies with this tree's code. The training is the run's own in
both, so they differ only in the weights kept; every score is the blend stage's out-of-fold one
(each graph by fold models that never saw it, the blend nested), no test runtime is read.

    python -m benchmarks.keep work/bench-budget/* [--work-root work/bench-keep] \\
        [--out benchmarks/keep.json]

Run it from a directory whose ``data/`` holds the runs' data roots and with this tree on
``PYTHONPATH`` (the stages run as ``python -m ...`` there). A copy that holds its scores
(``keep_row.json``) is not redone, so the command can be stopped and started again.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

KEEPS = ("best", "last")
NOTES = ("best: the models as trained (best.pt: the best inner-valid score's weights); last: the "
         "same training's final weights (--keep last). oof final: the mean over the five "
         "collections of the blend stage's nested out-of-fold score (gnn, lgbm: each model's "
         "own). tile worst 5%: the mean of the worst 5 % of tile kernels, out of fold. last ≥ "
         "best in: in how many runs.")


def copy_run(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst`` with every ``features`` directory linked, not copied."""
    linked: list[Path] = []

    def skip(folder: str, names: list[str]) -> list[str]:
        if "features" in names:
            linked.append(Path(folder).relative_to(src) / "features")
            return ["features"]
        return []

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=skip, symlinks=True)
    for rel in linked:
        (dst / rel).symlink_to((src / rel).resolve())


def keep_last_weights(work: Path) -> int:
    """Every fold model's ``best.pt`` becomes its ``last.pt`` weights; returns how many."""
    from models.training import load_checkpoint, save_checkpoint

    lasts = sorted(work.glob("models/gnn/*/seed*/fold*/last.pt"))
    for last in lasts:
        state = load_checkpoint(last)
        best = last.with_name("best.pt")
        best.unlink()  # never write through into the run copied from
        save_checkpoint(best, {"model": state["model"], "model_args": state["model_args"],
                               "step": state["step"]})
    return len(lasts)


def stage_commands(work: Path, stage: str) -> list[list[str]]:
    """The run's ``stage`` commands (e.g. ``features``, or ``gnn-train`` / ``gnn-predict``: one
    per seed; the probe, which trains in ``plan/probe``, left out) as argument lists."""
    out = []
    for line in (work / "stages.jsonl").read_text().splitlines():
        record = json.loads(line)
        argv = shlex.split(record["command"])
        if record["stage"].startswith(stage) and "plan/probe" not in argv[argv.index("--work") + 1]:
            out.append(argv)
    return out


def with_options(argv: list[str], work: Path, **options: str) -> list[str]:
    """``argv`` run by this interpreter on ``work``, each ``--option value`` set (added or
    replaced)."""
    argv = [sys.executable] + argv[1:]
    argv[argv.index("--work") + 1] = str(work)
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return argv


def run_command(argv: list[str]) -> None:
    """Print ``argv`` (as the python command it is) and run it; a failure raises."""
    print("$ python " + " ".join(argv[1:]), flush=True)
    subprocess.run(argv, check=True)


def rerun_gnn_predict(src: Path, work: Path) -> None:
    """The run's own ``gnn-predict`` commands (each seed's), on the copy."""
    for argv in stage_commands(src, "gnn-predict"):
        seed = argv[argv.index("--seed") + 1]
        shutil.rmtree(work / "preds" / f"gnn@seed{seed}", ignore_errors=True)
        run_command(with_options(argv, work))


def blend(row: dict[str, Any], work: Path, stages: tuple[str, ...] = ("blend",)) -> None:
    from ensemble.run import Subprocesses
    from ensemble.stages import Run

    run = Run(data=row["data"], work=str(work), seed=row["seed"],
              submission=str(work / "sub" / "submission.csv"))
    execute = Subprocesses(monitor_log=str(work / "keep.jsonl"))
    for stage in stages:
        execute(run, stage)


def scores(work: Path) -> dict[str, Any]:
    """The blend stage's OOF scores (:func:`bench_budget.oof_scores`: per collection and their
    mean, ``final``) and the tile worst 5 % of the blend and of each model."""
    from benchmarks.budget import oof_scores
    from ensemble.weights import WORST_FRACTION, tail_mean

    summary = json.loads((work / "blend" / "summary.json").read_text())
    oof = summary["collections"]["tile:xla"]["oof"]
    tile = {m: tail_mean(np.array(list(r["per_graph"].values())), WORST_FRACTION)
            for m, r in {"blend": oof["blend"]["scores"], **oof["models"]}.items()}
    return {**oof_scores(work), "tile worst 5%": tile}


def one_copy(src: Path, root: Path, keep: str) -> dict[str, Any]:
    row = json.loads((src / "bench_row.json").read_text())
    name = f"{row['label']}-s{row['seed']}-{row['run']}"
    work = root / keep / name
    done = work / "keep_row.json"
    if done.is_file():
        return json.loads(done.read_text())
    copy_run(src, work)
    if keep == "last":
        keep_last_weights(work)
        rerun_gnn_predict(src, work)
    blend(row, work)
    out = {"label": row["label"], "seed": row["seed"], "run": row["run"], "keep": keep,
           "trained_at": row["commit"], "source": str(src), **scores(work)}
    done.write_text(json.dumps(out, indent=1))
    return out


def complete_pairs(rows: list[dict[str, Any]], field: str, names: tuple[str, ...]
                   ) -> list[tuple[tuple, dict[str, dict]]]:
    """``((label, seed, run), {name: row})`` of every run whose rows hold each of ``names`` in
    ``field``, sorted."""
    pairs: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        pairs.setdefault((r["label"], r["seed"], r["run"]), {})[r[field]] = r
    return [(key, p) for key, p in sorted(pairs.items()) if set(p) == set(names)]


def tables(rows: list[dict[str, Any]]) -> dict[str, dict]:
    """Per run: best vs last; per data set: means over runs and in how many last ≥ best."""
    per_run, by_label = [], {}
    for (label, seed, run), p in complete_pairs(rows, "keep", KEEPS):
        cells = {"label": label, "seed": seed, "run": run}
        for keep in KEEPS:
            cells[f"oof final ({keep})"] = round(p[keep]["final"]["blend"], 4)
            cells[f"gnn ({keep})"] = round(p[keep]["final"]["gnn"], 4)
            cells[f"gnn tile worst 5% ({keep})"] = round(p[keep]["tile worst 5%"]["gnn"], 3)
        per_run.append(cells)
        by_label.setdefault(label, []).append(p)
    summary = []
    for label, ps in sorted(by_label.items()):
        cells = {"label": label, "runs": len(ps)}
        for what, get in (("oof final", lambda r: r["final"]["blend"]),
                          ("gnn", lambda r: r["final"]["gnn"]),
                          ("gnn tile worst 5%", lambda r: r["tile worst 5%"]["gnn"]),
                          ("blend tile worst 5%", lambda r: r["tile worst 5%"]["blend"])):
            for keep in KEEPS:
                cells[f"{what} ({keep})"] = round(float(np.mean([get(p[keep]) for p in ps])), 4)
            cells[f"{what}: last ≥ best in"] = sum(get(p["last"]) >= get(p["best"]) - 1e-12 for p in ps)
        summary.append(cells)
    return {"Per data set: means over runs": {"rows": summary, "columns": columns(summary)},
            "Per run": {"rows": per_run, "columns": columns(per_run)}}


def columns(rows: list[dict[str, Any]]) -> list[str]:
    return list(rows[0]) if rows else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="finished WORKs of bench_budget.py (with bench_row.json)")
    p.add_argument("--work-root", default="work/bench-keep", help="where the two copies of each run go")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "keep.json"))
    args = p.parse_args(argv)
    command = "python -m benchmarks.keep " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    rows = [one_copy(Path(src), Path(args.work_root), keep) for src in args.runs for keep in KEEPS]
    write_artifact(args.out, command, rows, NOTES, tables(rows))
    return 0


def write_artifact(out: str, command: str, rows: list[dict[str, Any]], notes: str,
                   tabled: dict[str, dict]) -> None:
    """The benchmark artifact (provenance, raw rows, notes, tables); prints the per-data-set rows."""
    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    write_json(out, {**bench_metadata(command), "raw": rows, "notes": notes, "tables": tabled})
    for row in tabled["Per data set: means over runs"]["rows"]:
        print(row)


if __name__ == "__main__":
    sys.exit(main())
