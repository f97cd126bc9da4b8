"""GNN training throughput (configs/s) and peak memory: a 2k-node pruned layout graph, 64 configs
per step, for the ``quick`` model shape (and ``full`` on CUDA) — ``make bench`` or
``python tests/bench/run.py gnn``. ``BENCH_THREADS`` (default 1) and ``BENCH_DEVICE`` (auto)."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import torch

from features.processed import ProcessedGraph
from models.gnn.config import GnnConfig
from models.gnn.data import config_rows, graph_tensors
from models.gnn.model import RankerGNN
from models.gnn.train import model_args_for
from models.losses import get_loss
from models.training import choose_device, make_optimizer, peak_memory_mb

NODES, CONFIGURABLE, CONFIGS, NODE_DIM, STEP_CONFIGS = 2000, 150, 1000, 160, 64


def synthetic_layout_graph(seed: int = 0) -> ProcessedGraph:
    """A DAG of ``NODES`` nodes (about 2 operands each) with ``CONFIGURABLE`` configurable nodes."""
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, NODES), 2)
    src = (dst - 1 - rng.integers(0, 20, size=dst.size)).clip(0)
    edge_index = np.unique(np.stack([src, dst]), axis=1)
    return ProcessedGraph(
        collection="layout:xla:random", split="train", stem="bench",
        node_feat=rng.normal(size=(NODES, NODE_DIM)).astype(np.float32),
        node_opcode=rng.integers(1, 120, size=NODES), edge_index=edge_index,
        orig_node_ids=np.arange(NODES),
        config_feat=rng.integers(-1, 6, size=(CONFIGS, CONFIGURABLE, 18)).astype(np.int8),
        config_index=np.arange(CONFIGS),
        config_node_pos=np.sort(rng.choice(NODES, CONFIGURABLE, replace=False)),
        target=rng.random(CONFIGS))


def measure(preset: str, steps: int, device: torch.device) -> dict[str, float]:
    cfg = dataclasses.replace(GnnConfig(), preset=preset, **GnnConfig.PRESETS[preset])
    g = synthetic_layout_graph()
    model = RankerGNN(model_args_for(cfg, g)).to(device)
    opt = make_optimizer(model, 1e-3, 1e-4)
    loss_fn = get_loss(cfg.loss)
    t = graph_tensors(g, device)
    rng = np.random.default_rng(0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    base = current_rss_mb()
    timings, extra = [], 0.0
    for _ in range(steps + 1):  # the first step is warm-up
        idx = np.sort(rng.choice(CONFIGS, STEP_CONFIGS, replace=False))
        start = time.perf_counter()
        cost = model(t.node_feat, t.node_opcode, t.edge_index, config_rows(g, idx, device),
                     t.config_node_pos)
        extra = max(extra, current_rss_mb() - base)  # activations are alive until backward
        loss = loss_fn(cost, torch.as_tensor(g.target[idx], device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        timings.append(time.perf_counter() - start)
    per_step = float(np.median(timings[1:]))
    peak = peak_memory_mb(device) if device.type == "cuda" else extra
    return {"hidden": cfg.hidden, "layers": cfg.layers, "s_per_step": per_step,
            "configs_per_s": STEP_CONFIGS / per_step, "peak_mb": peak}


def current_rss_mb() -> float:
    """Resident memory of this process now (Linux ``/proc``; NaN elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def main() -> None:
    threads = int(os.environ.get("BENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    device = choose_device(os.environ.get("BENCH_DEVICE", "auto"))
    print(f"device {device}, torch threads {threads}, graph {NODES} nodes "
          f"({CONFIGURABLE} configurable), {STEP_CONFIGS} configs per step")
    # the full model takes about a minute per step on one CPU core: measured on CUDA only
    runs = [("quick", 4)] + ([("full", 5)] if device.type == "cuda" else [])
    for preset, steps in runs:
        r = measure(preset, steps, device)
        kind = "CUDA allocator peak" if device.type == "cuda" else "RSS growth at end of forward"
        print(f"  {preset:5s} model (hidden {r['hidden']}, {r['layers']} layers): "
              f"{r['s_per_step']:.2f} s/step, {r['configs_per_s']:.1f} configs/s, "
              f"{kind} {r['peak_mb']:.0f} MiB")
    print(f"  process max RSS {peak_memory_mb(torch.device('cpu')):.0f} MiB")


if __name__ == "__main__":
    main()
