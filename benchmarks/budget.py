"""Score vs time budget: the run planned to a budget (``make run BUDGET=S``, :mod:`ensemble.run`)
at several budgets and spend policies against today's quick run (``make run PRESET=quick``),
per data set and seed; writes ``benchmarks/budget.json`` (``make docs`` renders it into
BENCHMARKS.md, "A run planned to a time budget").

Every run is a fresh WORK (``--work-root``/<label>-s<seed>-<run>), so validate and the feature
build are inside its time, as for a user. Per run: its wall seconds against the budget, the GNN
seeds it trained, and the out-of-fold scores of the blend stage (each graph predicted by fold
models that never saw it, the blend nested leave-one-fold-out: no number is fitted on the graph
it scores; the sample's hidden test runtimes are never read). Per budgeted run also every
stage's planned, given and actual seconds (how good the estimates are).

    python -m benchmarks.budget --data tpu=data/sample-small --data alt=data/sample-alt \\
        --data kaggle=data/sample-kaggle15 --seeds 0,1 --budgets 900,1500,2700 \\
        --variants seeds,steps --quick [--threads 0] [--work-root work/bench-budget] \\
        [--out benchmarks/budget.json]

``--collect --earlier TAG=ROOT`` adds the rows of runs finished under another root by earlier
code (e.g. before a change of the plan), named ``<run> (TAG)``, beside today's.

``--collect --reblend`` first reruns the blend stage of every finished run with the current code
(a change of the blend measured on the models those runs trained; the row keeps the commit the
run started from and adds the blend's, ``blend_commit``, and its earlier scores, ``oof_at_run``).

A run whose WORK already holds its result (``bench_row.json``) is not run again, so the command
can be stopped and started again; ``--rerun`` reruns only the named runs (e.g. ``quick,2700-seeds``).
Runs can be split over several invocations at once (e.g. one data set each, ``--threads 1``, on a
2-core machine) into one ``--work-root``; ``--collect`` then writes the table of every finished
run of the grid without running anything (a run not finished is named and left out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: the stages of ``make run`` without a budget (Makefile ``run`` target), in order
QUICK_STAGES = ("validate", "features", "gnn-train", "gnn-predict", "lgbm-train", "lgbm-predict",
                "baseline-predict", "blend", "check", "report")
NOTES = ("oof final: the mean over the five collections of the blend's nested out-of-fold score "
         "(gnn, lgbm: each model's own out-of-fold score); wall: the run's seconds from validate "
         "to the report, with the feature build; over: wall / budget - 1. quick: `make run "
         "PRESET=quick` (the presets' time limits: GNN 900 s, LightGBM 240 s of training). "
         "commit: the code the run trained with; blend commit: the blend stage's (`--reblend`: "
         "rerun on the run's models with later code; oof final at run: the run's own blend). "
         "<budget>-seeds: `make run BUDGET=<budget>` (the GNN's time split into seeds). threads: every "
         "stage's threads (all: the machine's cores; 1: `--threads 1`, two runs at once on the 2 "
         "cores). load: the "
         "machine's 1-minute load average at the run's start and end (2 cores; other jobs share "
         "them). estimate now: the run's first GNN predict stage estimated by the planner of the "
         "artifact's commit from what the run measured before it planned (its probe, its feature "
         "store), with the probe's start-up.")


def stage_options(threads: int) -> dict[str, dict[str, Any]]:
    """Per-stage options of every run: ``--threads`` for the stages that have it (0: theirs)."""
    if threads <= 0:
        return {}
    return {"features": {"jobs": threads}, "gnn-train": {"threads": threads},
            "gnn-predict": {"predict_threads": threads}, "lgbm-train": {"threads": threads},
            "lgbm-predict": {"threads": threads}}


def environment(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    if threads > 0:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def oof_scores(work: Path) -> dict[str, Any]:
    """The blend stage's out-of-fold scores: per collection the blend (nested) and each model,
    and their means over collections (``final``)."""
    summary = json.loads((work / "blend" / "summary.json").read_text())
    per_coll: dict[str, dict[str, float]] = {}
    for name, s in summary["collections"].items():
        oof = s.get("oof")
        if not oof:
            raise ValueError(f"{work}: {name} has no out-of-fold blend (was it cross-validated?)")
        per_coll[name] = {"blend": oof["blend"]["scores"]["mean"],
                          **{m: v["mean"] for m, v in oof["models"].items()}}
    names = sorted({k for v in per_coll.values() for k in v})
    final = {m: sum(v[m] for v in per_coll.values()) / len(per_coll) for m in names}
    return {"collections": per_coll, "final": final, "runs": summary.get("runs", {})}


def run_quick(data: str, work: Path, seed: int, threads: int) -> dict[str, Any]:
    """Today's quick run: the Makefile's stages without a budget, each a process."""
    from ensemble.run import Subprocesses
    from ensemble.stages import Run

    run = Run(data=data, work=str(work), seed=seed, submission=str(work / "sub" / "submission.csv"),
              overrides=stage_options(threads))
    execute = Subprocesses(monitor_log=str(work / "stages.jsonl"))
    t0 = time.monotonic()
    for stage in QUICK_STAGES:
        execute(run, stage)
    return {"wall_s": time.monotonic() - t0}


def run_budget(data: str, work: Path, seed: int, threads: int, budget: float, spend: str) -> dict[str, Any]:
    """``python -m ensemble run --budget B`` (what ``make run BUDGET=B`` runs); ``spend``: only
    ``seeds``, the planner's one policy (``steps`` was removed: it lost to seeds)."""
    if spend != "seeds":
        raise ValueError(f"unknown variant {spend!r}: the planner spends the GNN's time on seeds")
    cmd = [sys.executable, "-m", "ensemble", "run", "--data", data, "--work", str(work),
           "--seed", str(seed), "--budget", str(budget),
           "--submission", str(work / "sub" / "submission.csv"),
           "--monitor-log", str(work / "stages.jsonl")]
    if threads > 0:
        cmd += ["--stage-options", json.dumps(stage_options(threads))]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=ROOT, env=environment(threads))
    wall = time.monotonic() - t0
    plan = json.loads((work / "plan" / "plan.json").read_text())
    seeds = sum(1 for s in plan["stages"] if s["name"].startswith("gnn-train"))
    return {"wall_s": wall, "plan": plan, "gnn_seeds": seeds}


def one_run(label: str, data: str, seed: int, name: str, args) -> dict[str, Any]:
    from tpurank.config import git_sha

    work = Path(args.work_root) / f"{label}-s{seed}-{name}"
    done = work / "bench_row.json"
    if done.is_file() and name not in args.rerun:
        row = json.loads(done.read_text())
        row = reblend(row, work) if args.reblend else row
        if args.collect and row.get("budget_s"):
            row = {**row, "predict_estimate_now": predict_estimate_now(row, work)}
        return row
    if args.collect:
        print(f"not finished, left out: {work}", flush=True)
        return None
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    load0 = os.getloadavg()[0]
    commit = git_sha()  # the code the run starts from (the artifact's own SHA is HEAD when written)
    if name == "quick":
        out = run_quick(data, work, seed, args.threads)
        budget, spend = None, None
    else:
        budget, spend = name.split("-", 1)
        budget = float(budget)
        out = run_budget(data, work, seed, args.threads, budget, spend)
    row = {"label": label, "data": data, "seed": seed, "run": name, "commit": commit, "budget_s": budget,
           "spend": spend, "threads": args.threads, "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
           **out, "oof": oof_scores(work)}
    done.write_text(json.dumps(row, indent=1))
    return row


def reblend(row: dict[str, Any], work: Path) -> dict[str, Any]:
    """``--reblend``: the finished run's blend stage again with this tree's code, on the models the
    run trained (its wall time, plan and models stay the run's own; the scores become the new
    blend's, and the run's own are kept as ``oof_at_run``). Written back to ``bench_row.json``."""
    from ensemble.run import Subprocesses
    from ensemble.stages import Run
    from tpurank.config import git_sha

    commit = git_sha()
    if not (work / "preds").is_dir():  # a row kept from a WORK since removed
        print(f"not reblended (no predictions under it): {work}", flush=True)
        return row
    if row.get("blend_commit") != commit:
        run = Run(data=row["data"], work=str(work), seed=row["seed"],
                  submission=str(work / "sub" / "submission.csv"))
        Subprocesses(monitor_log=str(work / "reblend.jsonl"))(run, "blend")
        row = {**row, "oof_at_run": row.get("oof_at_run", row["oof"]), "blend_commit": commit,
               "oof": oof_scores(work)}
        (work / "bench_row.json").write_text(json.dumps(row, indent=1))
    return row


def predict_estimate_now(row: dict[str, Any], work: Path) -> dict[str, Any] | None:
    """The first GNN predict stage of a finished budgeted run estimated again by this tree's
    planner, from what the run measured before it planned (its probe's reports and wall time,
    its feature store, its GNN's folds): how a change of the estimate would have planned that
    run. None when the WORK no longer holds them."""
    import glob

    from ensemble import plan as P
    from models.gnn.config import GnnConfig
    from tpurank.collections import parse_collections
    from tpurank.config import git_sha, load_run_config

    stages = {s["name"]: s for s in (row.get("plan") or {}).get("stages", [])}
    probe_dir, features = work / P.PROBE_DIR, work / "features"
    if "gnn-probe" not in stages or "gnn-predict" not in stages or not probe_dir.is_dir():
        return None
    reports, linked, colls = {}, {}, parse_collections("all")
    for coll in colls:
        found = sorted(glob.glob(str(probe_dir / "models" / "gnn" / coll.slug / "seed*" / "report.json")))
        if not found:
            continue
        reports[coll.name] = json.loads(Path(found[0]).read_text())
        nodes = P.graph_configs(probe_dir / "features", coll, "valid", "node_opcode")
        linked[coll.name] = {s: P.ProbeGraph(n, nodes[s]) for s, n in
                             P.graph_configs(probe_dir / "features", coll, "valid").items()}
    configs = sorted(glob.glob(str(work / "models" / "gnn" / "*" / "seed*" / "fold0" / "config.json")))
    if not reports or not configs:
        return None
    cfg = load_run_config(GnnConfig, configs[0])
    probe = P.read_probe(reports, linked, P.PROBE_CONFIGS, stages["gnn-probe"]["actual"])
    seconds, basis = P.probed_predict_estimate(features, colls, cfg.folds, cfg.oof_max_configs, probe,
                                               start=probe.overhead)
    return {"seconds": seconds, "basis": basis, "commit": git_sha()}


def earlier_rows(label: str, seed: int, name: str, earlier: list[str]) -> list[dict[str, Any]]:
    """``--earlier TAG=ROOT``: the run ``name`` of ``label`` and ``seed`` finished under each ROOT
    (earlier code: its row's commit says which), renamed ``<name> (TAG)``; ``TAG=FILE.json``: the
    rows of that earlier artifact (runs whose WORKs are gone), its ``name`` renamed likewise."""
    rows = []
    for spec in earlier:
        tag, root = spec.split("=", 1)
        if root.endswith(".json"):
            rows += [{**r, "run": f"{name} ({tag})" if r["run"] == name else r["run"]}
                     for r in json.loads(Path(root).read_text())["raw"]
                     if r["label"] == label and r["seed"] == seed and r["run"].split(" (")[0] == name]
            continue
        done = Path(root) / f"{label}-s{seed}-{name}" / "bench_row.json"
        if name != "quick" and done.is_file():
            rows.append({**json.loads(done.read_text()), "run": f"{name} ({tag})"})
    return rows


def spread(values: list[float]) -> str:
    import statistics

    if not values:
        return "—"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def layout_rows(rows: list[dict]) -> list[dict[str, Any]]:
    """Per data set and run: the blend's layout mean and layout collections out of fold, and the
    GNN's and LightGBM's layout means (issue 41's criteria are on these)."""
    out = []
    for label in sorted({r["label"] for r in rows}):
        for name in sorted({r["run"] for r in rows if r["label"] == label}, key=lambda n: (n != "quick", n)):
            runs = [r["oof"]["collections"] for r in rows if r["label"] == label and r["run"] == name]
            names = sorted(c for c in runs[0] if c.startswith("layout:"))

            def mean(model: str) -> str:
                return spread([sum(c[n][model] for n in names) / len(names) for c in runs])

            out.append({"label": label, "run": name, "seeds": len(runs), "blend layout mean": mean("blend"),
                        **{f"blend {n[7:]}": spread([c[n]["blend"] for c in runs]) for n in names},
                        "gnn layout mean": mean("gnn"), "lgbm layout mean": mean("lgbm")})
    return out


def tables(rows: list[dict]) -> dict[str, dict]:
    per_run = []
    for r in rows:
        over = None if r["budget_s"] is None else r["wall_s"] / r["budget_s"] - 1.0
        final = r["oof"]["final"]
        per_run.append({"label": r["label"], "seed": r["seed"], "run": r["run"],
                        "commit": str(r.get("commit") or "—")[:7],
                        "blend commit": str(r.get("blend_commit") or r.get("commit") or "—")[:7],
                        "budget s": r["budget_s"], "wall s": round(r["wall_s"]),
                        "over": None if over is None else f"{over:+.1%}",
                        "threads": r.get("threads") or "all", "gnn seeds": r.get("gnn_seeds", 1),
                        "oof final": round(final["blend"], 4),
                        "oof final at run": round(r.get("oof_at_run", r["oof"])["final"]["blend"], 4),
                        "oof gnn": round(final.get("gnn", float("nan")), 4),
                        "oof lgbm": round(final.get("lgbm", float("nan")), 4),
                        "load": " → ".join(str(v) for v in r["load"])})
    summary = []
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        quick = {r["seed"]: r["oof"]["final"]["blend"] for r in mine if r["run"] == "quick"}
        for name in sorted({r["run"] for r in mine}, key=lambda n: (n != "quick", n)):
            runs = [r for r in mine if r["run"] == name]
            finals = [r["oof"]["final"]["blend"] for r in runs]
            beats = [r["oof"]["final"]["blend"] >= quick[r["seed"]] for r in runs if r["seed"] in quick]
            overs = [r["wall_s"] / r["budget_s"] - 1.0 for r in runs if r["budget_s"]]
            summary.append({"label": label, "run": name, "seeds": len(runs),
                            "oof final": spread(finals),
                            "≥ quick in": f"{sum(beats)} of {len(beats)}" if name != "quick" and beats else "—",
                            "wall s (mean)": round(sum(r["wall_s"] for r in runs) / len(runs)),
                            "most over budget": f"{max(overs):+.1%}" if overs else "—"})
    stages = []
    for r in rows:
        for s in (r.get("plan") or {}).get("stages", []):
            stages.append({"label": r["label"], "seed": r["seed"], "run": r["run"], "stage": s["name"],
                           "planned s": round(s["planned"]), "given s": None if s["given"] is None else round(s["given"]),
                           "actual s": None if s["actual"] is None else round(s["actual"])})
    predict = []
    for r in rows:
        now = r.get("predict_estimate_now")
        stage = {s["name"]: s for s in (r.get("plan") or {}).get("stages", [])}.get("gnn-predict")
        if now and stage and stage["actual"] is not None:
            predict.append({"label": r["label"], "seed": r["seed"], "run": r["run"],
                            "planned at the run s": round(stage["planned"]),
                            "estimate now s": round(now["seconds"]), "actual s": round(stage["actual"]),
                            "estimate now / actual": round(now["seconds"] / stage["actual"], 2)})
    return {"OOF final vs budget (mean ± sd over seeds)": {"rows": summary},
            "Layout collections out of fold (mean ± sd over seeds)": {"rows": layout_rows(rows)},
            "Per run": {"rows": per_run},
            "Planned vs actual seconds per stage (budgeted runs)": {"rows": stages},
            "GNN predict: planned at the run, estimated now, actual": {"rows": predict}}


def comma_list(text: str) -> list[str]:
    """The non-empty items of a comma list ('' -> none)."""
    return [item for item in text.split(",") if item]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.render.artifacts import bench_metadata

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", required=True, help="LABEL=PATH of a data root (repeat)")
    p.add_argument("--seeds", default="0", help="comma list of seeds")
    p.add_argument("--budgets", default="900,1500,2700",
                   help="comma list of budgets in seconds ('' for none: the quick runs only)")
    p.add_argument("--variants", default="seeds", help="comma list of run variants (seeds: the planner's policy)")
    p.add_argument("--quick", action="store_true", help="also today's quick run (make run PRESET=quick)")
    p.add_argument("--threads", type=int, default=0, help="threads of every stage that has the option (0: theirs)")
    p.add_argument("--work-root", default="work/bench-budget")
    p.add_argument("--rerun", default="", help="comma list of run names to run again (quick, 900-seeds, ...)")
    p.add_argument("--collect", action="store_true",
                   help="run nothing: the table of the runs already finished under --work-root")
    p.add_argument("--reblend", action="store_true",
                   help="with --collect: rerun each finished run's blend stage with this tree's code first "
                        "(models, wall time and plan stay the run's; the row records both commits)")
    p.add_argument("--earlier", action="append", default=[], metavar="TAG=ROOT",
                   help="with --collect: also the budgeted runs finished under ROOT by earlier code, "
                        "as they are (not reblended), named '<run> (TAG)'; or the rows of an earlier "
                        "artifact ROOT.json (repeat)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "budget.json"))
    args = p.parse_args(argv)
    args.rerun = set(comma_list(args.rerun))
    names = (["quick"] if args.quick else []) + [f"{float(b):g}-{v}" for b in comma_list(args.budgets)
                                                  for v in comma_list(args.variants)]
    rows = []
    for spec in args.data:
        label, path = spec.split("=", 1)
        for seed in (int(s) for s in comma_list(args.seeds)):
            for name in names:
                row = one_run(label, path, seed, name, args)
                rows += ([row] if row is not None else []) + earlier_rows(label, seed, name, args.earlier)
                if not rows:
                    continue
                out = {**bench_metadata("python -m benchmarks.budget " + " ".join(argv or sys.argv[1:])),
                       "tables": tables(rows), "notes": NOTES, "raw": rows}
                Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(tables(rows)["OOF final vs budget (mean ± sd over seeds)"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
