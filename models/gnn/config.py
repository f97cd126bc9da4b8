"""Configuration of the GNN ranker: one dataclass, two presets, every field a ``--option``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from tpurank.collections import Collection
from tpurank.config import StageConfig


@dataclass
class GnnConfig(StageConfig):
    """GNN ranker (PyTorch Geometric) for tile and layout collections."""

    # --- stage contract
    collection: str = ""  # singular alias of --collections
    features: str = ""  # feature directory; default WORK/features
    tag: str = ""  # optional run name: models go to WORK/models/gnn/<slug>[-tag]/seed<k>
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 0  # torch CPU threads for training (0 = torch default)
    predict_threads: int = 0  # torch CPU threads for predict (0 = torch default: all cores)

    # --- model
    arch: str = "factorized"  # layout: factorized (config-free trunk once per graph, per-config head over the configurable nodes) | copy (the graph copied per config)
    head_layers: int = 2  # factorized: message-passing layers of the per-config head over the configurable-node graph
    head_product: bool = True  # factorized: the head's join also multiplies each configurable node's trunk and layout embeddings (second-order terms)
    conv: str = "sage"  # sage | gatv2
    hidden: int = 64  # node embedding width of every message-passing layer
    layers: int = 3  # message-passing layers
    heads: int = 2  # GATv2 heads
    opcode_dim: int = 16  # embedding size of the HLO opcode id
    layout_value_dim: int = 4  # embedding size of one layout value (x18 per node)
    norm: str = "instance"  # instance (over nodes, per config copy) | layer | none
    pool: str = "meanmax"  # meanmax | attention
    dropout: float = 0.0  # dropout in message passing and cross-configuration attention
    cross_attn: bool = True  # cross-configuration attention between the configs of a batch
    cross_heads: int = 4  # attention heads of the cross-configuration attention
    tile_join: str = "late"  # tile: config joined after pooling (late) or at every node (early)
    tabular: bool = False  # layout: join the per-config descriptive tabular features (pattern, non-default, mismatch counts; no cost heuristic) after pooling

    # --- training
    loss: str = "logistic"  # hinge | logistic (RankNet) | listmle
    margin: float = 0.1  # hinge margin
    configs_per_step: int = 64  # configs sampled from one graph per step
    graphs_per_step: int = 0  # graphs per optimiser step (losses averaged); 0 = 4 tile, 1 layout
    close_bias: float = 0.0  # probability that a step samples configs of close runtimes
    joint_search: bool = False  # layout: also train on the other search (default+random) of the source
    steps: int = 400  # optimiser steps per collection (the horizon of the warmup-cosine schedule)
    lr: float = 2e-3  # AdamW peak learning rate
    weight_decay: float = 1e-4  # AdamW weight decay
    warmup_steps: int = 20  # linear learning-rate warmup steps before the cosine decay
    grad_clip: float = 1.0  # gradient norm clipped to this value
    amp: bool = True  # mixed precision (CUDA only)
    eval_every: int = 50  # validation scoring (early stopping, best checkpoint) every this many steps
    patience: int = 4  # evaluations without improvement before stopping (0 = never)
    keep: Literal["best", "last"] = "best"  # weights a model keeps as best.pt: its best validation score's, or its last
    val_max_configs: int = 256  # configs per valid graph scored during training (0 = all)
    final_val_max_configs: int = 0  # configs per valid graph in the report after training (0 = all): bounds that evaluation's time whatever the config count
    max_train_graphs: int = 0  # 0 = all
    predict_batch: int = 64  # configs per forward pass at prediction time
    resume: bool = True  # continue from WORK/models/gnn/<slug>/seed<k>/last.pt when it exists
    step_budget: int = 0  # stop this invocation after this many steps (resume later); 0 = no limit
    time_budget: float = 0.0  # wall seconds for the whole train invocation, shared by its collections and folds (0 = no limit)
    budget_clock: str = "wall"  # wall | cpu: --time-budget counts wall seconds, or this process's CPU seconds (equal compute for comparisons on a loaded machine; with --threads 1)
    tile_budget_weight: float = 1.0  # share of --time-budget of a tile model relative to a layout model (one fold each)

    # --- memory and processes
    node_budget: int = 0  # per-step ceiling on kept nodes x configs (graph copies); 0 = configs_per_step as is
    min_configs_per_step: int = 8  # floor of configs per step under --node-budget
    activation_checkpointing: bool = False  # recompute message-passing activations in backward (less memory, more compute)
    find_unused_parameters: bool = True  # torchrun/DDP: allow parameters a step does not use (e.g. tile vs layout paths)

    # --- cross-validation (issue 12)
    folds: int = 0  # K >= 2: K grouped folds of train+valid graphs (models.cv), OOF predictions; 0 = train/valid split
    oof_max_configs: int = 0  # OOF configs per held-out train graph: a seeded subset of its LightGBM tabular rows (0 = all those rows)

    # --- graph segment training
    segment_size: int = 0  # GST: about this many nodes per graph segment (0 = off: whole graph per step)
    segments_per_step: int = 1  # GST: segments trained (forward + backward) per graph and step
    stale_dropout: float = 0.5  # GST (copy arch): probability of leaving out each stale (historical) segment score, one draw per graph and step shared by its configs
    segment_method: str = "contiguous"  # GST partition: contiguous (topological ranges) | metis
    segment_halo: int = 0  # GST: hops of neighbours kept around a segment as boundary inputs (0 = cut edges dropped)
    history_max_bytes: int = 268435456  # GST history table (copy arch: segment scores; factorized: segment trunk outputs): limit in bytes (oldest segments evicted)
    predict_context: int = 1024  # inference attention context: a fixed seeded subset of at most N of the configs ranked (0 = all; all and 64 scored alike, BENCHMARKS.md), so attention stays linear in the config count

    PRESETS: ClassVar[dict[str, dict[str, object]]] = {
        # quick: bounded by time, not steps (issue 11): 900 s of GNN training for all selected
        # collections and their 3 CV folds (issue 12; the LightGBM ranker's K too); a tile fold
        # model gets half a layout fold model's share (tile_budget_weight). No early stopping
        # (patience 0): within these shares the models' inner-valid scores still rise, noisily,
        # when the time runs out (BENCHMARKS.md, "GNN architectures"), and the final weights are
        # kept (keep last): the best of a few evaluations on an inner slice of 19 tile or 9
        # layout graphs picked early, worse weights out of fold (BENCHMARKS.md, "Weights kept").
        # Both cores (threads 0): on a quiet 2-core machine 617 vs 384 configs/s with one thread
        # (copy model, layout:nlp:random, 45 s runs); one thread is faster only when other jobs
        # load the cores. OOF predictions of train graphs on 500 of their configs
        # bound the predict stage at the real shape. Model shape: measured on sample-small valid,
        # 3 seeds.
        "quick": {"hidden": 64, "layers": 3, "configs_per_step": 64, "steps": 100000,
                  "time_budget": 900.0, "eval_every": 50, "patience": 0, "val_max_configs": 128,
                  "predict_batch": 64, "threads": 0, "warmup_steps": 20, "lr": 3e-3,
                  "node_budget": 200000, "folds": 3, "tile_budget_weight": 0.5,
                  "oof_max_configs": 500, "final_val_max_configs": 500, "keep": "last"},
        # full: one T4 (16 GB): node_budget bounds a step's activations under the measured memory
        # model (benchmarks/gnn_memory.json); 3,000 s of training at most, so that the whole
        # Kaggle session stays under 3 h (the projection in BENCHMARKS.md, factorized model); OOF
        # of the real data's 535 layout train graphs on 2,000 configs each (about 1.1M configs)
        "full": {"hidden": 128, "layers": 4, "configs_per_step": 96, "steps": 20000,
                 "eval_every": 500, "patience": 8, "val_max_configs": 1000, "predict_batch": 128,
                 "conv": "sage", "dropout": 0.1, "warmup_steps": 500, "lr": 1e-3, "close_bias": 0.25,
                 "time_budget": 3000.0, "node_budget": 500000, "folds": 5,
                 "oof_max_configs": 2000, "final_val_max_configs": 2000},
    }

    def collection_list(self) -> list[Collection]:
        from tpurank.collections import parse_collections

        return parse_collections(self.collection or self.collections)

    def features_dir(self) -> Path:
        return Path(self.features) if self.features else Path(self.work) / "features"

    def collection_dir(self, collection: Collection) -> Path:
        """``WORK/models/gnn/<slug>[-tag]``: one ``seed<k>`` sub-directory per trained seed."""
        name = collection.slug + (f"-{self.tag}" if self.tag else "")
        return Path(self.work) / "models" / "gnn" / name

    def model_dir(self, collection: Collection) -> Path:
        return self.collection_dir(collection) / f"seed{self.seed}"

    def budget_weight(self, collection: Collection) -> float:
        """One model's share of ``--time-budget`` relative to a layout model's:
        ``--tile-budget-weight`` for tile (small graphs, many of them, learnt in few steps; the
        layout collections need the steps)."""
        return max(1e-3, self.tile_budget_weight) if collection.is_tile else 1.0

    def graphs_per_step_for(self, collection: Collection) -> int:
        if self.graphs_per_step > 0:
            return self.graphs_per_step
        return 4 if collection.is_tile else 1

    def preds_dir(self) -> Path:
        return Path(self.work) / "preds"

    def configs_per_step_for(self, num_nodes: int, is_tile: bool, config_nodes: int = 0,
                             config_links: int = 0) -> int:
        """Configs sampled from a graph of ``num_nodes`` kept nodes (``config_nodes`` of them
        configurable, ``config_links`` links between those) in one step.

        With ``node_budget`` > 0 the step's node rows stay within the budget, which bounds
        activation memory (see ``models.gnn.train``), but never below ``min_configs_per_step``:
        ``num_nodes`` rows per config for the copy model (one graph copy each); for the factorized
        model the trunk's ``num_nodes`` rows once per step, then ``config_nodes + config_links / 4``
        rows per config (a head row keeps fewer bytes than a copy row, a link about a quarter of
        a head row: ``benchmarks/gnn_memory.json``). Tile models with ``tile_join="late"`` run
        message passing once per graph whatever the config count, so the budget does not apply.
        Graph Segment Training backpropagates its ``segments_per_step`` trained segments only
        (about ``segment_size`` nodes each), so the budget counts those as the graph's nodes; and
        a GST step never holds more rows than the published recipe's step, ``configs_per_step``
        copies of the trained segments, whatever the budget: the factorized head runs over every
        configurable node of the graph, so on a large graph it gets fewer configs, which keeps
        the step's memory flat in the graph's size (benchmarks/gst_memory.json).
        """
        wanted = self.configs_per_step
        budget = self.node_budget
        if self.segment_size > 0:
            trained = max(1, self.segments_per_step) * self.segment_size
            num_nodes = min(num_nodes, trained)
            budget = min(budget, wanted * trained) if budget > 0 else wanted * trained
        if budget <= 0 or (is_tile and self.tile_join == "late"):
            return wanted
        if self.arch == "factorized" and not is_tile:
            fits = (budget - num_nodes) // max(1, config_nodes + config_links // 4)
        else:
            fits = budget // max(1, num_nodes)
        return max(min(self.min_configs_per_step, wanted), min(wanted, fits))
