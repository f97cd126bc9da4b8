"""Real-shape benchmark: generate a kaggle-shaped dataset, then time ``features validate`` and
``features build`` on it — or, with ``--run``, the whole ``make run`` — each stage in a child
process whose peak RSS and open descriptors are measured (:mod:`tpurank.monitor`). Prints a table
and records the run in ``benchmarks/scale.json`` (``{"runs": [...]}``, one entry per graph
fraction, config fraction, preset and pipeline; ``make bench-scale [RUN=1]``).

    python -m benchmarks.scale [--graph-fraction 0.05] [--config-fraction 0.03125]
        [--jobs 2] [--data DIR] [--work DIR] [--out benchmarks/scale.json] [--keep] [--run]
        [--budget S]

Measured per stage: wall time, peak RSS of the stage's process tree (sampled from /proc every
0.1–0.2 s; without ``--run`` also ``getrusage(RUSAGE_CHILDREN)`` max RSS of the biggest single
process), peak open file descriptors of the tree (``/proc/<pid>/fd``), graphs/s and configs/s of
validate and the feature build; then the size of WORK (features, models, predictions) against the
input's size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_stage(name: str, cmd: list[str]) -> dict[str, object]:
    """Run ``cmd``; wall time, peak tree RSS, peak tree fds, max single-process RSS."""
    from tpurank.monitor import monitored

    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    rec = monitored(cmd, interval=0.1, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
    out, err = rec.pop("proc").communicate()
    if rec["rc"] != 0:
        raise SystemExit(f"{name} failed ({rec['rc']}): {' '.join(cmd)}\n{err[-4000:]}")
    max_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"stage": name, "command": rec["command"], "wall_s": rec["wall_s"],
            "peak_tree_rss_mb": rec["peak_tree_rss_mb"],
            "max_process_rss_mb_so_far": round(max_child / 2**20, 1),
            "peak_open_fds": rec["peak_open_fds"], "stdout_tail": out.strip().splitlines()[-8:]}


SCORE_COLUMNS = ["graph_fraction", "commit", "collection", "OOF gnn", "OOF lgbm", "OOF blend",
                 "held-out gnn", "held-out lgbm", "held-out blend"]


def run_scores(work: Path) -> tuple[dict[str, float], list[dict[str, object]]]:
    """Per model, the mean over collections of the sample's hidden-test score; and per collection
    each model's out-of-fold and hidden-test score. From the blend summary and the newest
    ``ensemble report`` of a run (``make run`` writes its run folder beside the submission)."""
    from benchmarks.budget import oof_scores
    from benchmarks.render.artifacts import ArtifactError
    from benchmarks.render.capture import newest_report
    from benchmarks.render.scores import collection_mean

    try:
        scores = json.loads(newest_report(work).read_text()).get("hidden_test") or {}
        oof = oof_scores(work)["collections"]
    except (ArtifactError, FileNotFoundError):  # no report: the run did not get that far
        return {}, []
    means = {m: collection_mean(scores, m) for m in sorted({m for v in scores.values() for m in v})}
    rows = [{"collection": c, **{f"{kind} {m}": round(v[m], 4) for kind, v in
                                  (("OOF", oof.get(c, {})), ("held-out", scores[c]))
                                  for m in ("gnn", "lgbm", "blend") if m in v}} for c in scores]
    return {m: round(v, 4) for m, v in means.items() if v is not None}, rows


def read_log(log: Path) -> list[dict[str, object]]:
    """The records of a ``tpurank.monitor`` log; a torn last line (a killed monitor) is skipped."""
    records = []
    for line in log.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def make_run(data: Path, work: Path, preset: str, budget: float = 0) -> list[dict[str, object]]:
    """``make run`` on ``data`` (planned to ``budget`` seconds when > 0) with every stage under
    ``tpurank.monitor`` (``MON=1``); the stage records of ``WORK/stages.jsonl``, each with the
    make command that ran it."""
    log = work / "stages.jsonl"
    log.unlink(missing_ok=True)
    cmd = ["make", "run", f"DATA={data}", f"WORK={work}", f"PRESET={preset}", "MON=1",
           f"SUBMISSION={work / 'submission.csv'}", *([f"BUDGET={budget:g}"] if budget else [])]
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    records = read_log(log) if log.is_file() else []
    for r in records:
        r["make"] = " ".join(cmd)
    if rc != 0:
        done = ", ".join(f"{r['stage']} {r['wall_s']} s" for r in records)
        raise SystemExit(f"make run failed ({rc}) after: {done}")
    return records


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def counts(data: Path) -> tuple[int, int]:
    from features.io import discover, npz_headers

    files = discover(data)
    configs = sum(npz_headers(f.path)["config_runtime"].shape[0] for f in files)
    return len(files), configs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph-fraction", type=float, default=0.25)
    p.add_argument("--config-fraction", type=float, default=1 / 32)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--data", default="", help="existing kaggle-shaped root (skip generation)")
    p.add_argument("--work", default="")
    p.add_argument("--preset", default="quick")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "scale.json"))
    p.add_argument("--keep", action="store_true", help="keep the generated data and WORK")
    p.add_argument("--run", action="store_true",
                   help="after generation, the whole `make run` (every stage measured) instead of "
                        "validate + build alone")
    p.add_argument("--budget", type=float, default=0,
                   help="with --run: `make run BUDGET=S`, the run planned to S seconds")
    a = p.parse_args(argv)
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    data = Path(a.data) if a.data else tmp / "data"
    work = Path(a.work) if a.work else tmp / "work"
    stages = []
    try:
        if not a.data:
            stages.append(run_stage("generate", [py, "-m", "features", "sample", "--out", str(data),
                                                 "--scale", "kaggle", "--graph-fraction",
                                                 str(a.graph_fraction), "--config-fraction",
                                                 str(a.config_fraction), "--jobs", str(a.jobs)]))
        n_files, n_configs = counts(data)
        input_bytes = du(data / "npz_all")
        report = work / "validate_report.json"
        if a.run:
            stages += make_run(data, work, a.preset, a.budget)
        else:
            stages.append(run_stage("validate", [py, "-m", "features", "validate", "--data",
                                                 str(data), "--skip-bad", "--report", str(report),
                                                 "--jobs", str(a.jobs)]))
            stages.append(run_stage("build", [py, "-m", "features", "build", "--data", str(data),
                                              "--work", str(work), "--preset", a.preset,
                                              "--jobs", str(a.jobs), "--progress", "false",
                                              "--skip-bad-report", str(report)]))
        for s in stages:
            if s["stage"] in ("validate", "build", "features"):
                s["graphs_per_s"] = round(n_files / s["wall_s"], 2)
                s["configs_per_s"] = round(n_configs / s["wall_s"], 1)
        sizes = {"input_bytes": input_bytes, "work_bytes": du(work),
                 "features_bytes": du(work / "features"), "cache_bytes": du(work / "cache")}
        sizes["work_over_input"] = round(sizes["work_bytes"] / max(1, input_bytes), 3)
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        result: dict[str, object] = {"dataset": {"scale": "kaggle", "graph_fraction": a.graph_fraction,
                              "config_fraction": a.config_fraction, "files": n_files,
                              "configs": n_configs, "generated": not a.data},
                  "preset": a.preset, "jobs": a.jobs, "stages": stages, "sizes": sizes,
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "python": platform.python_version()},
                  "git_sha": sha, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        from tpurank.atomic import write_json
        from benchmarks.render.artifacts import bench_metadata

        runs = json.loads(out.read_text()).get("runs", []) if out.is_file() else []
        result["pipeline"] = ("make run" + (f" BUDGET={a.budget:g}" if a.budget else "")
                              if a.run else "validate + build")
        if a.run:
            result["hidden_test"], result["collections"] = run_scores(work)
        result["total_wall_s"] = round(sum(s["wall_s"] for s in stages if s["stage"] != "generate"), 1)
        same = (a.graph_fraction, a.config_fraction, a.preset, result["pipeline"])
        runs = [r for r in runs if (r["dataset"]["graph_fraction"], r["dataset"]["config_fraction"],
                                    r["preset"], r.get("pipeline", "validate + build")) != same] + [result]
        per_collection = [{"graph_fraction": r["dataset"]["graph_fraction"], "commit": r["git_sha"],
                           **row} for r in runs for row in r.get("collections", [])]
        write_json(out, {**bench_metadata("python -m benchmarks.scale " + " ".join(sys.argv[1:])),
                         "about": "benchmarks/scale.py: one entry per (graph fraction, config "
                                  "fraction, preset), the latest run of each", "runs": runs,
                         **({"tables": {"Per collection of each make run": {
                             "rows": per_collection, "columns": SCORE_COLUMNS}}} if per_collection else {})})
        print(f"kaggle-shaped data: {n_files} files, {n_configs} configs, "
              f"{input_bytes / 2**20:.1f} MiB (G={a.graph_fraction:g}, F={a.config_fraction:g})")
        for s in stages:
            extra = f"  {s.get('graphs_per_s', '')} graphs/s  {s.get('configs_per_s', '')} configs/s" \
                if "graphs_per_s" in s else ""
            print(f"{s['stage']:9s} {s['wall_s']:8.1f} s  peak RSS {s['peak_tree_rss_mb']:8.1f} MB  "
                  f"peak fds {s['peak_open_fds']:5d}{extra}")
        print(f"WORK {sizes['work_bytes'] / 2**20:.1f} MiB = {sizes['work_over_input']:.2f} x input "
              f"(features {sizes['features_bytes'] / 2**20:.1f} MiB, cache {sizes['cache_bytes'] / 2**20:.1f} MiB)"
              f" -> {out}")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
