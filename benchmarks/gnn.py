"""GNN speed and memory. ``python -m benchmarks.gnn`` (``quick``, part of ``make bench``): one
training step of 64 configs and predicting 1,000 configs with the default (factorized, quick
preset) layout model on a kaggle-shaped program of about 2k nodes, CPU. ``BENCH_THREADS``
(default 1).

``python -m benchmarks.gnn memory`` checks the per-step memory model of
:mod:`models.gnn.train` (activations ~= alpha * kept nodes * configs * hidden bytes) on large
synthetic graphs (2k-40k nodes): each case runs in a fresh process (so peak RSS is its own) and
records the bytes autograd saved for backward, the RSS growth at the end of the forward pass and
the peak RSS growth over forward + backward, with and without activation checkpointing; the fit
and the cases go to ``benchmarks/gnn_memory.json``.

``python -m benchmarks.gnn speed`` compares the layout architectures (``--arch copy`` vs
``factorized``) on kaggle-shaped programs of about 2k, 6k, 14k and 40k nodes before pruning
(``features.sample`` motifs, about 350 configurable nodes, pruned and featurized by the feature
pipeline): training steps per second at ``configs_per_step`` configs and prediction configs per
second over 1,000 configs, both archs interleaved in one process so that their ratio is measured
under the same load; ``benchmarks/gnn_speed.json``.

``python -m benchmarks.gnn head`` measures the factorized model's two CPU-path changes
against the code before them, a fresh process per variant: PyG's GINEConv vs the fused link
messages, glibc's default malloc thresholds vs :func:`models.training.reuse_freed_memory`;
``benchmarks/gnn_head_cpu.json``."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from features.processed import ProcessedGraph
from models.gnn.config import GnnConfig
from models.gnn.data import config_rows, graph_tensors
from models.gnn.model import RankerGNN
from models.gnn.train import model_args_for
from models.losses import pairwise_logistic
from models.training import make_optimizer, reuse_freed_memory
from tpurank.config import git_sha


def peak_memory_mb(device: torch.device) -> float:
    """Max RSS of this process in MiB (the CPU runs measured here)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


NODES, CONFIGURABLE, CONFIGS, NODE_DIM, STEP_CONFIGS = 2000, 150, 1000, 160, 64


def synthetic_layout_graph(seed: int = 0, nodes: int = NODES, configurable: int = CONFIGURABLE,
                           configs: int = CONFIGS) -> ProcessedGraph:
    """A DAG of ``nodes`` nodes (about 2 operands each) with ``configurable`` configurable nodes."""
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, nodes), 2)
    src = (dst - 1 - rng.integers(0, 20, size=dst.size)).clip(0)
    edge_index = np.unique(np.stack([src, dst]), axis=1)
    return ProcessedGraph(
        collection="layout:xla:random", split="train", stem="bench",
        node_feat=rng.normal(size=(nodes, NODE_DIM)).astype(np.float32),
        node_opcode=rng.integers(1, 120, size=nodes), edge_index=edge_index,
        orig_node_ids=np.arange(nodes),
        config_feat=rng.integers(-1, 6, size=(configs, configurable, 18)).astype(np.int8),
        config_index=np.arange(configs),
        config_node_pos=np.sort(rng.choice(nodes, configurable, replace=False)),
        target=rng.random(configs))


def current_rss_mb() -> float:
    """Resident memory of this process now (Linux ``/proc``; NaN elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


# --- copy vs factorized speed on kaggle-shaped programs --------------------------------------

SPEED_NODES = (2_000, 6_000, 14_000, 40_000)
SPEED_CONFIGS = 1_000


def kaggle_shaped_graph(target_nodes: int, seed: int = 0, configurable: int = 350,
                        configs: int = SPEED_CONFIGS) -> ProcessedGraph:
    """An xla program of about ``target_nodes`` nodes from the sample generator's motifs, with
    ``configurable`` configurable nodes (fewer when it has fewer candidates) and random layout
    configs, through the feature pipeline's node and config stages (default build: 1-hop pruning,
    the configurable-node graph); unnormalised features, random targets."""
    from features.buildconfig import BuildConfig
    from features.io import Graph
    from features.sample.files import _choose_configurable, _graph_arrays
    from features.sample.layout_search import (_slot_spaces, encode_node_config_feat,
                                               sample_layout_configs)
    from features.sample.motifs import build_layout_graph
    from features.stages import process_graph

    rng = np.random.default_rng([seed, target_nodes])
    fg = build_layout_graph("xla", rng, target_nodes)[0].finalize()
    arrays = _graph_arrays(fg, rng)
    ops = frozenset(("convolution", "dot", "reshape"))
    ids = _choose_configurable(fg, rng, configurable, configurable, ops)
    spaces = _slot_spaces(fg, ids)
    feat = encode_node_config_feat(sample_layout_configs(rng, spaces, configs, "random"), spaces)
    graph = Graph(node_feat=arrays["node_feat"], node_opcode=arrays["node_opcode"].astype(np.int64),
                  edge_index=arrays["edge_index"].astype(np.int64),
                  config_runtime=rng.integers(1_000, 100_000, size=configs),
                  node_config_ids=ids.astype(np.int64), node_config_feat=feat)
    cfg = dataclasses.replace(BuildConfig(), tabular=False)
    g = process_graph(graph, "layout:xla:random", "valid", f"speed{target_nodes}", None, cfg)
    g.meta["source_nodes"] = graph.num_nodes
    return g


def _cpu_and_wall(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def speed_cases(g: ProcessedGraph, archs: tuple[str, ...] = ("copy", "factorized"),
                reps: int = 3) -> dict[str, dict]:
    """Median seconds (process CPU and wall) of one quick-preset training step and of predicting
    every config of ``g``, per freshly initialised ``arch`` model; the archs take turns in every
    repetition, so that load on the machine falls on both alike."""
    from models.gnn.infer import TensorCache, embed_configs, predict_costs

    device = torch.device("cpu")
    quick = {k: v for k, v in GnnConfig.PRESETS["quick"].items() if k in ("hidden", "layers")}
    tensors = TensorCache(device).get(g)
    target = np.asarray(g.target)
    rng = np.random.default_rng(0)
    runs = {}
    for arch in archs:
        cfg = dataclasses.replace(GnnConfig(), arch=arch, **quick)
        model = RankerGNN(model_args_for(cfg, g))
        runs[arch] = (cfg, model, make_optimizer(model, 1e-3, 1e-4), pairwise_logistic)

    def step(arch: str) -> None:
        _, model, opt, loss_fn = runs[arch]
        idx = np.sort(rng.choice(g.num_configs, STEP_CONFIGS, replace=False))
        cost = model.score(embed_configs(model, g, tensors, idx, device))
        opt.zero_grad()
        loss_fn(cost, torch.as_tensor(target[idx])).backward()
        opt.step()

    def predict(arch: str) -> None:
        predict_costs(runs[arch][1], g, runs[arch][0].predict_batch)

    times: dict[str, dict[str, list]] = {a: {"train": [], "predict": []} for a in archs}
    for arch in archs:
        step(arch)  # warm-up
    for _ in range(reps):
        for arch in archs:
            times[arch]["train"].append(_cpu_and_wall(lambda: step(arch)))
            times[arch]["predict"].append(_cpu_and_wall(lambda: predict(arch)))
    med = lambda xs, i: float(np.median([x[i] for x in xs]))  # noqa: E731
    return {a: {"train_step_cpu_s": med(t["train"], 0), "train_step_wall_s": med(t["train"], 1),
                "predict_cpu_s": med(t["predict"], 0), "predict_wall_s": med(t["predict"], 1)}
            for a, t in times.items()}


def speed_main() -> None:
    import json

    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    threads = int(os.environ.get("BENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    reuse_freed_memory()  # as training and prediction do (models.training.set_cpu_threads)
    rows, ratios = [], []
    for nodes in SPEED_NODES:
        g = kaggle_shaped_graph(nodes)
        shape = {"target_nodes": nodes, "source_nodes": g.meta["source_nodes"],
                 "kept_nodes": g.num_nodes, "configurable": len(g.config_node_pos),
                 "config_links": int(len(g.config_graph))}
        case = speed_cases(g)
        for arch, r in case.items():
            rows.append({**shape, "arch": arch,
                         "train_steps_per_cpu_s": 1 / r["train_step_cpu_s"],
                         "predict_configs_per_cpu_s": g.num_configs / r["predict_cpu_s"],
                         "train_steps_per_s": 1 / r["train_step_wall_s"],
                         "predict_configs_per_s": g.num_configs / r["predict_wall_s"]})
            print(json.dumps(rows[-1]), flush=True)
        c, f = case["copy"], case["factorized"]
        ratios.append({**shape, "train_speedup_cpu": c["train_step_cpu_s"] / f["train_step_cpu_s"],
                       "predict_speedup_cpu": c["predict_cpu_s"] / f["predict_cpu_s"],
                       "train_speedup_wall": c["train_step_wall_s"] / f["train_step_wall_s"],
                       "predict_speedup_wall": c["predict_wall_s"] / f["predict_wall_s"]})
        print(json.dumps(ratios[-1]), flush=True)
    write_json(Path("benchmarks") / "gnn_speed.json",
               {**bench_metadata("python -m benchmarks.gnn speed"), "threads": threads,
                "configs_per_step": STEP_CONFIGS, "rows": rows,
                "tables": {"factorized speed-up over copy (same process, interleaved)": {"rows": ratios}}})


# --- the config head's CPU path: fused link messages and malloc's reuse of freed blocks ----------

HEAD_LINKS = ("pyg", "fused")
HEAD_MALLOC = ("mmap", "reuse")
HEAD_ROUNDS = 2  # fresh processes per (size, malloc setting)
HEAD_TURNS = 3  # turns of PyG's and the fused link messages inside each process


def _pyg_link_messages(conv, x: torch.Tensor, edge_index: torch.Tensor,
                       edge_feat: torch.Tensor) -> torch.Tensor:
    """The link layer as it was before :func:`models.gnn.model.gine_mean`: PyG's GINEConv on
    config-major states (B, n, d) (plus two transposes, of the n node rows only)."""
    return conv(x.transpose(0, 1).contiguous(), edge_index, edge_feat).transpose(0, 1).contiguous()


def head_child(nodes: int, malloc: str) -> None:
    """One graph size under one malloc setting in this process: :func:`speed_cases` of the
    factorized model with PyG's and the fused link messages taking turns; prints JSON."""
    import json

    import models.gnn.model as model_module

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    if malloc == "reuse":
        reuse_freed_memory()
    g = kaggle_shaped_graph(nodes)
    impls = {"pyg": _pyg_link_messages, "fused": model_module.gine_mean}
    times: dict[str, list[dict]] = {name: [] for name in HEAD_LINKS}
    for _ in range(HEAD_TURNS):
        for name in HEAD_LINKS:
            model_module.gine_mean = impls[name]
            times[name].append(speed_cases(g, archs=("factorized",), reps=1)["factorized"])
    print(json.dumps({"config_links": int(len(g.config_graph)), "kept_nodes": g.num_nodes,
                      "times": times}))


def head_main() -> None:
    """The factorized model's training step and prediction per kaggle-shaped size, with and
    without the two CPU-path changes. malloc's thresholds are per process, so each (size, malloc
    setting, round) runs in a fresh process: glibc's defaults (a block over 32 MB is a fresh
    mmap) or :func:`models.training.reuse_freed_memory`; inside it PyG's GINEConv and the fused
    :func:`models.gnn.model.gine_mean` take turns (``HEAD_TURNS``). Medians over rounds and turns;
    ratios against PyG under the default malloc (the code before both changes)."""
    import json
    import subprocess

    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    keys = ("train_step_cpu_s", "train_step_wall_s", "predict_cpu_s", "predict_wall_s")
    rows, ratios = [], []
    for nodes in SPEED_NODES:
        samples: dict[tuple[str, str], list[dict]] = {}
        shape = {}
        for _ in range(HEAD_ROUNDS):
            for malloc in HEAD_MALLOC:
                out = subprocess.run([sys.executable, "-m", "benchmarks.gnn", "head-child", str(nodes), malloc],
                                     check=True, capture_output=True, text=True).stdout
                got = json.loads(out.strip().splitlines()[-1])
                shape = {"target_nodes": nodes, "config_links": got["config_links"],
                         "kept_nodes": got["kept_nodes"]}
                for link, runs in got["times"].items():
                    samples.setdefault((link, malloc), []).extend(runs)
        med = {v: {k: float(np.median([r[k] for r in runs])) for k in keys}
               for v, runs in samples.items()}
        for (link, malloc), m in med.items():
            rows.append({**shape, "links": link, "malloc": malloc, "samples": len(samples[(link, malloc)]),
                         **m})
            print(json.dumps(rows[-1]), flush=True)
        base = med[("pyg", "mmap")]
        for (link, malloc), m in med.items():
            if (link, malloc) != ("pyg", "mmap"):
                ratios.append({**shape, "links": link, "malloc": malloc,
                               **{k[:-2] + "_speedup": base[k] / m[k] for k in keys}})
    write_json(Path("benchmarks") / "gnn_head_cpu.json",
               {**bench_metadata("python -m benchmarks.gnn head"),
                "threads": int(os.environ.get("BENCH_THREADS", "1")), "configs_per_step": STEP_CONFIGS,
                "rows": rows, "tables": {"speed-up over PyG links under the default malloc":
                                         {"rows": ratios}}})


# --- memory model check -----------------------------------------------------------------------

MEMORY_CASES = [  # (kept nodes, configs per step, hidden, layers, activation checkpointing, arch)
    (2_000, 32, 64, 3, False, "copy"), (10_000, 16, 64, 3, False, "copy"),
    (20_000, 8, 64, 3, False, "copy"), (40_000, 4, 64, 3, False, "copy"),
    (10_000, 16, 64, 1, False, "copy"), (10_000, 16, 32, 3, False, "copy"),
    (40_000, 4, 64, 3, True, "copy"), (10_000, 16, 64, 3, True, "copy"),
    # factorized: the trunk's n nodes once, the head's 350 configurable nodes per config
    (2_000, 64, 64, 3, False, "factorized"), (2_000, 256, 64, 3, False, "factorized"),
    (10_000, 64, 64, 3, False, "factorized"), (10_000, 256, 64, 3, False, "factorized"),
    (40_000, 64, 64, 3, False, "factorized"), (10_000, 128, 32, 3, False, "factorized"),
]
MEMORY_CONFIGURABLE = 350


def memory_case(nodes: int, configs: int, hidden: int, layers: int, ckpt: bool,
                arch: str = "copy") -> dict:
    """One training step of a layout model on a synthetic graph; memory figures in MiB."""
    import dataclasses as dc

    from models.training import checkpoint_module_lists

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    cfg = dc.replace(GnnConfig(), hidden=hidden, layers=layers, cross_attn=True, arch=arch)
    g = synthetic_layout_graph(nodes=nodes, configurable=MEMORY_CONFIGURABLE,
                               configs=max(64, configs))
    model = RankerGNN(model_args_for(cfg, g))
    if ckpt:
        checkpoint_module_lists(model)
    t = graph_tensors(g, torch.device("cpu"))
    feats = config_rows(g, np.arange(configs), torch.device("cpu"))
    saved: dict[int, int] = {}

    def pack(x: torch.Tensor):
        storage = x.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return x

    base = current_rss_mb()
    start = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        cost = model(t.node_feat, t.node_opcode, t.edge_index, feats, t.config_node_pos,
                     links=t.links)
    forward_rss = current_rss_mb() - base
    cost.float().sum().backward()
    seconds = time.perf_counter() - start
    peak = peak_memory_mb(torch.device("cpu")) - base
    return {"arch": arch, "nodes": nodes, "configs": configs, "hidden": hidden, "layers": layers,
            "activation_checkpointing": ckpt, "saved_mb": sum(saved.values()) / 2**20,
            "forward_rss_mb": forward_rss, "peak_rss_growth_mb": peak, "step_seconds": seconds,
            "node_copies": nodes * configs if arch == "copy" else nodes,
            "head_rows": MEMORY_CONFIGURABLE * configs if arch == "factorized" else 0,
            "config_links": int(t.links.hops.numel()) if t.links is not None else 0}


def _alpha(case: dict, key: str) -> float:
    return case[key] * 2**20 / (case["node_copies"] * case["hidden"])


def fit_memory_model(cases: list[dict]) -> dict:
    """alpha = bytes per (kept node x config x hidden unit), per layer count and as
    ``alpha0 + alpha1 * layers``: from the bytes autograd saved for backward (the activations;
    the stable measure) and, as a check, from the peak RSS growth over forward + backward."""
    out: dict = {"basis": "CPU float32, SAGE, meanmax pool, cross attention; copy: alpha in bytes "
                          "per kept node x config x hidden unit; factorized: trunk bytes per kept "
                          "node x hidden unit + head bytes per configurable node x config x "
                          "hidden unit"}
    factorized = [c for c in cases if c.get("arch") == "factorized"]
    cases = [c for c in cases if c.get("arch", "copy") == "copy"]
    if factorized:
        out["factorized"] = fit_factorized(factorized)
    for key in ("saved_mb", "peak_rss_growth_mb"):
        plain = [c for c in cases if not c["activation_checkpointing"]]
        layers = np.array([c["layers"] for c in plain], dtype=float)
        alphas = np.array([_alpha(c, key) for c in plain])
        a1, a0 = np.polyfit(layers, alphas, 1) if len(set(layers)) > 1 else (0.0, alphas.mean())
        ckpt = [_alpha(c, key) for c in cases if c["activation_checkpointing"]]
        out[key] = {"alpha_by_layers": {str(int(k)): float(alphas[layers == k].mean())
                                        for k in sorted(set(layers))},
                    "alpha0": float(a0), "alpha1_per_layer": float(a1),
                    "alpha_checkpointed_3_layers": float(np.mean(ckpt)) if ckpt else None,
                    "spread_3_layers_hidden64": [float(min(_alpha(c, key) for c in plain if c["layers"] == 3
                                                           and c["hidden"] == 64)),
                                                 float(max(_alpha(c, key) for c in plain if c["layers"] == 3
                                                           and c["hidden"] == 64))]}
    return out


def fit_factorized(cases: list[dict]) -> dict:
    """Least squares ``bytes = (trunk * kept nodes + (head * configurable nodes + link * links)
    * configs) * hidden`` (3 trunk layers, 2 head layers), from the bytes saved for backward and,
    as a check, the peak RSS growth."""
    out = {}
    for key in ("saved_mb", "peak_rss_growth_mb"):
        a = np.array([[c["nodes"], c["head_rows"], c["config_links"] * c["configs"]]
                      for c in cases], float) * np.array([[c["hidden"]] for c in cases], float)
        y = np.array([c[key] * 2**20 for c in cases])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        pred = a @ coef
        out[key] = {"trunk_bytes_per_node_hidden": float(coef[0]),
                    "head_bytes_per_configurable_node_config_hidden": float(coef[1]),
                    "link_bytes_per_link_config_hidden": float(coef[2]),
                    "worst_relative_error": float(np.max(np.abs(pred - y) / y))}
    return out


def memory_main() -> None:
    import json
    import subprocess
    import sys

    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    cases = []
    for case in MEMORY_CASES:
        code = ("import json,sys; from benchmarks.gnn import "
                f"memory_case; print(json.dumps(memory_case(*{case!r})))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": os.environ.get("BENCH_THREADS", "1")})
        r = json.loads(out.stdout.strip().splitlines()[-1])
        cases.append(r)
        print(f"  {r['arch']:10s} {r['nodes']:6d} nodes x {r['configs']:3d} configs, hidden {r['hidden']}, "
              f"{r['layers']} layers, ckpt {int(r['activation_checkpointing'])}: saved "
              f"{r['saved_mb']:.0f} MiB, forward RSS +{r['forward_rss_mb']:.0f} MiB, peak RSS "
              f"+{r['peak_rss_growth_mb']:.0f} MiB, {r['step_seconds']:.2f} s/step", flush=True)
    model = fit_memory_model(cases)
    print(json.dumps(model, indent=1))
    write_json(Path("benchmarks") / "gnn_memory.json",
               {**bench_metadata("python -m benchmarks.gnn memory"),
                "threads": int(os.environ.get("BENCH_THREADS", "1")), "model": model, "cases": cases})


# --- projected T4 wall time of PRESET=full on the real data ------------------------------------

# Stated assumptions (not measurements): NVIDIA T4 datasheet peaks and the efficiencies assumed
# for this workload; the real-data shape from docs/competition.md §2 (1-hop pruned layout graphs ~2.1k nodes).
T4 = {"fp32_tflops_peak": 8.1, "hbm_gb_s_peak": 320.0, "flop_efficiency": 0.5,
      "bandwidth_efficiency": 0.6, "activation_passes": 3.0, "seconds_per_op": 2e-5}
REAL = {"layout_collections": 4, "pruned_nodes": 2100, "configurable_nodes": 350,
        "config_links": 350,
        "valid_test_configs_per_layout": 1.0e6,
        "tile_collections": 1, "layout_train_graphs": 535, "layout_test_configs": 50_000}


class OpCounter:
    """Counts the ATen operators a block dispatches (about one GPU kernel launch each)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.ops += 1
                return func(*args, **(kwargs or {}))

        self.ops = 0
        self.mode = _Mode()

    def __enter__(self) -> "OpCounter":
        self.mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.mode.__exit__(*exc)


def step_flops_and_seconds(nodes: int, configs: int, hidden: int, layers: int,
                           steps: int = 2, arch: str = "factorized") -> tuple[float, float, int]:
    """Matmul FLOPs of one training step (forward + backward, FlopCounterMode), its median CPU
    seconds over ``steps`` steps after a warm-up step, and the ATen operators it dispatches."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = dataclasses.replace(GnnConfig(), hidden=hidden, layers=layers, arch=arch)
    g = synthetic_layout_graph(nodes=nodes, configurable=350, configs=max(configs, 128))
    model = RankerGNN(model_args_for(cfg, g))
    t = graph_tensors(g, torch.device("cpu"))
    loss_fn = pairwise_logistic
    times, flops = [], 0.0
    for i in range(steps + 1):
        idx = np.arange(configs)
        counter = FlopCounterMode(display=False) if i == 0 else None
        start = time.perf_counter()
        with counter if counter is not None else contextlib.nullcontext():
            cost = model(t.node_feat, t.node_opcode, t.edge_index,
                         config_rows(g, idx, torch.device("cpu")), t.config_node_pos, links=t.links)
            loss_fn(cost, torch.as_tensor(g.target[idx])).backward()
        if counter is not None:
            flops = float(counter.get_total_flops())
        else:
            times.append(time.perf_counter() - start)
    with OpCounter() as ops:
        cost = model(t.node_feat, t.node_opcode, t.edge_index,
                     config_rows(g, np.arange(configs), torch.device("cpu")), t.config_node_pos,
                     links=t.links)
        loss_fn(cost, torch.as_tensor(g.target[:configs])).backward()
    return flops, float(np.median(times)), ops.ops


def project_main() -> None:
    """Measure one ``full``-shape training step on this CPU, then project a T4 (see docstring of
    :func:`t4_projection`); writes ``benchmarks/gnn_t4_projection.json``."""
    import json

    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata

    full = GnnConfig.PRESETS["full"]
    arch = str(full.get("arch", GnnConfig().arch))
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    nodes, configs = REAL["pruned_nodes"], int(full["configs_per_step"])
    path = Path("benchmarks") / "gnn_t4_projection.json"
    reuse = "--reuse" in sys.argv  # the projection again from the step measured before (minutes of CPU)
    if reuse:
        old = json.loads(path.read_text())
        flops, cpu_s = old["measured"]["step_flops"], old["measured"]["cpu_seconds_per_step"]
        ops = old["measured"]["step_ops"]
        measured_at, threads = old["measured"].get("measured_at", old["git_sha"]), old["threads"]
    else:
        flops, cpu_s, ops = step_flops_and_seconds(nodes, configs, int(full["hidden"]),
                                                   int(full["layers"]), arch=arch)
        measured_at, threads = git_sha(), torch.get_num_threads()
    result = t4_projection(flops, cpu_s, nodes, configs, int(full["hidden"]), int(full["layers"]),
                           arch, ops)
    result["measured"]["measured_at"] = measured_at
    result["kaggle_session"] = session_hours(result["t4"])
    print(json.dumps(result, indent=1))
    write_json(path, {**bench_metadata("python -m benchmarks.gnn project" + " --reuse" * reuse),
                      "threads": threads, **result})


def session_hours(t4: dict) -> dict:
    """``make run PRESET=full`` on Kaggle (one T4, 4 CPU cores) end to end: validate and the
    feature build from the measured ``validate + build`` run of the full preset at the real
    config volume (``benchmarks/scale.json``, config fraction 1) scaled by 1 / graph fraction
    and taken at this machine's 2 cores (no credit for Kaggle's 4), the GNN's projected training
    and prediction, and LightGBM at its full-preset time budget."""
    import json

    from models.lgbm.config import LgbmConfig

    runs = json.loads((Path("benchmarks") / "scale.json").read_text())["runs"]
    real = [r for r in runs if r["preset"] == "full" and r["dataset"]["config_fraction"] == 1
            and r.get("pipeline", "validate + build") == "validate + build"]
    if not real:
        return {"note": "no full-preset run at config fraction 1 in benchmarks/scale.json"}
    run = real[-1]
    scale = 1.0 / float(run["dataset"]["graph_fraction"])
    stage = {s["stage"]: s["wall_s"] * scale / 3600 for s in run["stages"]}
    out = {"validate_hours": stage.get("validate", 0.0),
           "features_hours (2 cores)": stage.get("build", 0.0),
           "gnn_train_hours": t4["train_hours"], "gnn_predict_hours": t4["predict_hours"],
           "lgbm_hours (time budget)": float(LgbmConfig.PRESETS["full"]["time_budget"]) / 3600}
    out["total_hours"] = sum(out.values())
    out["scaled_from"] = (f"scale.json run G={run['dataset']['graph_fraction']} F=1 "
                          f"({run['dataset']['files']} files) at {run['git_sha']}")
    out["work_gb (projected)"] = run["sizes"]["work_bytes"] * scale / 1e9
    return out


def activation_bytes(arch: str, nodes: int, configs: int, hidden: int, layers: int) -> tuple[float, dict]:
    """Bytes a training step keeps for backward under the measured memory model
    (``benchmarks/gnn_memory.json``) and the coefficients used."""
    import json

    model = json.loads((Path("benchmarks") / "gnn_memory.json").read_text())["model"]
    if arch == "factorized":
        fit = model["factorized"]["saved_mb"]
        trunk = fit["trunk_bytes_per_node_hidden"] * layers / 3  # fitted at 3 trunk layers
        head = fit["head_bytes_per_configurable_node_config_hidden"]
        link = fit["link_bytes_per_link_config_hidden"]
        per_config = head * REAL["configurable_nodes"] + link * REAL["config_links"]
        return (trunk * nodes + per_config * configs) * hidden, \
            {"trunk_bytes": trunk, "head_bytes": head, "link_bytes": link}
    memory = model["saved_mb"]
    alpha = memory["alpha0"] + memory["alpha1_per_layer"] * layers
    return alpha * nodes * configs * hidden, {"alpha_bytes": alpha}


def t4_projection(flops: float, cpu_seconds: float, nodes: int, configs: int, hidden: int,
                  layers: int, arch: str = "copy", ops: int = 0) -> dict:
    """T4 seconds per step = max(FLOPs / (peak * flop_eff), bytes / (bandwidth * bw_eff)) + ops x
    seconds_per_op, with FLOPs and the step's ATen operators measured (FlopCounterMode, a dispatch
    counter; eager PyTorch launches about one kernel per operator, which dominates small steps)
    and bytes = activation_passes x the memory model's activations (:func:`activation_bytes`,
    fitted in benchmarks/gnn_memory.json);
    training = min(time_budget, collections x folds x steps x step); prediction = configs to score x
    forward seconds per config (a third of a training step's per-config time), where the configs
    to score are the valid and test configs, the out-of-fold configs of the train graphs
    (``oof_max_configs`` each) and the test configs once more for every further fold model."""
    full = GnnConfig.PRESETS["full"]
    act_bytes, coefficients = activation_bytes(arch, nodes, configs, hidden, layers)
    t_flops = flops / (T4["fp32_tflops_peak"] * 1e12 * T4["flop_efficiency"])
    t_bytes = T4["activation_passes"] * act_bytes / (T4["hbm_gb_s_peak"] * 1e9 * T4["bandwidth_efficiency"])
    t_ops = ops * T4["seconds_per_op"]  # launch and scheduling: what small kernels cost on a GPU
    step = max(t_flops, t_bytes) + t_ops
    steps = int(full["steps"])
    train_unbounded = REAL["layout_collections"] * int(full["folds"]) * steps * step  # a model per fold
    train = min(float(full["time_budget"]), train_unbounded)
    scored = (REAL["layout_collections"] * REAL["valid_test_configs_per_layout"]
              + REAL["layout_train_graphs"] * int(full["oof_max_configs"])
              + (int(full["folds"]) - 1) * REAL["layout_test_configs"])
    predict = scored * step / configs / 3
    return {"measured": {"arch": arch, "nodes": nodes, "configs": configs, "hidden": hidden,
                         "layers": layers, "step_flops": flops, "step_ops": ops,
                         "cpu_seconds_per_step": cpu_seconds,
                         "cpu_effective_gflops": flops / cpu_seconds / 1e9},
            "assumptions": {**T4, **REAL, **coefficients,
                            "note": "tile (late join, one message pass per kernel) not counted: "
                                    "it is a small fraction of the layout cost"},
            "t4": {"activation_gb_per_step": act_bytes / 1e9, "seconds_per_step_flops": t_flops,
                   "seconds_per_step_bandwidth": t_bytes, "seconds_per_step_ops": t_ops,
                   "seconds_per_step": step,
                   "speedup_over_this_cpu": cpu_seconds / step,
                   "train_hours_unbounded": train_unbounded / 3600, "train_hours": train / 3600,
                   "configs_scored": scored, "predict_hours": predict / 3600}}


def quick() -> list[dict]:
    """``make bench``: the default (``quick``-preset, factorized) layout model on a kaggle-shaped
    program of about 2k nodes: one training step and predicting 1,000 configs, CPU, one thread."""
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    reuse_freed_memory()
    g = kaggle_shaped_graph(2_000)
    arch = GnnConfig().arch
    r = speed_cases(g, archs=(arch,), reps=2)[arch]
    what = f"{arch}, {g.num_nodes} nodes after pruning, quick preset"
    rows = [{"figure": f"GNN train step, {STEP_CONFIGS} configs ({what})", "value": r["train_step_wall_s"], "unit": "s"},
            {"figure": f"GNN predict {g.num_configs} configs ({what})", "value": r["predict_wall_s"], "unit": "s"},
            {"figure": "GNN process max RSS", "value": peak_memory_mb(torch.device("cpu")), "unit": "MiB"}]
    for r in rows:
        print(f"  {r['figure']}: {r['value']:.3f} {r['unit']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse

    modes = {"quick": quick, "memory": memory_main, "project": project_main, "speed": speed_main,
             "head": head_main}
    p = argparse.ArgumentParser(prog="python -m benchmarks.gnn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", default="quick", choices=[*modes, "head-child"],
                   help="what to measure (default quick: the make bench figures)")
    p.add_argument("child", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode == "head-child":
        head_child(int(args.child[0]), args.child[1])
    else:
        modes[args.mode]()


if __name__ == "__main__":
    main()
