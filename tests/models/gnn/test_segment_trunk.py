"""Graph Segment Training on the factorized trunk: exact pooling and inference, the trunk table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tpurank.collections import get_collection
from models.gnn.config import GnnConfig
from models.gnn.data import config_rows, graph_tensors
from models.gnn import gst
from models.gnn.gst import build_segments
from models.gnn.infer import InferenceOptions, graph_state, predict_costs
from models.gnn.model import ModelArgs, Pool, RankerGNN
from models.gnn.segment_trunk import (TrunkGstState, TrunkTable, segmented_graph_state,
                                      trunk_gst_costs)

CPU = torch.device("cpu")


def _model(g, **kw) -> RankerGNN:
    torch.manual_seed(0)
    args = dict(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18, hidden=16, layers=2,
                arch="factorized", head_product=True)
    args.update(kw)
    return RankerGNN(ModelArgs(**args))


def test_pool_over_parts_equals_pool_over_all():
    torch.manual_seed(0)
    pool = Pool(8)
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
        whole = graph_state(model, t)
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
    state = TrunkGstState(1 << 20)
    cost = trunk_gst_costs(model, g, t, idx, CPU, cfg, step=0, state=state)
    assert len(state.table) == segs.num_segments  # trained ones and the missing ones, stored
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
    state = TrunkGstState(1 << 20)
    key = build_segments(g, t, 4).key
    k = len(build_segments(g, t, 4).parts)
    trunk_gst_costs(model, g, t, np.arange(6), CPU, cfg, step=0, state=state)
    assert len(state.table) == k  # the first step computes every segment
    for step in range(1, 3 * k):
        trunk_gst_costs(model, g, t, np.arange(6), CPU, cfg, step=step, state=state)
    ages = [state.table.get(key, s).step for s in range(k)]
    assert min(ages) >= 3 * k - 1 - k  # no segment is older than the number of segments


def test_trunk_table_bounded():
    table = TrunkTable(max_bytes=10 * (4 * 4 + 4 * 3))
    for s in range(25):
        table.store("g", s, torch.zeros(4, 1), torch.zeros(3), step=s)
        assert table.nbytes <= table.max_bytes
    assert len(table) == 10 and table.get("g", 0) is None and table.get("g", 24).step == 24
    with pytest.raises(ValueError, match="positive"):
        TrunkTable(0)


def test_trunk_gst_on_a_copy_model_is_a_clear_error(graph_factory, tmp_path):
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5, nodes=30)
    model = _model(g, arch="copy")
    cfg = GnnConfig(segment_size=8, features=str(tmp_path))
    with pytest.raises(ValueError, match="factorized layout model"):
        trunk_gst_costs(model, g, graph_tensors(g, CPU), np.arange(6), CPU, cfg, 0,
                        TrunkGstState(1 << 20))
