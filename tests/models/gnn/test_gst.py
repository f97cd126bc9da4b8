"""Graph Segment Training on the factorized trunk: segments, exact pooling and inference, the
trunk table, training runs."""

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
from models.gnn.gst import TrunkTable, build_segments, draw_trained, gst_costs, segmented_graph_state
from models.gnn.infer import InferenceOptions, graph_state, predict_costs, train_costs
from models.gnn.model import ModelArgs, Pool, RankerGNN
from models.losses import pairwise_logistic
from models.metrics import kendall_tau

CPU = torch.device("cpu")


def _model(g, **kw) -> RankerGNN:
    torch.manual_seed(0)
    args = dict(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18, hidden=16, layers=2,
                arch="factorized", head_product=True, head_patterns=True)
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


def test_segments_cover_the_graph(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=2, nodes=30)
    segs = build_segments(g, graph_tensors(g, CPU), 7)
    assert segs.num_segments == 30 // 7 + 1
    assert sum(len(p.node_ids) for p in segs.parts) == 30
    assert sum(p.configurable for p in segs.parts) == len(g.config_node_pos)


@pytest.mark.parametrize("mode", ["mean", "sqrt"])
def test_pool_over_parts_equals_pool_over_all(mode):
    torch.manual_seed(0)
    pool = Pool(8, mode)
    h = torch.randn(23, 8)
    parts = torch.stack([pool.partial(h[a:b]) for a, b in [(0, 5), (5, 6), (6, 23)]])
    torch.testing.assert_close(pool.combine(parts), pool(h[None]))


def test_one_segment_is_the_whole_graph_model(graph_factory):
    """A segment as large as the graph: the segmented state is the unsegmented one."""
    g = graph_factory(get_collection("layout:xla:random"), "valid", "x", seed=3, nodes=30)
    model = _model(g).eval()
    whole = predict_costs(model, g, 16, options=InferenceOptions())
    one = predict_costs(model, g, 16, options=InferenceOptions(segment_size=1000))
    np.testing.assert_allclose(one, whole, rtol=1e-5, atol=1e-5)


def test_segmented_inference_is_chunk_independent_and_reads_every_configurable_node(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "valid", "x", seed=11, nodes=40)
    model = _model(g).eval()
    options = InferenceOptions(segment_size=8)
    costs = predict_costs(model, g, 16, options=options)
    np.testing.assert_allclose(predict_costs(model, g, 5, options=options), costs, rtol=1e-5,
                               atol=1e-5)
    assert np.ptp(costs) > 0
    t = graph_tensors(g, CPU)
    with torch.no_grad():
        state = segmented_graph_state(model, build_segments(g, t, 8), t)
        whole = graph_state(model, g, t)
    assert state.node_in.shape == whole.node_in.shape  # one row per configurable node
    assert state.link_feat.shape == whole.link_feat.shape


def test_training_every_segment_is_inference_and_trains_the_trunk(graph_factory, tmp_path,
                                                                  monkeypatch):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g)
    t = graph_tensors(g, CPU)
    segs = build_segments(g, t, 8)
    active = sum(p.configurable > 0 for p in segs.parts)
    monkeypatch.setattr(gst, "SEGMENTS_PER_STEP", active)
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    idx = np.arange(10)
    table = TrunkTable(1 << 20)
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, table=table)
    assert len(table) == segs.num_segments  # trained ones and the missing ones, stored
    with torch.no_grad():
        graph = segmented_graph_state(model, segs, t)
        feats = config_rows(g, idx, CPU)
        exact = model.score(model.config_vectors(model.embed_configs(graph, feats), feats))
    torch.testing.assert_close(cost.detach(), exact)
    cost.sum().backward()
    assert float(model.node_in[0].weight.grad.abs().sum()) > 0


def test_stored_segments_refreshed_oldest_first(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=6, nodes=30)
    model = _model(g)
    t = graph_tensors(g, CPU)
    cfg = GnnConfig(segment_size=4, features=str(tmp_path))
    table = TrunkTable(1 << 20)
    key = build_segments(g, t, 4).key
    k = len(build_segments(g, t, 4).parts)
    gst_costs(model, g, t, np.arange(6), CPU, cfg, step=0, table=table)
    assert len(table) == k  # the first step computes every segment
    for step in range(1, 3 * k):
        gst_costs(model, g, t, np.arange(6), CPU, cfg, step=step, table=table)
    ages = [table.get(key, s).step for s in range(k)]
    assert min(ages) >= 3 * k - 1 - k  # no segment is older than the number of segments


def test_trunk_table_bounded():
    table = TrunkTable(max_bytes=10 * (4 * 4 + 4 * 3))
    for s in range(25):
        table.store("g", s, torch.zeros(4, 1), torch.zeros(3), step=s)
        assert table.nbytes <= table.max_bytes
    assert len(table) == 10 and table.get("g", 0) is None and table.get("g", 24).step == 24
    table.store("h", 0, torch.zeros(100, 1), torch.zeros(3), step=0)  # alone over the limit
    assert table.nbytes == 0 and len(table) == 0
    with pytest.raises(ValueError, match="positive"):
        TrunkTable(0)


def test_gst_on_a_copy_model_is_a_clear_error(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g, arch="copy")
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    with pytest.raises(ValueError, match="--arch factorized"):
        train_costs(model, g, graph_tensors(g, CPU), np.arange(6), CPU, cfg, 0)
    with pytest.raises(ValueError, match="--arch factorized"):
        predict_costs(model, g, 8, options=InferenceOptions(segment_size=8))


def test_trained_segments_hold_configurable_nodes(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=6, nodes=30)
    segs = build_segments(g, graph_tensors(g, CPU), 4)
    free = {s for s, p in enumerate(segs.parts) if p.configurable == 0}
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
    # on the factorized trunk, one trained segment: at most 64 x 1,000 rows, so a large graph's
    # head gets fewer configs (floored) and a small one's all 64; the same without a node budget
    factorized = dataclasses.replace(cfg, segment_size=1000, arch="factorized")
    for one in (factorized, dataclasses.replace(factorized, node_budget=0)):
        assert one.configs_per_step_for(4_000, False, config_nodes=300, config_links=2_404) == 64
        assert one.configs_per_step_for(10_000, False, config_nodes=750, config_links=5_917) == 28
        assert one.configs_per_step_for(40_000, False, config_nodes=3_000, config_links=24_627) == 8


def test_gst_run_saves_loads_and_predicts_segment_wise(tmp_path, toy_features):
    """``python -m models.gnn train --segment-size N`` trains GST on the factorized trunk (tile
    models on whole graphs); the model saves, loads and predicts segment-wise, whatever the
    chunking."""
    from features.processed import iter_processed
    from models.gnn.infer import load_trained_dir
    from models.gnn.train import train_collection

    cfg = dataclasses.replace(GnnConfig(), work=str(tmp_path / "work"), features=str(toy_features),
                              hidden=8, layers=1, configs_per_step=8, steps=6,
                              eval_every=6, warmup_steps=2, patience=0, val_max_configs=0,
                              predict_batch=8, threads=1, segment_size=4)
    for name in ("layout:xla:random", "tile:xla"):
        coll = get_collection(name)
        assert np.isfinite(train_collection(cfg, coll)["score"])
        model, saved = load_trained_dir(cfg.model_dir(coll))
        assert saved.segment_size == 4 and model.inference_options.segment_size == 4
        g = next(iter_processed(toy_features, coll, "valid"))
        np.testing.assert_allclose(predict_costs(model, g, 5), predict_costs(model, g, 64),
                                   atol=1e-5)


def _train_far_signal(cfg: GnnConfig, steps: int = 300) -> float:
    g = far_signal_graph()
    torch.manual_seed(0)
    model = RankerGNN(ModelArgs(kind="layout", node_dim=6, config_dim=18, hidden=16, layers=2,
                                arch=cfg.arch, head_product=True))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = pairwise_logistic
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


@pytest.mark.parametrize("segment_size, arch", [(0, "copy"), (0, "factorized"), (13, "factorized")],
                         ids=["whole-graph-copy", "whole-graph", "gst"])
def test_far_signal_is_learnt_from_one_trained_segment(segment_size, arch, tmp_path):
    """Four chained segments, the one configurable node in the last: GST with one trained segment
    per step ranks held-out configs like whole-graph training."""
    cfg = GnnConfig(segment_size=segment_size, features=str(tmp_path), arch=arch)
    assert kendall_tau(far_signal_graph().target, far_signal_graph().target) == 1.0
    assert _train_far_signal(cfg) >= 0.9
