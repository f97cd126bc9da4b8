"""Graph Segment Training: history table, exact summed inference, learning GST runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tpurank.collections import get_collection
from features.processed import ProcessedGraph
from models.gnn.config import GnnConfig
from models.gnn.data import config_rows, graph_tensors
from models.gnn import gst
from models.gnn.gst import (GstState, HistoryTable, build_segments, draw_trained, gst_costs,
                            segment_config_key, segment_scores)
from models.gnn.infer import InferenceOptions, predict_costs, train_costs
from models.gnn.model import ModelArgs, RankerGNN
from models.losses import get_loss
from models.metrics import kendall_tau

CPU = torch.device("cpu")


def _model(g, **kw) -> RankerGNN:
    torch.manual_seed(0)
    args = dict(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18, hidden=16, layers=2,
                arch="copy")
    args.update(kw)
    return RankerGNN(ModelArgs(**args))


def far_signal_graph(nodes: int = 40, configs: int = 240, seed: int = 0) -> ProcessedGraph:
    """A chain of ``nodes`` nodes (four segments of 10 at segment size 13) whose one configurable
    node sits in the last segment; the runtime is a function of its layout values plus noise."""
    rng = np.random.default_rng(seed)
    edge_index = np.stack([np.arange(nodes - 1), np.arange(1, nodes)]).astype(np.int64)
    config_feat = rng.integers(-1, 6, size=(configs, 1, 18)).astype(np.int8)
    values = config_feat[:, 0].astype(np.float64)
    target = 30.0 + 9.0 * values[:, 0] + 3.0 * values[:, 1] + values[:, 2] \
        + 0.3 * rng.normal(size=configs)
    return ProcessedGraph(
        collection="layout:xla:random", split="train", stem="chain",
        node_feat=rng.normal(size=(nodes, 6)).astype(np.float32),
        node_opcode=rng.integers(1, 30, size=nodes).astype(np.int64), edge_index=edge_index,
        orig_node_ids=np.arange(nodes), config_feat=config_feat, config_index=np.arange(configs),
        config_node_pos=np.array([nodes - 5], dtype=np.int64), target=target)


def test_history_table_bounded_and_refreshed():
    entry = 8 + 4  # a uint64 key and a float32 score
    table = HistoryTable(max_bytes=10 * entry)
    for s in range(25):  # one entry in each of 25 segments
        table.store("g", s, np.array([7], dtype=np.uint64), np.array([float(s)]))
        assert table.nbytes <= table.max_bytes
    assert len(table) == 10  # the 15 oldest segments were evicted
    values, have = table.lookup("g", 0, np.array([7], dtype=np.uint64))
    assert not have.any() and not values.any()  # evicted: missing reads as zero
    values, have = table.lookup("g", 24, np.array([7, 8], dtype=np.uint64))
    assert have.tolist() == [True, False] and values.tolist() == [24.0, 0.0]
    table.store("g", 24, np.array([8, 7], dtype=np.uint64), np.array([1.0, -1.0]))
    values, have = table.lookup("g", 24, np.array([7, 8], dtype=np.uint64))
    assert have.all() and values.tolist() == [-1.0, 1.0]  # refreshed and added
    table.store("h", 0, np.arange(11, dtype=np.uint64), np.zeros(11))  # alone over the limit
    assert table.nbytes == 0 and len(table) == 0
    with pytest.raises(ValueError, match="positive"):
        HistoryTable(0)


def test_segments_cover_the_graph(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=2, nodes=30)
    t = graph_tensors(g, CPU)
    segs = build_segments(g, t, 7)
    assert segs.num_segments == 30 // 7 + 1
    assert sum(len(p.node_ids) for p in segs.parts) == 30
    cut = segs.parts  # each configurable node is in one segment
    assert sum(int(p.config_cols.numel()) for p in cut) == len(g.config_node_pos)
    assert sum(p.configurable for p in cut) == len(g.config_node_pos)
    assert [p.config_free for p in cut] == [p.configurable == 0 for p in cut]


def test_summed_inference_is_exact_and_chunk_independent(graph_factory):
    """Inference scores every segment fresh (all configs as each segment's attention context)
    and sums the scores, whatever the chunking."""
    g = graph_factory(get_collection("layout:xla:random"), "valid", "x", seed=11, nodes=40)
    model = _model(g).eval()
    options = InferenceOptions(segment_size=8)
    costs = predict_costs(model, g, 16, options=options)
    np.testing.assert_allclose(predict_costs(model, g, 5, options=options), costs, rtol=1e-5,
                               atol=1e-5)
    segs = build_segments(g, graph_tensors(g, CPU), 8)
    assert any(p.config_free for p in segs.parts)  # embedded for one config only
    with torch.no_grad():
        feats = config_rows(g, np.arange(g.num_configs), CPU)
        manual = sum(segment_scores(model, p, feats, None) for p in segs.parts)
    np.testing.assert_allclose(costs, manual.double().numpy(), rtol=1e-5, atol=1e-5)


def test_gst_step_training_every_segment_is_exact(graph_factory, tmp_path, monkeypatch):
    """Training every segment that holds a configurable node gives the exact costs up to the
    config-free segments' per-graph constant."""
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g)
    t = graph_tensors(g, CPU)
    segs = build_segments(g, t, 8)
    monkeypatch.setattr(gst, "SEGMENTS_PER_STEP", segs.num_segments)
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    idx = np.arange(10)
    state = GstState(1 << 20)
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, state=state)
    feats = config_rows(g, idx, CPU)
    active = [p for p in segs.parts if not p.config_free]
    assert 0 < len(active) < segs.num_segments
    torch.testing.assert_close(cost, sum(segment_scores(model, p, feats, None) for p in active))
    cost.sum().backward()
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in model.node_in.parameters())
    assert len(state.history) == len(active) * len(idx)  # one entry per (segment, distinct config)


def test_missing_history_counts_as_zero(graph_factory, tmp_path, monkeypatch):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=6, nodes=30)
    model = _model(g)
    t = graph_tensors(g, CPU)
    segs = build_segments(g, t, 8)
    active = sum(not p.config_free for p in segs.parts)
    monkeypatch.setattr(gst, "STALE_DROPOUT", 0.0)
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    idx = np.arange(6)
    state = GstState(1 << 20)
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, state=state)
    assert len(state.history) == len(idx)  # only the trained segment was scored
    rows = config_rows(g, idx, CPU).numpy()
    (trained,) = [s for s, p in enumerate(segs.parts)
                  if state.history.lookup(segs.key, s, segment_config_key(rows, p))[1].all()]
    alone = segment_scores(model, segs.parts[trained], config_rows(g, idx, CPU), None)
    torch.testing.assert_close(cost, alone * active)  # rescaled to the segments kept (all)
    warm = GstState(1 << 20)  # every stale score read from the table
    for s, p in enumerate(segs.parts):
        warm.history.store(segs.key, s, segment_config_key(rows, p), np.ones(len(idx)))
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, state=warm)
    torch.testing.assert_close(cost, alone * active + segs.num_segments - 1)


def test_trained_segments_hold_configurable_nodes(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=6, nodes=30)
    segs = build_segments(g, graph_tensors(g, CPU), 4)
    free = {s for s, p in enumerate(segs.parts) if p.config_free}
    assert free
    rng = np.random.default_rng(0)
    drawn = [int(s) for _ in range(300) for s in draw_trained(rng, segs, 1)]
    assert not set(drawn) & free
    counts = np.bincount(drawn, minlength=segs.num_segments)
    weights = np.array([p.configurable for p in segs.parts])
    assert np.corrcoef(counts, weights)[0, 1] > 0.9  # in proportion to configurable nodes
    assert len(draw_trained(rng, segs, 99)) == segs.num_segments - len(free)


def test_configs_per_step_sized_from_the_trained_segments():
    cfg = GnnConfig(node_budget=200_000, configs_per_step=64, arch="copy")
    assert cfg.configs_per_step_for(40_000, is_tile=False) == 8
    seg = dataclasses.replace(cfg, segment_size=1000)
    assert seg.configs_per_step_for(40_000, is_tile=False) == 64
    # on the factorized trunk, one trained segment: at most the recipe's 64 x 1,000 rows, so a
    # large graph's head gets fewer configs (floored) and a small one's all 64; the same without
    # a node budget
    factorized = dataclasses.replace(seg, arch="factorized")
    for one in (factorized, dataclasses.replace(factorized, node_budget=0)):
        assert one.configs_per_step_for(4_000, False, config_nodes=300, config_links=2_404) == 64
        assert one.configs_per_step_for(10_000, False, config_nodes=750, config_links=5_917) == 28
        assert one.configs_per_step_for(40_000, False, config_nodes=3_000, config_links=24_627) == 8


@pytest.mark.parametrize("arch", ["factorized", "copy"])
def test_gst_run_saves_loads_and_predicts_segment_wise(arch, tmp_path, toy_features):
    """``python -m models.gnn train --segment-size N``: the default ``--arch factorized`` trains
    GST on its trunk, ``--arch copy`` the published recipe; either saves, loads and predicts
    segment-wise, whatever the chunking."""
    from features.processed import iter_processed
    from models.gnn.infer import load_trained_dir
    from models.gnn.train import train_collection

    coll = get_collection("layout:xla:random")
    cfg = dataclasses.replace(GnnConfig(), work=str(tmp_path / "work"), features=str(toy_features),
                              hidden=8, layers=1, configs_per_step=8, steps=6,
                              eval_every=6, warmup_steps=2, patience=0, val_max_configs=0,
                              predict_batch=8, threads=1, segment_size=4, arch=arch)
    report = train_collection(cfg, coll)
    assert np.isfinite(report["score"])
    model, saved = load_trained_dir(cfg.model_dir(coll))
    assert model.args.arch == arch and model.factorized == (arch == "factorized")
    assert saved.segment_size == 4 and model.inference_options.segment_size == 4
    g = next(iter_processed(toy_features, coll, "valid"))
    np.testing.assert_allclose(predict_costs(model, g, 5), predict_costs(model, g, 64), atol=1e-5)


def test_gst_on_a_factorized_model_is_a_clear_error(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g, arch="factorized")
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    with pytest.raises(ValueError, match="copy model's per-config path"):
        gst_costs(model, g, graph_tensors(g, CPU), np.arange(6), CPU, cfg, 0, GstState(1 << 20))


def _train_far_signal(cfg: GnnConfig, steps: int = 300, arch: str = "copy") -> float:
    g = far_signal_graph()
    torch.manual_seed(0)
    model = RankerGNN(ModelArgs(kind="layout", node_dim=6, config_dim=18, hidden=16, layers=2,
                                arch=arch, head_product=True))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = get_loss("logistic")
    tensors = graph_tensors(g, CPU)
    train, held_out = np.arange(160), np.arange(160, g.num_configs)
    rng = np.random.default_rng(0)
    for step in range(steps):
        idx = np.sort(rng.choice(train, 32, replace=False))
        loss = loss_fn(train_costs(model, g, tensors, idx, CPU, cfg, step),
                       torch.as_tensor(g.target[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    options = InferenceOptions(segment_size=cfg.segment_size)
    return kendall_tau(predict_costs(model, g, 32, idx=held_out, options=options),
                       g.target[held_out])


@pytest.mark.parametrize("arch", ["copy", "factorized"])
@pytest.mark.parametrize("segment_size", [0, 13], ids=["whole-graph", "gst"])
def test_far_signal_is_learnt_from_one_trained_segment(segment_size, arch, tmp_path):
    """Four chained segments, the one configurable node in the last: GST with one trained segment
    per step (and stale dropout 0.5 for the copy model's recipe) ranks held-out configs like
    whole-graph training."""
    cfg = GnnConfig(segment_size=segment_size, features=str(tmp_path), arch=arch)
    assert kendall_tau(far_signal_graph().target, far_signal_graph().target) == 1.0
    assert _train_far_signal(cfg, arch=arch) >= 0.9


def test_identical_configs_get_identical_costs_once_the_table_is_warm(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=8, nodes=30,
                      configs=40)
    g.config_feat[17] = g.config_feat[5]
    model = _model(g)
    t = graph_tensors(g, CPU)
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    state = GstState(1 << 20)
    rng = np.random.default_rng(0)
    for step in range(12):  # warm the table; 5 and 17 are never in the same batch
        pair = [5] if step % 2 else [17]
        others = rng.choice(np.setdiff1d(np.arange(40), [5, 17]), 11, replace=False)
        gst_costs(model, g, t, np.sort(np.concatenate([pair, others])), CPU, cfg, step, state)
    idx = np.array([1, 5, 9, 17, 30])
    for step in range(12, 18):
        cost = gst_costs(model, g, t, idx, CPU, cfg, step, state).detach()
        assert float(cost[1]) == float(cost[3])
        assert float(cost[1]) != float(cost[0])
