"""Data-layer benchmark: validate / load a huge layout graph without holding it in RAM.

Writes a synthetic layout npz (default 40k nodes, 100k configs × 500 configurable nodes: a
3.6 GB float32 ``node_config_feat``) into a temporary directory, then measures — each step in a
fresh subprocess so peak RSS (``VmHWM``) belongs to that step alone:

* ``validate_file`` time and peak RSS;
* the coded load of ``features build`` (``features.configcodes.load_coded``: configs streamed
  out of the npz into small integer codes) + decoding one random 1,000-config batch: time and
  peak RSS, split at the end into anonymous memory and file-backed pages, and the codes' size;
* a baseline on a smaller file (default 20k configs, 0.72 GB): plain ``np.load`` of the whole
  graph vs the coded load, peak RSS ratio.

(Until issue 40 it also measured an int8 memory-mapped npz cache, ``features cache``; the product
dropped it, unused by any stage.)

Everything is deleted afterwards. ``python -m benchmarks.data --configs 2000`` for a
quick run; without options the default sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from benchmarks.synthetic import write_layout_npz  # noqa: E402

CHILD_PRELUDE = """
import json, sys, time
import numpy as np
def status_mb(key):
    for line in open('/proc/self/status'):
        if line.startswith(key + ':'):
            return int(line.split()[1]) / 1024
def peak_mb():
    return status_mb('VmHWM')
base = peak_mb()
start = time.perf_counter()
"""
CHILD_EPILOGUE = """
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak_mb(),
                  "import_mb": base, "anon_mb": status_mb('RssAnon'),
                  "file_mb": status_mb('RssFile'), **extra}))
"""

STEPS = {
    "validate": """
from features.validate import validate_file
problems = validate_file(SRC)
extra = {"problems": problems}
""",
    "coded_load": """
from features.configcodes import load_coded
g = load_coded(SRC)
rows = np.sort(np.random.default_rng(0).choice(g.num_configs, min(1000, g.num_configs), replace=False))
batch = np.asarray(g.node_config_feat[rows])
coded = g.node_config_feat
extra = {"codes_mb": (coded.codes.nbytes + coded.table.nbytes) / 2**20, "batch_shape": list(batch.shape)}
""",
    "np_load": """
from features.io import load_npz
g = load_npz(SRC)
extra = {"dtype": str(g.node_config_feat.dtype), "shape": list(g.node_config_feat.shape)}
""",
}


def run_step(step: str, src: Path) -> dict:
    """Run one step in a fresh interpreter; returns its timing and peak RSS."""
    code = f"SRC = {str(src)!r}\n" + CHILD_PRELUDE + STEPS[step] + CHILD_EPILOGUE
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"bench step {step} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def show(label: str, result: dict) -> None:
    extras = {k: v for k, v in result.items()
              if k not in ("seconds", "peak_mb", "import_mb", "anon_mb", "file_mb")}
    print(f"{label:24s} {result['seconds']:7.1f} s  peak RSS {result['peak_mb']:6.0f} MB "
          f"(at end: anon {result['anon_mb']:.0f} MB, file-backed {result['file_mb']:.0f} MB; "
          f"interpreter {result['import_mb']:.0f} MB)  {extras}", flush=True)


def bench_file(tmp: Path, label: str, nodes: int, configs: int, config_nodes: int,
               steps: tuple[str, ...]) -> dict[str, dict]:
    src = tmp / f"{label}.npz"
    start = time.perf_counter()
    write_layout_npz(src, nodes, configs, config_nodes, seed=0, progress=False)
    size_gb = src.stat().st_size / 2**30
    print(f"{label}: wrote {nodes:,} nodes × {configs:,} configs × {config_nodes} config nodes "
          f"({size_gb:.2f} GiB) in {time.perf_counter() - start:.1f} s", flush=True)
    results = {}
    for step in steps:
        results[step] = run_step(step, src)
        show(f"  {label} {step}", results[step])
    src.unlink()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=40_000)
    parser.add_argument("--configs", type=int, default=100_000)
    parser.add_argument("--config-nodes", type=int, default=500)
    parser.add_argument("--baseline-configs", type=int, default=20_000)
    parser.add_argument("--tmp", default=None, help="directory for the temporary files")
    args = parser.parse_args([] if argv is None else argv)
    need_gb = args.configs * args.config_nodes * 18 * 4 / 1e9 * 1.1
    free_gb = shutil.disk_usage(args.tmp or tempfile.gettempdir()).free / 1e9
    if free_gb < need_gb + 5:
        print(f"skipped: needs about {need_gb:.1f} GB free disk, {free_gb:.1f} GB available")
        return
    with tempfile.TemporaryDirectory(prefix="bench_data_", dir=args.tmp) as tmp_name:
        tmp = Path(tmp_name)
        big = bench_file(tmp, "big", args.nodes, args.configs, args.config_nodes,
                         ("validate", "coded_load"))
        base = bench_file(tmp, "baseline", args.nodes, args.baseline_configs, args.config_nodes,
                          ("coded_load", "np_load"))
    ratio = base["np_load"]["peak_mb"] / base["coded_load"]["peak_mb"]
    anon_ratio = base["np_load"]["anon_mb"] / base["coded_load"]["anon_mb"]
    print(f"baseline peak RSS: np.load {base['np_load']['peak_mb']:.0f} MB vs coded "
          f"{base['coded_load']['peak_mb']:.0f} MB -> {ratio:.1f}x less with the codes; "
          f"anonymous memory {base['np_load']['anon_mb']:.0f} MB vs "
          f"{base['coded_load']['anon_mb']:.0f} MB -> {anon_ratio:.0f}x")
    print(f"big file: validate {big['validate']['peak_mb']:.0f} MB, coded load "
          f"{big['coded_load']['peak_mb']:.0f} MB "
          f"peak RSS (node_config_feat alone is "
          f"{args.configs * args.config_nodes * 18 * 4 / 2**20:.0f} MB as float32)")


if __name__ == "__main__":
    main(sys.argv[1:])
