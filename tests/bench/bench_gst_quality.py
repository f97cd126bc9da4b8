"""GST on whole graphs vs the k=1 pruned default at an equal wall-clock training budget.

    python tests/bench/bench_gst_quality.py --collection layout:xla:random --seeds 0,1,2 \
        --budget 240 --segment-size 512

Needs two feature builds of the same data (``features build --prune-hops 1`` into
``--pruned-work`` and ``--prune-hops -1`` into ``--whole-work``). Trains one GNN per (variant, seed)
with ``--folds 0`` (official valid early stopping) for ``--budget`` seconds, runs alternating so
both variants see the same machine load, and writes ``benchmarks/gst_quality.json``: the valid
score, steps and seconds of every run, and each variant's mean and sd over seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tpurank.atomic import write_json  # noqa: E402
from tpurank.results.artifacts import bench_metadata  # noqa: E402


def train(work: str, data: str, collection: str, seed: int, budget: float, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "models.gnn", "train", "--data", data, "--work", work,
           "--preset", "quick", "--collection", collection, "--folds", "0", "--seed", str(seed),
           "--time-budget", str(budget), "--resume", "false", *extra]
    subprocess.run(cmd, check=True, cwd=ROOT)
    slug = collection.replace(":", "-")
    tag = next((extra[i + 1] for i, a in enumerate(extra) if a == "--tag"), "")
    report = ROOT / work / "models" / "gnn" / (slug + (f"-{tag}" if tag else "")) / f"seed{seed}" / "report.json"
    r = json.loads(report.read_text())
    return {"score": r["score"], "n_graphs": r["n_graphs"], "last_step": r.get("last_step"),
            "train_seconds": round(r["train_seconds"], 1), "stopped_by": r.get("stopped_by")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/sample-small")
    ap.add_argument("--pruned-work", default="work/cmp-k1")
    ap.add_argument("--whole-work", default="work/cmp-whole")
    ap.add_argument("--collection", default="layout:xla:random")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--segment-size", type=int, default=512)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gst_quality.json"))
    args = ap.parse_args(argv)
    variants = {"k=1 pruned (default)": (args.pruned_work, []),
                f"GST whole graph (segment {args.segment_size})":
                    (args.whole_work, ["--segment-size", str(args.segment_size), "--tag", "gst"])}
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name, (work, extra) in variants.items():
            rows.append({"variant": name, "seed": seed,
                         **train(work, args.data, args.collection, seed, args.budget, extra)})
            print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for name in variants:
        scores = [r["score"] for r in rows if r["variant"] == name]
        summary[name] = {"mean": statistics.mean(scores),
                         "sd": statistics.stdev(scores) if len(scores) > 1 else 0.0}
    command = "python tests/bench/bench_gst_quality.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_json(args.out, {**bench_metadata(command), "collection": args.collection,
                          "budget_s": args.budget, "rows": rows, "summary": summary})
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
