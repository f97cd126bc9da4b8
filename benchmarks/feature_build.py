"""Feature-build benchmark. ``python -m benchmarks.feature_build`` (``quick``, part of ``make bench``):
the generated tiny sample written, then built with the quick preset (cold, then an unchanged rerun);
``big``: the two cases below.

1. One huge layout graph — 40k nodes, 100k configs x 500 configurable nodes (a 3.4 GB npz written
   by ``write_layout_npz`` of :mod:`benchmarks.synthetic`) — built as a *train* graph (so config dedup runs)
   with the full preset: cold, again with the features deleted (the npz in the page cache), and
   an unchanged rerun (feature-store hit). Each run is a fresh process; its peak RSS is
   reported. Targets: < 4 GB peak RSS, < 2 min.
2. The generated sample (``data/sample-small``) when present: all collections, all cores.

The big file is kept in ``$TPURANK_BENCH_DIR`` (default ``/tmp/tpurank-bench-features``) and reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(os.environ.get("TPURANK_BENCH_DIR", "/tmp/tpurank-bench-features"))
NODES, CONFIGS, CONFIG_NODES = 40_000, 100_000, 500

# run one build in a fresh interpreter and report its own wall time and peak RSS
RUNNER = """
import json, resource, sys, time
from features.build import main
start = time.perf_counter()
main(sys.argv[1:])
peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
           resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print("BENCH " + json.dumps({"seconds": time.perf_counter() - start, "peak_rss_gib": peak / 2**20}))
"""


def measured_build(args: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", RUNNER, *args, "--progress", "false"], cwd=REPO,
                         check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if not line.startswith("BENCH "):
            print("   ", line)
    return json.loads(next(line for line in out.stdout.splitlines() if line.startswith("BENCH "))[6:])


def big_root() -> Path:
    from benchmarks.synthetic import write_layout_npz
    from tpurank.collections import get_collection

    root = BENCH_DIR / f"root-{NODES}-{CONFIGS}-{CONFIG_NODES}"
    path = get_collection("layout:xla:random").split_dir(root, "train") / "big.npz"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"writing {path} (once; reused by later runs)", flush=True)
        write_layout_npz(path, NODES, CONFIGS, CONFIG_NODES, seed=0)
    return root


def report(name: str, r: dict[str, float], graphs: int, configs: int) -> None:
    s = r["seconds"]
    print(f"{name:34s} {s:7.1f} s  peak RSS {r['peak_rss_gib']:5.2f} GiB  "
          f"{graphs / s:8.2f} graphs/s  {configs / s:10.0f} configs/s", flush=True)


def bench_big() -> None:
    root = big_root()
    work = BENCH_DIR / "work"
    shutil.rmtree(work, ignore_errors=True)
    args = ["--data", str(root), "--work", str(work), "--preset", "full", "--collections",
            "layout:xla:random", "--splits", "train", "--jobs", "1"]
    print(f"big layout graph: {NODES} nodes, {CONFIGS} configs x {CONFIG_NODES} configurable nodes")
    report("cold build", measured_build(args), 1, CONFIGS)
    shutil.rmtree(work / "features")
    report("build again, features deleted", measured_build(args), 1, CONFIGS)
    report("unchanged rerun (store hit)", measured_build(args), 1, CONFIGS)


def bench_sample() -> None:
    root = REPO / "data" / "sample-small"
    if not (root / ".complete").is_file():
        print("data/sample-small not generated (make sample): skipped")
        return
    from features.io import discover

    files = discover(root)
    n_configs = sum(_num_configs(f.path) for f in files)
    work = BENCH_DIR / "work-sample"
    shutil.rmtree(work, ignore_errors=True)
    args = ["--data", str(root), "--work", str(work), "--preset", "full"]
    print(f"sample-small: {len(files)} graphs, {n_configs} configs, {os.cpu_count()} cores")
    report("sample-small cold build", measured_build(args), len(files), n_configs)
    report("sample-small unchanged rerun", measured_build(args), len(files), n_configs)


def _num_configs(path: Path) -> int:
    from features.io import npz_headers

    return npz_headers(path)["config_runtime"].shape[0]


def quick() -> list[dict]:
    """``make bench``: generate the tiny sample, build it cold and rerun it unchanged (quick preset)."""
    import tempfile
    import time

    from features.io import discover
    from features.sample import generate_dataset

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_features_") as tmp:
        start = time.perf_counter()
        root = generate_dataset(Path(tmp) / "sample-tiny", scale="tiny", seed=0)
        files = discover(root)
        n_configs = sum(_num_configs(f.path) for f in files)
        what = f"tiny sample, {len(files)} graphs, {n_configs:,} configs"
        rows.append({"figure": f"generate the {what}", "value": time.perf_counter() - start, "unit": "s"})
        args = ["--data", str(root), "--work", str(Path(tmp) / "work"), "--preset", "quick", "--jobs", "1"]
        for name in ("features build, cold", "features build, unchanged rerun"):
            r = measured_build(args)
            rows += [{"figure": f"{name} ({what})", "value": r["seconds"], "unit": "s"},
                     {"figure": f"{name}: peak RSS", "value": r["peak_rss_gib"] * 1024, "unit": "MiB"}]
    for r in rows:
        print(f"  {r['figure']}: {r['value']:.2f} {r['unit']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="python -m benchmarks.feature_build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", default="quick", choices=("quick", "big"),
                   help="quick: the tiny sample (make bench); big: the 3.4 GB graph and data/sample-small")
    if p.parse_args(argv).mode == "quick":
        quick()
    else:
        bench_big()
        bench_sample()


if __name__ == "__main__":
    main()
