"""Configuration of the GNN ranker: one dataclass, two presets, every field a ``--option``."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from tpurank.collections import Collection, parse_collections
from models.ranker import RankerConfig

MIN_CONFIGS_PER_STEP = 8  # floor of configs per step under --node-budget


@dataclass
class GnnConfig(RankerConfig):
    """GNN ranker (PyTorch Geometric) for tile and layout collections."""

    MODEL: ClassVar[str] = "gnn"

    # --- stage contract (and RankerConfig's)
    device: str = "auto"  # auto | cpu | cuda | cuda:N [run]
    threads: int = 0  # torch CPU threads for training (0 = torch default)
    predict_threads: int = 0  # torch CPU threads for predict (0 = torch default: all cores) [run]

    # --- model
    arch: str = "factorized"  # layout: factorized (config-free trunk once per graph, per-config head over the configurable nodes) | copy (the graph copied per config) [measured: benchmarks/gnn_arch.json "GNN architectures: copy vs factorized"]
    head_product: bool = True  # factorized: the head's join also multiplies each configurable node's trunk and layout embeddings (second-order terms) [measured: benchmarks/gnn_arch.json "GNN architectures: copy vs factorized"]
    head_patterns: bool = True  # factorized: the head also reads, per configurable node and config, whether each tensor's most and second-most minor dims are the largest, lane- or sublane-aligned, contracting, last or first (LightGBM's layout patterns, per node) [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    head_pool: str = "sqrt"  # factorized: the head pools its configurable nodes by mean | sqrt (sum / sqrt(nodes)), and max [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    head_heuristic: bool = True  # factorized: the cost also reads the training-free layout heuristic (features.heuristic: log padded elements, relative to the all-default config), directly and through the config vector [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    head_sizes: bool = True  # factorized: the head also reads, per configurable node, config and tensor, its log elements once padded to (8, 128) tiles, the same where the config sets the tensor's layout (what a relayouting copy moves) and their excess over the all-default config's: the heuristic per node [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    head_shares: bool = True  # factorized: the head also reads, per configurable node, config and tensor, its padded elements relative to the all-default config's mean tensor, the same where the config sets the tensor's layout, and there its default's (a copy's bytes, relative to the graph) [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    hidden: int = 64  # node embedding width of every message-passing layer
    layers: int = 3  # message-passing layers
    dropout: float = 0.0  # dropout in message passing and cross-configuration attention
    cross_attn: bool = True  # cross-configuration attention between the configs of a batch (off for tile: not adopted) [measured: benchmarks/tile_retrain.json "Tile models retrained: without cross-configuration attention (not adopted)"]

    # --- training
    configs_per_step: int = 64  # configs sampled from one graph per step
    close_bias: float = 0.0  # probability that a step samples configs of close runtimes
    steps: int = 400  # optimiser steps per collection (the horizon of the warmup-cosine schedule)
    lr: float = 2e-3  # AdamW peak learning rate
    warmup_steps: int = 20  # linear learning-rate warmup steps before the cosine decay
    amp: bool = True  # mixed precision (CUDA only) [run]
    eval_every: int = 50  # validation scoring (early stopping, best checkpoint; quick: the learning curve alone, so 100: fewer steps of the share go to it) every this many steps [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    patience: int = 4  # evaluations without improvement before stopping (0 = never)
    keep: Literal["best", "last"] = "best"  # weights a model keeps as best.pt: its best validation score's, or its last [measured: benchmarks/keep.json "Weights kept: the best inner-valid score's or the final ones"]
    val_max_configs: int = 256  # configs per valid graph scored during training (0 = all)
    final_val_max_configs: int = 0  # configs per valid graph in the report after training (0 = all): bounds that evaluation's time whatever the config count
    max_train_graphs: int = 0  # train on a seeded subset of this many graphs (0 = all): smoke runs [run]
    predict_batch: int = 64  # configs per forward pass at prediction time
    resume: bool = True  # continue from WORK/models/gnn/<slug>/seed<k>/last.pt when it exists [run]
    step_budget: int = 0  # stop this invocation after this many steps (resume later); 0 = no limit [run]
    time_budget: float = 0.0  # wall seconds for the whole train invocation, shared by its collections and folds (0 = no limit)
    budget_clock: str = "wall"  # wall | cpu: --time-budget counts wall seconds, or this process's CPU seconds (equal compute for comparisons on a loaded machine; with --threads 1) [run]
    tile_budget_weight: float = 1.0  # share of --time-budget of a tile model relative to a layout model (one fold each)

    # --- memory
    node_budget: int = 0  # per-step ceiling on node rows (copy: kept nodes x configs; factorized: kept nodes + configs x (configurable nodes + links / 4)), which bounds a step's memory and time; 0 = configs_per_step as is [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    activation_checkpointing: bool = False  # recompute message-passing activations in backward (less memory, more compute) [measured: benchmarks/gnn_memory.json "GNN training memory"]

    # --- cross-validation (issue 12)
    folds: int = 0  # K >= 2: K grouped folds of train+valid graphs (models.cv), OOF predictions; 0 = train/valid split
    regime: bool = False  # per collection, from a few timed steps (once per WORK): 2 folds and no dropout where a fold model would pass over its train graphs fewer than 30 times in its share, else --folds and dropout 0.1 (overrides both; models/gnn/<slug>/regime.json) [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    inner_valid: bool = True  # fold models hold back an inner valid set (early stopping, best weights); false: layout ones train on it too (tile ones keep it: their worst kernels scored lower without), and their learning curve is drawn on a seeded subset of the fold's held-out graphs, as many as the inner set had (needs --keep last --patience 0: nothing is chosen by it) [measured: benchmarks/gnn_fold_training.json "How the GNN's fold models train"]
    oof_max_configs: int = 0  # OOF configs per held-out train graph: a seeded subset of its LightGBM tabular rows (0 = all those rows)

    # --- Graph Segment Training (the organisers' method; off by default, see docs/gnn.md)
    segment_size: int = 0  # GST on the factorized trunk (layout; tile models train whole graphs): about this many nodes per graph segment, one segment's trunk trained per graph and step (0 = off: whole graph per step) [measured: benchmarks/gst_quality_kaggle_xla.json "GST on the factorized trunk: whole kaggle-shaped graphs vs the k=1 pruned default"]
    history_max_bytes: int = 268435456  # GST table of segment trunk outputs: limit in bytes (oldest segments evicted) [run]
    predict_context: int = 1024  # inference attention context: a fixed seeded subset of at most N of the configs ranked (0 = all), so attention stays linear in the config count [run]

    PRESETS: ClassVar[dict[str, dict[str, object]]] = {
        # quick: a CPU budget bounded by time (docs/gnn.md, "Time and threads", "Cross-validation");
        # no early stopping, so the layout fold models train on their inner slice too and
        # watch held-out graphs; tile ones keep the slice; the node budget makes steps on
        # real-sized graphs cheaper (fewer configs), more of them in a share (BENCHMARKS.md,
        # "Weights kept"; "How the GNN's fold models train")
        "quick": {"hidden": 64, "layers": 3, "configs_per_step": 64, "steps": 100000,
                  "time_budget": 900.0, "eval_every": 100, "patience": 0, "val_max_configs": 128,
                  "predict_batch": 64, "threads": 0, "warmup_steps": 20, "lr": 3e-3,
                  "node_budget": 20000, "folds": 3, "regime": True, "tile_budget_weight": 0.5,
                  "oof_max_configs": 500, "final_val_max_configs": 500, "keep": "last",
                  "inner_valid": False},
        # full: one T4 (16 GB): node_budget from the memory model (benchmarks/gnn_memory.json);
        # 3,000 s so that the whole Kaggle session stays under 3 h (BENCHMARKS.md's projection)
        "full": {"hidden": 128, "layers": 4, "configs_per_step": 96, "steps": 20000,
                 "eval_every": 500, "patience": 8, "val_max_configs": 1000, "predict_batch": 128,
                 "dropout": 0.1, "warmup_steps": 500, "lr": 1e-3, "close_bias": 0.25,
                 "time_budget": 3000.0, "node_budget": 500000, "folds": 5,
                 "oof_max_configs": 2000, "final_val_max_configs": 2000},
    }

    def collection_list(self) -> list[Collection]:
        return parse_collections(self.collection or self.collections)

    def regimed(self, collection: Collection) -> GnnConfig:
        """With ``collection``'s ``--regime`` options, once chosen (:func:`.train.choose_regime`)."""
        path = self.collection_dir(collection) / "regime.json"
        chosen = self.regime and path.is_file()
        try:
            return replace(self, **json.loads(path.read_text())["options"]) if chosen else self
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: unreadable regime ({e!r}); delete it to time it again") from None

    def budget_weight(self, collection: Collection) -> float:
        """One model's share of ``--time-budget`` relative to a layout model's:
        ``--tile-budget-weight`` for tile (small graphs, learnt in few steps)."""
        return max(1e-3, self.tile_budget_weight) if collection.is_tile else 1.0

    def configs_per_step_for(self, num_nodes: int, is_tile: bool, config_nodes: int = 0,
                             config_links: int = 0) -> int:
        """Configs sampled in one step from a graph of ``num_nodes`` kept nodes (``config_nodes``
        configurable, ``config_links`` links between those): with ``node_budget`` > 0 the step's
        node rows stay within it (the memory model in ``models.gnn.train``), never below
        :data:`MIN_CONFIGS_PER_STEP`; tile models: no budget. A GST step counts its trained
        segment as the graph, at most ``configs_per_step`` copies of it (docs/gnn.md)."""
        wanted = self.configs_per_step
        budget = self.node_budget
        if self.segment_size > 0:
            num_nodes = min(num_nodes, self.segment_size)
            cap = wanted * self.segment_size
            budget = min(budget, cap) if budget > 0 else cap
        if budget <= 0 or is_tile:
            return wanted
        if self.arch == "factorized":
            fits = (budget - num_nodes) // max(1, config_nodes + config_links // 4)
        else:
            fits = budget // max(1, num_nodes)
        return max(min(MIN_CONFIGS_PER_STEP, wanted), min(wanted, fits))
