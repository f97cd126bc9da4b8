"""Real-shape benchmark: generate a kaggle-shaped dataset, then time ``features validate`` and
``features build`` on it, each in a child process whose peak RSS and open descriptors are
measured. Prints a table and records the run in ``benchmarks/scale.json`` (``{"runs": [...]}``, one entry per
graph fraction, config fraction and preset; ``make bench-scale``).

    python tests/bench/bench_scale.py [--graph-fraction 0.05] [--config-fraction 0.03125]
        [--jobs 2] [--data DIR] [--work DIR] [--out benchmarks/scale.json] [--keep]

Measured per stage: wall time, peak RSS of the stage's process tree (sampled from /proc every
0.1 s, plus ``getrusage(RUSAGE_CHILDREN)`` max RSS of the biggest single process), peak open file
descriptors of the tree (``/proc/<pid>/fd``), graphs/s and configs/s; then the size of WORK
(features, cache if any) against the input's size.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _children(pid: int) -> list[int]:
    out = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            kids = [int(x) for x in fh.read().split()]
    except OSError:
        return out
    for k in kids:
        out += _children(k)
    return out


def _rss_and_fds(pids: list[int]) -> tuple[int, int]:
    rss = fds = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as fh:
                rss += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
    return rss, fds


def run_stage(name: str, cmd: list[str]) -> dict[str, object]:
    """Run ``cmd``; wall time, peak tree RSS, peak tree fds, max single-process RSS."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak_rss = peak_fds = 0
    while proc.poll() is None:
        rss, fds = _rss_and_fds(_children(proc.pid))
        peak_rss, peak_fds = max(peak_rss, rss), max(peak_fds, fds)
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}): {' '.join(cmd)}\n{err[-4000:]}")
    max_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"stage": name, "command": " ".join(cmd), "wall_s": round(wall, 1),
            "peak_tree_rss_mb": round(peak_rss / 2**20, 1),
            "max_process_rss_mb_so_far": round(max_child / 2**20, 1),
            "peak_open_fds": peak_fds, "stdout_tail": out.strip().splitlines()[-8:]}


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
        stages.append(run_stage("validate", [py, "-m", "features", "validate", "--data", str(data),
                                             "--skip-bad", "--report", str(report),
                                             "--jobs", str(a.jobs)]))
        stages.append(run_stage("build", [py, "-m", "features", "build", "--data", str(data),
                                          "--work", str(work), "--preset", a.preset,
                                          "--jobs", str(a.jobs), "--progress", "false",
                                          "--skip-bad-report", str(report)]))
        for s in stages:
            if s["stage"] != "generate":
                s["graphs_per_s"] = round(n_files / s["wall_s"], 2)
                s["configs_per_s"] = round(n_configs / s["wall_s"], 1)
        sizes = {"input_bytes": input_bytes, "work_bytes": du(work),
                 "features_bytes": du(work / "features"), "cache_bytes": du(work / "cache")}
        sizes["work_over_input"] = round(sizes["work_bytes"] / max(1, input_bytes), 3)
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        result = {"dataset": {"scale": "kaggle", "graph_fraction": a.graph_fraction,
                              "config_fraction": a.config_fraction, "files": n_files,
                              "configs": n_configs, "generated": not a.data},
                  "preset": a.preset, "jobs": a.jobs, "stages": stages, "sizes": sizes,
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "python": platform.python_version()},
                  "git_sha": sha, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        from tpurank.atomic import write_json
        from tpurank.results import bench_metadata

        runs = json.loads(out.read_text()).get("runs", []) if out.is_file() else []
        same = (a.graph_fraction, a.config_fraction, a.preset)
        runs = [r for r in runs if (r["dataset"]["graph_fraction"], r["dataset"]["config_fraction"],
                                    r["preset"]) != same] + [result]
        write_json(out, {**bench_metadata("python tests/bench/bench_scale.py " + " ".join(sys.argv[1:])),
                         "about": "tests/bench/bench_scale.py: one entry per (graph fraction, config "
                                  "fraction, preset), the latest run of each", "runs": runs})
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
