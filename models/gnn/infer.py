"""Inference for the GNN ranker: config costs of a graph, validation scores, trained-model loading
and prediction files; ``train_costs``, the costs of a training step's configs (whole graph or GST).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from tpurank.collections import Collection
from tpurank.config import load_run_config
from features.processed import ProcessedGraph
from models import metrics
from models.gnn.config import GnnConfig
from models.gnn.data import GraphTensors, config_rows, graph_tensors, load_graphs
from models.gnn.gst import TrunkTable, graph_segments, gst_costs, segmented_graph_state, uses_gst
from models.gnn.model import GraphState, ModelArgs, RankerGNN
from models.training import choose_device, eval_mode, load_checkpoint, set_cpu_threads


class TensorCache:
    """Config-independent tensors of each graph, built once per graph and kept."""

    def __init__(self, device: torch.device):
        self.device = device
        self._cache: dict[int, GraphTensors] = {}

    def get(self, g: ProcessedGraph) -> GraphTensors:
        if id(g) not in self._cache:
            self._cache[id(g)] = graph_tensors(g, self.device)
        return self._cache[id(g)]


@dataclass(frozen=True)
class InferenceOptions:
    """How :func:`predict_costs` scores a graph's configs (from a run's config): ``context`` as
    ``--predict-context``, ``segment_size`` > 0: a GST model, scored exactly segment by segment."""

    context: int = 0
    seed: int = 0
    segment_size: int = 0
    features_dir: str | None = None  # where segment boundaries are cached (optional)

    @classmethod
    def from_config(cls, cfg: GnnConfig) -> "InferenceOptions":
        features = str(cfg.features_dir()) if cfg.work or cfg.features else None
        return cls(context=max(0, cfg.predict_context), seed=cfg.seed,
                   segment_size=max(0, cfg.segment_size), features_dir=features)


def graph_state(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors,
                options: InferenceOptions | None = None) -> GraphState:
    """The config-free part of a graph (:meth:`RankerGNN.graph_state`: the factorized trunk),
    segment by segment for a GST model (``options.segment_size``)."""
    if options is not None and uses_gst(model, options.segment_size):
        segs = graph_segments(g, tensors, options.segment_size, options.features_dir)
        return segmented_graph_state(model, segs, tensors)
    return model.graph_state(tensors.node_feat, tensors.node_opcode, tensors.edge_index,
                             tensors.config_node_pos, tensors.links)


def embed_configs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
                  device: torch.device, state: GraphState | None = None) -> torch.Tensor:
    """Attention inputs (len(idx), hidden) of configs ``idx`` (one chunk): the embedding part.
    ``state``: the graph's :func:`graph_state`, computed once for all its chunks."""
    feats = config_rows(g, idx, device)
    pooled = model.embed_configs(state or graph_state(model, g, tensors), feats)
    return model.config_vectors(pooled, feats)


def context_subset(n: int, size: int, seed: int) -> np.ndarray:
    """Positions (sorted) of a seeded random context of ``size`` among ``n`` configs (all when
    ``size`` is 0 or at least ``n``)."""
    return _seeded_subset(n, size, [seed, 7727, n, 0])


def _seeded_subset(n: int, size: int, key: list[int]) -> np.ndarray:
    """``size`` sorted positions among ``n`` drawn by a generator of ``key`` (all when ``size``
    is 0 or at least ``n``); valid graphs' fixed subsets use ``[seed, 7919, n]``."""
    if size <= 0 or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(key).choice(n, size=size, replace=False))


def predict_costs(model: RankerGNN, g: ProcessedGraph, batch_size: int = 64,
                  idx: np.ndarray | None = None, cache: TensorCache | None = None,
                  options: InferenceOptions | None = None) -> np.ndarray:
    """Predicted cost (lower = faster) of every config of ``g`` (or of ``idx``), in that order:
    the graph's config-free part once, configs embedded in chunks of at most ``batch_size``, then
    every config attends to the same context (``options``, by default the loaded model's)."""
    options = options or getattr(model, "inference_options", None) or InferenceOptions()
    device = next(model.parameters()).device
    tensors = (cache or TensorCache(device)).get(g)
    idx = np.arange(g.num_configs) if idx is None else np.asarray(idx)
    if len(idx) == 0:
        return np.zeros(0, dtype=np.float64)
    chunks = np.array_split(np.arange(len(idx)), math.ceil(len(idx) / max(1, batch_size)))
    context = context_subset(len(idx), options.context, options.seed)
    with eval_mode(model):
        state = graph_state(model, g, tensors, options)
        z = torch.cat([embed_configs(model, g, tensors, idx[c], device, state) for c in chunks])
        ctx = z[torch.as_tensor(context, device=z.device)]
        costs = torch.cat([model.score(z[c], ctx).double() for c in chunks])
    return costs.cpu().numpy()


def evaluate(model: RankerGNN, collection: Collection, graphs: list[ProcessedGraph], cfg: GnnConfig,
             cache: TensorCache | None = None, max_configs: int = 0) -> dict[str, Any]:
    """Official per-graph scores (τ or tile top-5 score) on valid graphs with targets (at most
    ``max_configs`` per graph: a fixed seeded subset)."""
    preds, truth = {}, {}
    for g in graphs:
        if g.target is None or g.num_configs < 2:
            continue
        idx = _seeded_subset(g.num_configs, max_configs, [cfg.seed, 7919, g.num_configs])
        preds[g.stem] = predict_costs(model, g, cfg.predict_batch, idx, cache,
                                      InferenceOptions.from_config(cfg))
        truth[g.stem] = np.asarray(g.target, dtype=np.float64)[idx]
    if not truth:
        return {"collection": collection.name, "score": float("nan"), "n_graphs": 0, "per_graph": {}}
    return metrics.score_collection(collection, preds, truth)


def train_costs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
                device: torch.device, cfg: GnnConfig, step: int) -> torch.Tensor:
    """Costs of a training step's configs ``idx`` of ``g`` (with gradient). With
    ``cfg.segment_size > 0`` a Graph Segment Training step (:func:`models.gnn.gst.gst_costs`), the
    run's trunk table kept on the model (created on first use)."""
    if not uses_gst(model, cfg.segment_size):
        return model.score(embed_configs(model, g, tensors, idx, device))
    table = model.__dict__.get("_gst_table")
    if table is None:
        table = model.__dict__["_gst_table"] = TrunkTable(cfg.history_max_bytes)
    return gst_costs(model, g, tensors, idx, device, cfg, step, table)


def load_trained_dir(model_dir: str | Path, device: torch.device | str = "cpu",
                     context: int | None = None) -> tuple[RankerGNN, GnnConfig]:
    """Model (best weights, eval mode) and config saved in ``model_dir``; ``context``: the
    predicting run's ``--predict-context`` instead of the saved one."""
    model_dir = Path(model_dir)
    state = load_checkpoint(model_dir / "best.pt", device)
    args = dict(state["model_args"])
    if args.pop("tabular_dim", 0):  # the tabular join was removed (it lost under CV)
        raise ValueError(f"{model_dir}: a GNN with the removed --tabular join; retrain it")
    model = RankerGNN(ModelArgs(**args)).to(device)
    model.load_state_dict(state["model"])
    model.eval()
    cfg_path = model_dir / "config.json"
    cfg = load_run_config(GnnConfig, cfg_path) if cfg_path.is_file() else GnnConfig()
    cfg = cfg if context is None else dataclasses.replace(cfg, predict_context=context)
    model.inference_options = InferenceOptions.from_config(cfg)  # used by predict_costs
    return model, cfg


def load_trained(work: str | Path, collection: Collection | str, seed: int | None = None,
                 tag: str = "", device: str = "auto") -> tuple[RankerGNN, GnnConfig]:
    """Public API: the trained model of ``collection`` under ``WORK/models/gnn/`` and its config
    (``seed=None``: the lowest trained seed)."""
    from tpurank.collections import get_collection

    coll = get_collection(collection) if isinstance(collection, str) else collection
    base = dataclasses.replace(GnnConfig(), work=str(work), tag=tag).collection_dir(coll)
    if seed is None:
        seeds = sorted(int(p.name[4:]) for p in base.glob("seed*")
                       if p.name[4:].isdigit() and (p / "best.pt").is_file())
        if not seeds:
            raise FileNotFoundError(f"{base}: no trained GNN (seed*/best.pt); run "
                                    f"`python -m models.gnn train --work {work} --collection {coll.name}`")
        seed = seeds[0]
    return load_trained_dir(base / f"seed{seed}", choose_device(device))


def predict_collection(cfg: GnnConfig, collection: Collection, splits=("valid", "test")
                       ) -> dict[str, Path]:
    """Write ``WORK/preds/gnn/<slug>/<split>.npz`` for every graph and config of each split."""
    from models.predictions import predictions_path, write_predictions

    set_cpu_threads(cfg.predict_threads)
    device = choose_device(cfg.device)
    model, saved = load_trained_dir(cfg.model_dir(collection), device, cfg.predict_context)
    written = {}
    for split in splits:
        graphs = load_graphs(cfg.features_dir(), collection, split)
        costs = {g.stem: source_order(g, predict_costs(model, g, saved.predict_batch or cfg.predict_batch))
                 for g in tqdm(graphs, desc=f"predict {collection.name}/{split}", leave=False)}
        path = predictions_path(cfg.preds_dir(), cfg.run_name(), collection, split)
        write_predictions(path, costs)
        written[split] = path
    return written


def source_order(g: ProcessedGraph, cost: np.ndarray) -> np.ndarray:
    """Costs in the source file's config order (``config_index``); valid/test graphs must keep
    every config exactly once."""
    index = np.asarray(g.config_index, dtype=np.int64)
    if np.array_equal(index, np.arange(len(index))):
        return cost
    if not np.array_equal(np.sort(index), np.arange(len(index))):
        raise ValueError(f"{g.collection}/{g.split}/{g.stem}: config_index is not a permutation of "
                         f"all configs (deduplicated?); predictions need one cost per source config")
    out = np.empty_like(cost)
    out[index] = cost
    return out


