"""Graph Segment Training: history table, exact segmented inference, a learning GST run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tpurank.collections import get_collection
from models.gnn.config import GnnConfig
from models.gnn.data import config_rows, graph_tensors
from models.gnn.gst import GstState, HistoryTable, SegmentSpec, build_segments, gst_costs
from models.gnn.infer import InferenceOptions, predict_costs, train_costs
from models.gnn.model import ModelArgs, RankerGNN
from models.losses import get_loss

CPU = torch.device("cpu")


def _model(g, **kw) -> RankerGNN:
    torch.manual_seed(0)
    args = dict(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18, hidden=16, layers=2,
                cross_heads=2)
    args.update(kw)
    return RankerGNN(ModelArgs(**args))


def test_history_table_bounded_and_refreshed():
    row_bytes = 4 * 8 * 4 + 4  # 4 segments x 8 floats + a 4-byte bool mask
    table = HistoryTable(max_bytes=10 * row_bytes)
    for c in range(25):
        table.store("g", np.array([c]), np.array([1]), 4, torch.full((1, 1, 8), float(c)))
        assert table.nbytes <= table.max_bytes
    assert len(table) == 10  # the 15 oldest rows were evicted
    values, have = table.lookup("g", np.array([0, 24]), np.array([1, 2]), 8, CPU)
    assert not have[0].any()  # evicted
    assert have[1].tolist() == [True, False] and float(values[1, 0, 0]) == 24.0
    table.store("g", np.array([24]), np.array([1, 2]), 4, torch.full((1, 2, 8), -1.0))  # refresh
    values, have = table.lookup("g", np.array([24]), np.array([1, 2]), 8, CPU)
    assert have.all() and torch.all(values == -1.0)
    with pytest.raises(ValueError, match="positive"):
        HistoryTable(0)


@pytest.mark.parametrize("halo", [2, 3])
def test_segmented_inference_equals_whole_graph(graph_factory, halo):
    """Exact when every core node's receptive field (``layers`` hops) lies inside its segment
    plus halo, norm is node-local and segments are combined like the pooling."""
    g = graph_factory(get_collection("layout:xla:random"), "valid", "x", seed=11, nodes=40)
    model = _model(g, norm="layer", layers=2)
    spec = SegmentSpec(size=8, halo=halo)
    whole = predict_costs(model, g, 16, options=InferenceOptions())
    seg = predict_costs(model, g, 16, options=InferenceOptions(segments=spec))
    np.testing.assert_allclose(seg, whole, rtol=1e-4, atol=1e-5)
    cut = predict_costs(model, g, 16, options=InferenceOptions(segments=SegmentSpec(size=8)))
    assert not np.allclose(cut, whole, atol=1e-4)  # dropped crossing edges change the embedding


def test_segments_cover_the_graph(graph_factory):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=2, nodes=30)
    t = graph_tensors(g, CPU)
    segs = build_segments(g, t, SegmentSpec(size=7, halo=1))
    assert segs.num_segments == 30 // 7 + 1
    assert float(segs.sizes.sum()) == 30
    assert sum(int(p.config_cols.numel()) for p in build_segments(g, t, SegmentSpec(size=7)).parts) \
        == len(g.config_node_pos)  # without halo each configurable node is in one segment


def test_gst_step_with_empty_history_equals_exact_forward(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g)
    cfg = GnnConfig(segment_size=8, segments_per_step=2, stale_dropout=0.0, features=str(tmp_path))
    t = graph_tensors(g, CPU)
    idx = np.arange(10)
    state = GstState(1 << 20)
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, state=state)
    segs = build_segments(g, t, SegmentSpec(size=8))
    from models.gnn.gst import segmented_embed
    feats = config_rows(g, idx, CPU)
    exact = model.score(model.config_vectors(segmented_embed(model, segs, feats, "pool"), feats))
    torch.testing.assert_close(cost, exact)
    assert len(state.history) == len(idx) and state.history.nbytes > 0
    cost.sum().backward()
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in model.node_in.parameters())
    # history reused at the next step; stale dropout keeps costs finite
    cost2 = gst_costs(model, g, t, idx, CPU, dataclasses.replace(cfg, stale_dropout=0.5), 1, state)
    assert torch.isfinite(cost2).all()


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_gst_training_decreases_loss(graph_factory, kind, tmp_path):
    coll = get_collection("layout:xla:random" if kind == "layout" else "tile:xla")
    graphs = [graph_factory(coll, "train", f"g{k}", seed=20 + k, nodes=36, configs=64)
              for k in range(3)]
    g0 = graphs[0]
    model = _model(g0, kind=kind, config_dim=18 if kind == "layout" else 24,
                   tile_join="late" if kind == "tile" else "early")
    cfg = GnnConfig(segment_size=10, segments_per_step=1, stale_dropout=0.5, features=str(tmp_path))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = get_loss("logistic")
    tensors = [graph_tensors(g, CPU) for g in graphs]
    losses = []
    rng = np.random.default_rng(0)
    for step in range(120):
        k = step % len(graphs)
        idx = np.sort(rng.choice(64, 24, replace=False))
        cost = train_costs(model, graphs[k], tensors[k], idx, CPU, cfg, step)
        loss = loss_fn(cost, torch.as_tensor(graphs[k].target[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert np.mean(losses[-20:]) < 0.9 * np.mean(losses[:20])
    assert model.__dict__["_gst_state"].history.nbytes > 0  # default state lives on the model


def test_gst_run_through_the_training_loop(tmp_path, toy_features):
    """``python -m models.gnn train --segment-size N``: trains, saves, predicts segment-wise."""
    from features.processed import iter_processed
    from models.gnn.infer import load_trained_dir
    from models.gnn.train import train_collection

    coll = get_collection("layout:xla:random")
    cfg = dataclasses.replace(GnnConfig(), work=str(tmp_path / "work"), features=str(toy_features),
                              hidden=8, layers=1, opcode_dim=4, configs_per_step=8, steps=8,
                              eval_every=4, warmup_steps=2, patience=0, val_max_configs=0,
                              predict_batch=8, threads=1, cross_heads=2, segment_size=4,
                              segments_per_step=1)
    report = train_collection(cfg, coll)
    assert np.isfinite(report["score"])
    model, saved = load_trained_dir(cfg.model_dir(coll))
    assert saved.segment_size == 4 and model.inference_options.segments == SegmentSpec(size=4)
    g = next(iter_processed(toy_features, coll, "valid"))
    np.testing.assert_allclose(predict_costs(model, g, 5), predict_costs(model, g, 64), atol=1e-5)
    assert any((toy_features / coll.slug / "segments").rglob("contiguous-4.npz"))  # cached


def test_history_fill_off_uses_only_trained_and_known_segments(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=6, nodes=30)
    model = _model(g)
    cfg = GnnConfig(segment_size=8, segments_per_step=1, stale_dropout=0.0, history_fill=False,
                    features=str(tmp_path))
    t = graph_tensors(g, CPU)
    idx = np.arange(6)
    state = GstState(1 << 20)
    cost = gst_costs(model, g, t, idx, CPU, cfg, step=0, state=state)
    segs = build_segments(g, t, SegmentSpec(size=8))
    values, have = state.history.lookup(segs.key, idx, np.arange(segs.num_segments),
                                         model.pool.out_dim, CPU)
    assert int(have.any(dim=0).sum()) == 1  # only the trained segment was embedded
    from models.gnn.gst import embed_segment
    trained = int(torch.nonzero(have[0]).flatten()[0])
    feats = config_rows(g, idx, CPU)
    alone = embed_segment(model, segs.parts[trained], feats)
    torch.testing.assert_close(cost, model.score(model.config_vectors(alone, feats)))
