"""Peak training memory per step: whole-graph training vs Graph Segment Training (GST).

Synthetic layout graphs of 4k, 10k and 40k nodes (about 2 operands per node, 7.5 % configurable),
the ``quick`` model shape (hidden 64, 3 layers, SAGE), CPU, one thread. Modes: ``gst`` (GST on
the factorized trunk, what ``--segment-size`` trains), ``full`` (the factorized model on the whole
graph) and ``full-copy``; GST trains one segment a step (``benchmarks/gst_memory.json`` also
holds ``gst-copy`` rows: the organisers' recipe on the copy model, since removed). Configs per
step are what training would sample (:meth:`GnnConfig.configs_per_step_for` under
``--node-budget``, at most 64). Every (mode, size) runs in a fresh interpreter so that memory
figures do not mix:

- ``activations_mb``: the peak over steps of the bytes autograd saved for backward (counted with
  ``torch.autograd.graph.saved_tensors_hooks``, each storage once; allocator-independent);
- ``rss_growth_mb``: peak resident memory (``VmHWM``, reset after setup through
  ``/proc/self/clear_refs``) minus resident memory after setup;
- ``s_per_step``: median wall time of the steps after the first.

A child that exceeds ``--mem-limit-gb`` of address space reports the failure instead of numbers.
Writes ``benchmarks/gst_memory.json``::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.gst [--sizes 4000,10000,40000]
        [--modes gst,full,full-copy] [--node-budget 25000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

from features.processed import ProcessedGraph  # noqa: E402
from models.gnn.config import GnnConfig  # noqa: E402
from models.gnn.data import graph_tensors  # noqa: E402
from models.gnn.infer import train_costs  # noqa: E402
from models.gnn.model import RankerGNN  # noqa: E402
from models.gnn.train import model_args_for  # noqa: E402
from models.losses import pairwise_logistic  # noqa: E402
from tpurank.atomic import write_json  # noqa: E402
from benchmarks.render.artifacts import bench_metadata  # noqa: E402

STEP_CONFIGS, POOL_CONFIGS, NODE_DIM = 64, 256, 140


def synthetic_graph(nodes: int, seed: int = 0) -> ProcessedGraph:
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, nodes), 2)
    src = (dst - 1 - rng.integers(0, 20, size=dst.size)).clip(0)
    configurable = max(1, int(0.075 * nodes))
    return ProcessedGraph(
        collection="layout:xla:random", split="train", stem=f"bench{nodes}",
        node_feat=rng.normal(size=(nodes, NODE_DIM)).astype(np.float32),
        node_opcode=rng.integers(1, 120, size=nodes), edge_index=np.unique(np.stack([src, dst]), axis=1),
        orig_node_ids=np.arange(nodes),
        config_feat=rng.integers(-1, 6, size=(POOL_CONFIGS, configurable, 18)).astype(np.int8),
        config_index=np.arange(POOL_CONFIGS),
        config_node_pos=np.sort(rng.choice(nodes, configurable, replace=False)),
        target=rng.random(POOL_CONFIGS))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


class SavedBytes:
    """Bytes of the storages autograd keeps for backward (alive from forward to backward), each
    storage counted once however many ops save a view of it."""

    def __init__(self):
        self.now = self.peak = 0
        self.seen: set[int] = set()

    def reset(self) -> None:
        self.now, self.seen = 0, set()

    def pack(self, t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in self.seen:
            self.seen.add(storage.data_ptr())
            self.now += storage.nbytes()
            self.peak = max(self.peak, self.now)
        return t

    def unpack(self, t: torch.Tensor) -> torch.Tensor:
        return t


MODES = ("gst", "full", "full-copy")


def mode_config(mode: str, segment_size: int, node_budget: int) -> GnnConfig:
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    settings = {**GnnConfig.PRESETS["quick"], "features": "/nonexistent",
                "configs_per_step": STEP_CONFIGS, "node_budget": node_budget,
                "arch": "copy" if mode.endswith("-copy") else "factorized"}
    cfg = dataclasses.replace(GnnConfig(), **settings)
    if mode.startswith("gst"):
        cfg = dataclasses.replace(cfg, segment_size=segment_size)
    return cfg


def child(mode: str, nodes: int, steps: int, segment_size: int, node_budget: int) -> dict:
    torch.set_num_threads(1)
    cfg = mode_config(mode, segment_size, node_budget)
    g = synthetic_graph(nodes)
    device = torch.device("cpu")
    model = RankerGNN(model_args_for(cfg, g))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = pairwise_logistic
    t = graph_tensors(g, device)
    configs = cfg.configs_per_step_for(nodes, False, len(g.config_node_pos),
                                       int(t.links.edge_index.shape[1]))
    rng = np.random.default_rng(0)
    with open("/proc/self/clear_refs", "w") as fh:  # reset VmHWM to the current RSS
        fh.write("5")
    base_kb = _status_kb("VmRSS")
    saved, times = SavedBytes(), []
    for step in range(steps):
        idx = np.sort(rng.choice(POOL_CONFIGS, configs, replace=False))
        start = time.perf_counter()
        saved.reset()
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            cost = train_costs(model, g, t, idx, device, cfg, step)
            loss = loss_fn(cost, torch.as_tensor(g.target[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return {"mode": mode, "nodes": nodes, "configs_per_step": configs,
            "config_links": int(t.links.edge_index.shape[1]), "node_budget": node_budget,
            "segment_size": cfg.segment_size, "steps": steps,
            "activations_mb": saved.peak / 2**20,
            "rss_growth_mb": (_status_kb("VmHWM") - base_kb) / 1024,
            "s_per_step": float(np.median(times[1:] if len(times) > 1 else times))}


def run_child(mode: str, nodes: int, steps: int, segment_size: int, node_budget: int,
              mem_limit_gb: float) -> dict:
    limit = int(mem_limit_gb * 2**30)

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, __file__, "--child", mode, "--sizes", str(nodes), "--steps", str(steps),
           "--segment-size", str(segment_size), "--node-budget", str(node_budget)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=set_limit, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"mode": mode, "nodes": nodes, "node_budget": node_budget,
                "error": f"exit {proc.returncode} under a {mem_limit_gb:g} GiB address-space "
                         f"limit: {tail[0][:200]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4000,10000,40000")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of " + ", ".join(MODES))
    ap.add_argument("--node-budget", type=int, default=int(GnnConfig.PRESETS["quick"]["node_budget"]),
                    help="rows a step may hold (GnnConfig.node_budget): sizes the configs per step")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--segment-size", type=int, default=1000)
    ap.add_argument("--mem-limit-gb", type=float, default=8.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gst_memory.json"))
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(args.child, sizes[0], args.steps, args.segment_size,
                               args.node_budget)))
        return
    rows = []
    modes = args.modes.split(",")
    for mode in modes:
        for nodes in sizes:
            row = run_child(mode, nodes, args.steps, args.segment_size, args.node_budget,
                            args.mem_limit_gb)
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for mode in modes:
        ok = [r for r in rows if r["mode"] == mode and "error" not in r]
        if len(ok) >= 2:
            summary[f"{mode}_activation_growth_{ok[0]['nodes']}_to_{ok[-1]['nodes']}"] = \
                ok[-1]["activations_mb"] / ok[0]["activations_mb"]
            summary[f"{mode}_rss_growth_{ok[0]['nodes']}_to_{ok[-1]['nodes']}"] = \
                ok[-1]["rss_growth_mb"] / max(ok[0]["rss_growth_mb"], 1e-9)
    result = {**bench_metadata("OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.gst "
                               + " ".join(argv if argv is not None else sys.argv[1:])),
              "torch": torch.__version__, "threads": 1, "rows": rows, "summary": summary}
    write_json(args.out, result)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
