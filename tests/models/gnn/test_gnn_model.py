"""Forward/backward of both architectures, tile and layout, and the cross-configuration attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tpurank.collections import get_collection
from models.gnn.data import config_rows, graph_tensors, sample_configs
from models.gnn.model import CrossConfigAttention, ModelArgs, RankerGNN


def _forward(graph, args: ModelArgs, batch: int = 8) -> torch.Tensor:
    torch.manual_seed(0)
    model = RankerGNN(args)
    t = graph_tensors(graph, torch.device("cpu"))
    feats = config_rows(graph, np.arange(batch), torch.device("cpu"))
    cost = model(t.node_feat, t.node_opcode, t.edge_index, feats, t.config_node_pos, links=t.links)
    assert cost.shape == (batch,)
    assert torch.isfinite(cost).all()
    cost.sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    return cost


@pytest.mark.parametrize("kind,arch", [("tile", "copy"), ("layout", "copy"), ("layout", "factorized")])
@pytest.mark.parametrize("cross_attn", [True, False])
def test_forward_backward_each_layer(graph_factory, kind, arch, cross_attn):
    coll = get_collection("tile:xla" if kind == "tile" else "layout:nlp:random")
    g = graph_factory(coll, "train", "x", seed=3)
    args = ModelArgs(kind=kind, node_dim=g.node_feat.shape[1],
                     config_dim=18 if kind == "layout" else 24, hidden=16, layers=2,
                     cross_attn=cross_attn, arch=arch, head_heuristic=arch == "factorized")
    _forward(g, args)


@pytest.mark.parametrize("arch", ["copy", "factorized"])
def test_layout_config_changes_the_cost(graph_factory, arch):
    """Two configs of the same graph must be able to get different costs (config is joined)."""
    g = graph_factory(get_collection("layout:xla:random"), "train", "x", seed=5)
    torch.manual_seed(0)
    model = RankerGNN(ModelArgs(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18,
                                hidden=8, layers=1, cross_attn=False, arch=arch))
    t = graph_tensors(g, torch.device("cpu"))
    feats = config_rows(g, np.arange(6), torch.device("cpu"))
    cost = model(t.node_feat, t.node_opcode, t.edge_index, feats, t.config_node_pos, links=t.links)
    assert float(cost.std()) > 0
    # without cross attention a config's cost does not depend on its batch neighbours
    alone = model(t.node_feat, t.node_opcode, t.edge_index, feats[:1], t.config_node_pos,
                  links=t.links)
    assert torch.allclose(alone, cost[:1], atol=1e-5)


def test_cross_attention_mixes_configs():
    torch.manual_seed(0)
    layer = CrossConfigAttention(8, heads=2, dropout=0.0)
    z = torch.randn(5, 8)
    out = layer(z)
    z2 = z.clone()
    z2[4] = torch.randn(8)  # changing one config changes the others' outputs
    assert not torch.allclose(layer(z2)[0], out[0])


def test_sample_configs_distinct_and_close_bias():
    rng = np.random.default_rng(0)
    target = np.arange(1000, dtype=float)[::-1]
    idx = sample_configs(rng, target, 16)
    assert len(set(idx.tolist())) == 16
    close = sample_configs(np.random.default_rng(1), target, 16, close_bias=1.0)
    spread = target[close].max() - target[close].min()
    assert spread < 4 * 16  # drawn from a window of 64 adjacent runtimes
    assert len(sample_configs(rng, target[:5], 16)) == 5


def _trained_like(graph_factory, seed: int = 8, arch: str = "copy"):
    g = graph_factory(get_collection("layout:xla:random"), "valid", "x", seed=seed, configs=50)
    torch.manual_seed(0)
    model = RankerGNN(ModelArgs(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18,
                                hidden=16, layers=2, arch=arch))
    return g, model


@pytest.mark.parametrize("arch", ["copy", "factorized"])
def test_prediction_is_deterministic_and_chunk_and_order_independent(graph_factory, arch):
    from models.gnn.infer import InferenceOptions, predict_costs

    g, model = _trained_like(graph_factory, arch=arch)
    order = np.random.default_rng(0).permutation(50)
    for options in (InferenceOptions(), InferenceOptions(context=16, seed=3)):
        ref = predict_costs(model, g, 64, options=options)
        assert ref.shape == (50,) and np.isfinite(ref).all() and np.ptp(ref) > 0
        for batch in (1, 7, 13, 50):
            np.testing.assert_allclose(predict_costs(model, g, batch, options=options), ref,
                                       rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(predict_costs(model, g, 64, options=options), ref)
    # all configs as context: a config's cost does not depend on the order they are given in
    shuffled = predict_costs(model, g, 7, idx=order)
    np.testing.assert_allclose(shuffled, predict_costs(model, g, 64)[order], rtol=1e-5, atol=1e-6)


def test_fixed_context_makes_a_config_independent_of_the_others(graph_factory):
    g, model = _trained_like(graph_factory, seed=9)
    t = graph_tensors(g, torch.device("cpu"))
    feats = config_rows(g, np.arange(10), torch.device("cpu"))
    with torch.no_grad():
        state = model.graph_state(t.node_feat, t.node_opcode, t.edge_index, t.config_node_pos)
        z = model.config_vectors(model.embed_configs(state, feats), feats)
        ctx = z[:6]
        both = model.score(z, ctx)
        alone = model.score(z[8:9], ctx)
        assert torch.allclose(both[8:9], alone, atol=1e-6)
        assert torch.allclose(model.score(z), model(t.node_feat, t.node_opcode, t.edge_index,
                                                    feats, t.config_node_pos), atol=1e-6)


def test_factorized_trunk_runs_once_per_graph_at_prediction(graph_factory, monkeypatch):
    from models.gnn.infer import predict_costs

    g, model = _trained_like(graph_factory, arch="factorized")
    calls = []
    trunk = RankerGNN.trunk
    monkeypatch.setattr(RankerGNN, "trunk", lambda self, *a: calls.append(1) or trunk(self, *a))
    predict_costs(model, g, 7)  # 8 chunks of configs
    assert len(calls) == 1
    copy_g, copy_model = _trained_like(graph_factory, arch="copy")
    predict_costs(copy_model, copy_g, 7)
    assert len(calls) == 1  # the copy model has no config-free trunk


def test_factorized_graph_without_configurable_nodes_ties_every_config(graph_factory):
    from models.gnn.infer import predict_costs

    g, model = _trained_like(graph_factory, arch="factorized")
    g.config_node_pos = g.config_node_pos[:0]
    g.config_feat = g.config_feat[:, :0]
    g.config_graph = np.zeros((0, 6), np.int64)
    cost = predict_costs(model, g, 16)
    assert cost.shape == (50,) and np.isfinite(cost).all()
    assert np.ptp(cost) < 1e-5  # nothing tells the configs apart


def test_unknown_arch_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown arch"):
        RankerGNN(ModelArgs(kind="layout", node_dim=4, config_dim=18, arch="twin"))


def test_factorized_join_folds_the_encoder_into_one_lookup():
    """The head's join GELU(W [trunk; encoder(values)] + b) equals its fused form (config-free
    half once per graph + a summed lookup per node), gradients included."""
    from models.gnn.model import ConfigHead, LayoutConfigEncoder

    torch.manual_seed(0)
    encoder = LayoutConfigEncoder(4, 16)
    head = ConfigHead(ModelArgs(kind="layout", node_dim=4, config_dim=18, hidden=16,
                                arch="factorized", head_product=False))
    values = torch.randint(-1, 7, (5, 7, 18)).to(torch.int8)  # 6 is out of range: last bucket
    node_h = torch.randn(7, 16)
    plain = head.join(torch.cat([node_h.expand(5, 7, 16), encoder(values)], dim=-1))
    table = encoder.projected_table(head.join[0].weight[:, 16:])
    lookup = torch.nn.functional.embedding_bag(encoder.indices(values).view(-1, 18), table,
                                               mode="sum").view(5, 7, 16)
    fused = head.join[1](lookup + head.node_inputs(node_h, encoder))
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-5)
    (g_plain,) = torch.autograd.grad(plain.sum(), encoder.embed.weight)
    (g_fused,) = torch.autograd.grad(fused.sum(), encoder.embed.weight)
    torch.testing.assert_close(g_fused, g_plain, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("links", [40, 0])
def test_link_messages_equal_pyg_gineconv(links):
    """The config head's fused link messages give PyG's GINEConv numbers and gradients: node-major
    states (n, B, d) against GINEConv on (B, n, d); nodes without incoming links get none."""
    from torch_geometric.nn import GINEConv

    from models.gnn.model import gine_mean

    torch.manual_seed(0)
    n, configs, d = 12, 5, 8
    conv = GINEConv(torch.nn.Linear(d, d), aggr="mean")
    edge_index = torch.randint(0, n - 2, (2, links))  # the last two nodes receive nothing
    edge_feat = torch.randn(links, d, requires_grad=True)
    x = torch.randn(configs, n, d, requires_grad=True)
    expected = conv(x, edge_index, edge_feat)
    got = gine_mean(conv, x.transpose(0, 1).contiguous(), edge_index, edge_feat).transpose(0, 1)
    torch.testing.assert_close(got, expected)
    weights = torch.randn_like(expected)
    grads = torch.autograd.grad((expected * weights).sum(), [x, edge_feat, conv.nn.weight],
                                allow_unused=True)
    fused = torch.autograd.grad((got * weights).sum(), [x, edge_feat, conv.nn.weight],
                                allow_unused=True)
    for a, b in zip(grads, fused):
        if a is None:
            assert b is None or not b.abs().sum()
        else:
            torch.testing.assert_close(b, a)


def test_sqrt_pool_keeps_the_scale_of_independent_node_variation():
    """sum / sqrt(n) over n nodes varying independently: the same spread at 10 and 1,000 nodes;
    the mean's spread shrinks as 1 / sqrt(n)."""
    from models.gnn.model import Pool

    torch.manual_seed(0)
    small, large = torch.randn(4000, 10, 1), torch.randn(400, 1000, 1)
    sqrt, mean = Pool(1, "sqrt"), Pool(1, "mean")
    assert float(sqrt(small)[:, 0].std()) == pytest.approx(float(sqrt(large)[:, 0].std()), rel=0.1)
    assert float(mean(large)[:, 0].std()) < 0.05
    with pytest.raises(ValueError, match="unknown pool"):
        Pool(1, "sum")



def test_pattern_bits_read_the_minor_dims_of_each_tensor():
    """Per tensor: the bits of the most minor dim, the second-most minor's last bit, and whether
    the tensor is left default; the head reads them, and names a graph without them."""
    from models.gnn.model import PATTERN_WIDTH, ConfigHead, ConfigLinks, pattern_bits

    patterns = torch.zeros(2, 3, 7, 6, dtype=torch.bool)
    patterns[0, 0, 2, :] = True  # node 0, out tensor, dim 2: every bit
    patterns[1, 1, 0, 5] = True  # node 1, in tensor, dim 0: the second-minor bit
    values = torch.full((1, 2, 18), -1, dtype=torch.int8)
    values[0, 0, 0:2] = torch.tensor([2, 0])  # node 0 out: minor 2, second 0
    values[0, 1, 6:8] = torch.tensor([1, 0])  # node 1 in: minor 1, second 0
    bits = pattern_bits(patterns, values)
    assert bits.shape == (1, 2, PATTERN_WIDTH)
    assert bits[0, 0, :7].tolist() == [1, 1, 1, 1, 1, 0, 0]
    assert bits[0, 1, 7:14].tolist() == [0, 0, 0, 0, 0, 1, 0]
    assert bits[0, 0, 13] == 1 and bits[0, 1, 6] == 1  # default tensors
    head = ConfigHead(ModelArgs(kind="layout", node_dim=4, config_dim=18, hidden=8,
                                arch="factorized", head_patterns=True))
    links = ConfigLinks(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                        torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    links.graph = "layout:xla:random/train/old"
    with pytest.raises(ValueError, match="xla:random/train/old: no layout_context.npz"):
        head._patterns(links, values)
    links.patterns = patterns
    assert head._patterns(links, values).shape == (1, 2, 16)  # join and product halves


def test_a_checkpoint_with_the_removed_tabular_join_is_named(tmp_path):
    """Checkpoints written before the removal carry ``tabular_dim``: 0 loads as before, a model
    that joined tabular features gets an error naming its folder."""
    from dataclasses import asdict

    from models.gnn.infer import load_trained_dir
    from models.training import save_checkpoint

    model = RankerGNN(ModelArgs(kind="layout", node_dim=4, config_dim=18, hidden=8))
    for dim in (0, 5):
        save_checkpoint(tmp_path / f"m{dim}" / "best.pt", {
            "model_args": {**asdict(model.args), "tabular_dim": dim}, "model": model.state_dict()})
    assert load_trained_dir(tmp_path / "m0")[0].args == model.args
    with pytest.raises(ValueError, match="m5.*removed --tabular"):
        load_trained_dir(tmp_path / "m5")


def _context_graph(tmp_path):
    """A random 8-node layout graph with 4 configurable nodes, its 32 configs and layout context."""
    from features.io import load_npz
    from features.tabular import layout_context

    rng = np.random.default_rng(0)
    node_feat = np.zeros((8, 140), np.float32)
    for i in range(8):
        rank = int(rng.integers(1, 5))
        node_feat[i, 21:21 + rank] = rng.integers(1, 300, rank)
        node_feat[i, 134:134 + rank] = rng.permutation(rank)
    edges = np.array([[u, v] for u in range(1, 8) for v in rng.choice(u, min(u, 2), replace=False)])
    ids = np.array([3, 5, 6, 7])
    configs = rng.integers(-1, 6, (32, 4, 18)).astype(np.float32)
    np.savez(tmp_path / "g.npz", node_feat=node_feat, node_opcode=np.arange(8), edge_index=edges,
             node_config_ids=ids, node_config_feat=configs, config_runtime=np.ones(32),
             node_splits=np.array([0]))
    return node_feat, ids, edges, configs, layout_context(load_npz(tmp_path / "g.npz"))


def _padding_links(ctx):
    from models.gnn.model import ConfigLinks

    return ConfigLinks(*(torch.zeros(s, dtype=torch.long) for s in ((2, 0), 0, (0, 2), 0)),
                       padding=torch.as_tensor(ctx.padding), default_dims=torch.as_tensor(ctx.default_dims))


def test_heuristic_log_cost_prices_configs_as_the_layout_heuristic(tmp_path):
    """The head's heuristic input, from the layout context's tables, equals the log of
    features.heuristic's padded elements: default (-1) and out-of-rank dims included."""
    from features.heuristic import LayoutHeuristic
    from models.gnn.model import heuristic_log_cost

    node_feat, ids, edges, configs, ctx = _context_graph(tmp_path)
    expected = np.log(LayoutHeuristic(node_feat, ids, edges).costs(configs))
    links = _padding_links(ctx)
    got = heuristic_log_cost(links, torch.as_tensor(configs).to(torch.int8))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    links.padding = None
    with pytest.raises(ValueError, match="no padding tables"):
        heuristic_log_cost(links, torch.as_tensor(configs))


def test_size_bits_are_the_heuristic_per_node(tmp_path):
    """Per node and tensor: log padded elements / 10 (summed over nodes: the heuristic), the same
    where the config sets the tensor's layout, and the excess over the all-default config's; the
    head reads them with or without the pattern bits."""
    from models.gnn.model import SIZE_WIDTH, ConfigHead, heuristic_log_cost, size_bits

    *_, configs, ctx = _context_graph(tmp_path)
    links = _padding_links(ctx)
    values = torch.as_tensor(configs).to(torch.int8)
    bits = size_bits(links, values)
    assert bits.shape == (32, 4, SIZE_WIDTH)
    present = torch.as_tensor(ctx.padding[:, :, 0, 0] > -1e3)  # (nodes, tensors)
    size, chosen, excess = bits[..., :3], bits[..., 3:6], bits[..., 6:]
    total = torch.logsumexp(torch.where(present, size * 10, torch.full_like(size, -1e4)).flatten(1), 1)
    torch.testing.assert_close(total, heuristic_log_cost(links, values))
    set_ = torch.stack([values[:, :, 6 * t:6 * t + 6].amax(-1) >= 0 for t in range(3)], -1)
    torch.testing.assert_close(chosen, torch.where(set_, size, torch.zeros_like(size)))
    default = size_bits(links, torch.full_like(values[:1], -1))
    assert default[..., 3:].abs().max() == 0 and (size[~present.expand_as(size)] == 0).all()
    torch.testing.assert_close(excess[present.expand_as(excess)],
                               ((size - default[..., :3]) * 10)[present.expand_as(size)])
    for patterns, sizes, shares in ((False, True, False), (True, True, True), (False, False, True)):
        head = ConfigHead(ModelArgs(kind="layout", node_dim=4, config_dim=18, hidden=8, arch="factorized",
                                    head_patterns=patterns, head_sizes=sizes, head_shares=shares))
        links.patterns = torch.zeros(4, 3, 7, 6, dtype=torch.bool)
        assert head._patterns(links, values).shape == (32, 4, 16)


def test_size_shares_are_bytes_relative_to_the_graph(tmp_path):
    """Shares: padded elements over the all-default config's mean tensor (so they average 1 there),
    the same where the config sets the layout, and there the default's share (0 elsewhere)."""
    from models.gnn.model import size_bits

    *_, configs, ctx = _context_graph(tmp_path)
    links = _padding_links(ctx)
    values = torch.as_tensor(configs).to(torch.int8)
    sizes = size_bits(links, values)
    bits = size_bits(links, values, sizes=False, shares=True)
    assert bits.shape == sizes.shape
    present = torch.as_tensor(ctx.padding[:, :, 0, 0] > -1e3).expand_as(sizes[..., :3])
    default = size_bits(links, torch.full_like(values[:1], -1), sizes=False, shares=True)
    torch.testing.assert_close(default[..., :3][present[:1]].mean(), torch.tensor(1.0))
    assert default[..., 3:].abs().max() == 0
    share, chosen, base = bits[..., :3], bits[..., 3:6], bits[..., 6:]
    ratio = (sizes[..., :3] - size_bits(links, torch.full_like(values[:1], -1))[..., :3]) * 10
    torch.testing.assert_close(share[present], (default[..., :3] * ratio.exp())[present], rtol=1e-4, atol=1e-6)
    set_ = chosen > 0
    torch.testing.assert_close(chosen, torch.where(set_, share, torch.zeros_like(share)))
    torch.testing.assert_close(base, torch.where(set_, default[..., :3].expand_as(base), torch.zeros_like(base)))
