"""The GNN ranker: one **cost** per config (lower = predicted faster); architectures: docs/gnn.md,
"Model". Fixed choices (no option: nobody measured another) are the constants below.

:class:`RankerGNN` has three parts: :meth:`~RankerGNN.graph_state` (config-free, once per graph),
:meth:`~RankerGNN.embed_configs` (one pooled vector per config, chunkable) and
:meth:`~RankerGNN.config_vectors` + :meth:`~RankerGNN.score` (cross-configuration attention, then
the MLP head); ``forward`` is the three in a row.
"""

from __future__ import annotations

from dataclasses import dataclass
import torch
from torch import nn
from torch_geometric.nn import GINEConv, SAGEConv

from models.gnn.config import GnnConfig

LAYOUT_CONFIG_DIM = 18
LAYOUT_VALUES = 8  # values -1..5 -> 0..6, plus one bucket for anything out of range
OPCODE_VOCAB = 256  # HLO opcode ids (about 120 today); larger ids share the last bucket
LINK_HOPS = 16  # link lengths embedded by the factorized head; longer links share the last bucket
LINK_KINDS = 2  # features.configgraph: path, meet
ARCHS = ("copy", "factorized")
HEAD_POOLS = ("mean", "sqrt")
OPCODE_DIM = 16  # embedding size of the HLO opcode id
LAYOUT_VALUE_DIM = 4  # embedding size of one layout value (x18 per node)
PATTERN_TENSORS = 3  # out, in, kernel: the tensors a layout config lays out
PATTERN_BITS = 6  # per (node, tensor, dim): models.gnn.data.layout_patterns' columns
PATTERN_WIDTH = PATTERN_TENSORS * (PATTERN_BITS + 1)  # pattern_bits' columns
SIZE_WIDTH = 3 * PATTERN_TENSORS  # size_bits' columns, of sizes and of shares each
CROSS_HEADS = 4  # heads of the cross-configuration attention
HEAD_LAYERS = 2  # factorized: message-passing layers of the per-config head
HEURISTIC_GAIN = 10.0  # the heuristic's direct weight is this times a parameter from 0: Adam moves
# it ~10x lr a step, so a fold model of a few hundred steps can still lean on it


@dataclass
class ModelArgs:
    """Everything needed to rebuild a model (saved in every checkpoint): the data's widths and the
    model fields of :class:`GnnConfig`, whose defaults are the config's."""

    kind: str  # "layout" | "tile"
    node_dim: int
    config_dim: int  # 18 (layout) or the tile config width
    hidden: int = GnnConfig.hidden
    layers: int = GnnConfig.layers
    dropout: float = GnnConfig.dropout
    cross_attn: bool = GnnConfig.cross_attn
    arch: str = GnnConfig.arch  # layout: copy | factorized (tile models record copy)
    head_product: bool = GnnConfig.head_product
    head_patterns: bool = False  # checkpoints written before it carry none: they read no patterns
    head_pool: str = "mean"  # checkpoints written before it carry none: they pooled the mean
    head_heuristic: bool = False  # checkpoints written before it carry none: they read no heuristic
    head_sizes: bool = False  # checkpoints written before it carry none: they read no padded sizes
    head_shares: bool = False  # checkpoints written before it carry none: they read no volume shares

    @property
    def factorized(self) -> bool:
        return self.kind == "layout" and self.arch == "factorized"


class NodeNorm(nn.Module):
    """Instance normalisation over the nodes of each config copy."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, h: torch.Tensor, node_axis: int = 1) -> torch.Tensor:  # h: (B, n, d)
        """``node_axis``: where the nodes are (1 for (B, n, d); 0 for node-major (n, B, d))."""
        centred = h - h.mean(dim=node_axis, keepdim=True)
        # two passes by hand: torch's var over a middle axis is several times slower on CPU
        var = (centred * centred).mean(dim=node_axis, keepdim=True)
        return centred * torch.rsqrt(var + 1e-5) * self.weight + self.bias


class BiDirectionalLayer(nn.Module):
    """Message passing over both edge directions (producer->consumer and back), summed, with a
    residual connection and (pre-)normalisation over nodes."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.forward_conv = SAGEConv(dim, dim, aggr="mean")
        self.backward_conv = SAGEConv(dim, dim, aggr="mean")
        self.norm = NodeNorm(dim)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        # pre-norm: the residual stream itself is never normalised, so mean pooling after an
        # instance norm still sees per-config differences
        flat = self.norm(h).reshape(-1, h.shape[-1])
        reverse = edge_index.flip(0)
        msg = self.forward_conv(flat, edge_index) + self.backward_conv(flat, reverse)
        return h + self.dropout(self.act(msg)).reshape(h.shape)


class Pool(nn.Module):
    """Nodes of each copy -> one vector: their mean (or ``sqrt``: sum / sqrt(nodes)) and max,
    concatenated. Summed over n nodes whose contributions vary independently between configs,
    sum / sqrt(n) keeps that variation's scale whatever n; the mean shrinks it as 1 / sqrt(n)."""

    def __init__(self, dim: int, mode: str = "mean"):
        super().__init__()
        if mode not in HEAD_POOLS:
            raise ValueError(f"unknown pool {mode!r}; expected one of {', '.join(HEAD_POOLS)}")
        self.out_dim = 2 * dim
        self.mode = mode

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, out_dim)
        first = h.mean(dim=1) if self.mode == "mean" else h.sum(dim=1) / h.shape[1] ** 0.5
        return torch.cat([first, h.amax(dim=1)], dim=-1)

    def partial(self, h: torch.Tensor) -> torch.Tensor:
        """What :meth:`combine` needs of one part of a graph's nodes ``h`` (n, d), as one row:
        ``[sum; max; count]``."""
        return torch.cat([h.sum(dim=0), h.amax(dim=0), h.new_full((1,), h.shape[0])])

    def combine(self, parts: torch.Tensor) -> torch.Tensor:
        """(K, ·) rows of :meth:`partial` over disjoint parts -> (1, out_dim), equal to
        ``forward`` over all their nodes at once."""
        d = (parts.shape[1] - 1) // 2
        count = parts[:, -1].sum()
        first = parts[:, :d].sum(dim=0) / (count if self.mode == "mean" else count.sqrt())
        return torch.cat([first, parts[:, d:2 * d].amax(dim=0)])[None]


class CrossConfigAttention(nn.Module):
    """A pre-norm transformer block whose sequence is the ``B`` configs of one graph
    (docs/competition.md §7): a config's score can depend on how it differs from the others."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        while dim % heads:
            heads -= 1
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, z: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """``z`` (B, d) queries; keys and values from ``context`` (C, d), by default ``z`` itself.
        A fixed context makes a config's output independent of the other queries."""
        q = self.norm1(z)[None]
        kv = q if context is None else self.norm1(context)[None]
        z = z + self.attn(q, kv, kv, need_weights=False)[0][0]
        return z + self.ffn(self.norm2(z))


class LayoutConfigEncoder(nn.Module):
    """18 categorical layout values per configurable node -> a vector (one embedding table per
    position, so "dim 0 at output position 0" differs from "dim 0 at kernel position 5")."""

    def __init__(self, value_dim: int, out_dim: int):
        super().__init__()
        self.embed = nn.Embedding(LAYOUT_CONFIG_DIM * LAYOUT_VALUES, value_dim)
        self.proj = nn.Linear(LAYOUT_CONFIG_DIM * value_dim, out_dim)
        self.register_buffer("offsets", torch.arange(LAYOUT_CONFIG_DIM) * LAYOUT_VALUES,
                             persistent=False)

    def indices(self, values: torch.Tensor) -> torch.Tensor:  # row of each (position, value)
        return (values.long() + 1).clamp(0, LAYOUT_VALUES - 1) + self.offsets

    def forward(self, values: torch.Tensor) -> torch.Tensor:  # (B, nc, 18) ints -> (B, nc, d)
        emb = self.embed(self.indices(values))  # (B, nc, 18, e)
        return self.proj(emb.flatten(-2))

    def projected_table(self, weight: torch.Tensor | None = None) -> torch.Tensor:
        """(18 * values, d') table whose rows, summed over a node's 18 (position, value) pairs,
        give ``forward`` without its bias, multiplied by ``weight`` (d', d) when given: the
        encoder is linear in its embeddings, so a later linear map folds into one lookup."""
        per_position = self.proj.weight.view(-1, LAYOUT_CONFIG_DIM, self.embed.embedding_dim)
        emb = self.embed.weight.view(LAYOUT_CONFIG_DIM, LAYOUT_VALUES, -1)
        table = torch.einsum("dpe,pve->pvd", per_position, emb).reshape(-1, per_position.shape[0])
        return table if weight is None else table @ weight.T


@dataclass
class ConfigLinks:
    """The configurable-node graph of one graph as tensors (:mod:`features.configgraph`)."""

    edge_index: torch.Tensor  # (2, E) ordinals of configurable nodes, producer -> consumer
    hops: torch.Tensor  # (E,) path lengths
    inner: torch.Tensor  # (E, 2) first and last inner node of the path (graph positions, -1 none)
    kind: torch.Tensor  # (E,) features.configgraph.PATH (directed path) or MEET (outputs meet)
    patterns: torch.Tensor | None = None  # (nc, 3, 7, PATTERN_BITS) bool: models.gnn.data.layout_patterns
    padding: torch.Tensor | None = None  # (nc, 3, 7, 2): features.heuristic.padding_tables per tensor
    default_dims: torch.Tensor | None = None  # (nc, 3, 2): the tensors' default minor, second dims
    graph: str = "graph"  # collection/split/stem, named by errors


def pattern_bits(patterns: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(B, nc, PATTERN_WIDTH) of configs ``values`` (B, nc, 18): per tensor (out, in, kernel),
    the bits of the dim laid out most minor (all but the last column of ``patterns``), of the
    second-most minor (the last column) and whether the tensor is left default (all -1)."""
    nodes = torch.arange(values.shape[1], device=values.device)
    bits = []
    for t in range(PATTERN_TENSORS):
        lay = values[:, :, 6 * t:6 * t + 6].long()
        minor, second = lay[..., 0].remainder(7), lay[..., 1].remainder(7)  # -1 -> 6: no dim
        bits += [patterns[nodes, t, minor, :-1], patterns[nodes, t, second, -1:],
                 (lay.amax(-1) < 0)[..., None]]
    return torch.cat(bits, dim=-1).float()


def node_log_padded(links: ConfigLinks, values: torch.Tensor) -> torch.Tensor:
    """(B, nc, 3) log of the elements each configurable node's tensors (out, in, kernel) occupy
    once padded to (8, 128) tiles in configs ``values`` (B, nc, 18) (absent tensors: -1e4), from
    the graph's tables (``links.padding``, ``links.default_dims``)."""
    if links.padding is None or links.default_dims is None:
        raise ValueError(f"{links.graph}: no padding tables in its layout_context.npz, which this model's "
                         f"heuristic and size inputs are read from: rebuild features "
                         f"(python -m features build)")
    nodes = torch.arange(values.shape[1], device=values.device)[None, :]
    terms = []
    for t in range(PATTERN_TENSORS):
        lay, default = values[:, :, 6 * t:6 * t + 2].long(), links.default_dims[None, :, t].long()
        first = torch.where(lay[..., 0] >= 0, lay[..., 0], default[..., 0])
        second = torch.where(lay[..., 1] >= 0, lay[..., 1],
                             torch.where(first == default[..., 0], default[..., 1], default[..., 0]))
        terms.append(links.padding[nodes, t, first.clamp(-1, 5).remainder(7), 0]
                     + links.padding[nodes, t, second.clamp(-1, 5).remainder(7), 1])
    return torch.stack(terms, dim=-1).float()


def heuristic_log_cost(links: ConfigLinks, values: torch.Tensor) -> torch.Tensor:
    """(B,) log of :class:`features.heuristic.LayoutHeuristic`'s padded elements of configs
    ``values`` (B, nc, 18)."""
    return torch.logsumexp(node_log_padded(links, values).flatten(1), dim=1)


def size_bits(links: ConfigLinks, values: torch.Tensor, sizes: bool = True,
              shares: bool = False) -> torch.Tensor:
    """(B, nc, 9 * (sizes + shares)) per configurable node and tensor, in configs ``values``;
    ``sizes``: its log elements once padded to tiles (/ 10), the same where the config sets the
    tensor's layout (else 0: the volume a relayouting copy would move) and their excess over the
    all-default config's (the padding a layout adds); ``shares``: its padded elements relative to
    the mean tensor's of the all-default config, the same where the config sets the layout, and
    there its default's share (what a copy reads). A copy or padding costs in proportion to bytes,
    so a layout's effect on the log runtime grows with shares, not log sizes. Absent tensors: 0."""
    logs = node_log_padded(links, values)
    default = node_log_padded(links, torch.full_like(values[:1], -1))
    present = default > -1e3
    chosen = torch.stack([values[:, :, 6 * t:6 * t + 6].amax(-1) >= 0 for t in range(PATTERN_TENSORS)], -1)
    zero = torch.zeros_like(logs)
    columns = []
    if sizes:
        size = torch.where(present, logs / 10, zero)
        columns += [size, size * chosen, torch.where(present, logs - default, zero)]
    if shares:
        mean = torch.logsumexp(default.flatten(), dim=0) - present.sum().clamp_min(1).float().log()
        share = torch.where(present, (logs - mean).clamp_max(20).exp(), zero)
        columns += [share, share * chosen, torch.where(present & chosen, (default - mean).exp(), zero)]
    return torch.cat(columns, dim=-1)


def gine_mean(conv: GINEConv, x: torch.Tensor, edge_index: torch.Tensor,
              edge_feat: torch.Tensor) -> torch.Tensor:
    """``conv(x, edge_index, edge_feat)`` of a mean-aggregating PyG ``GINEConv`` for node-major
    ``x`` (n, B, d) (B configs' states of the same n nodes) and config-free ``edge_feat`` (E, d):
    PyG's numbers, up to 4.9x faster on CPU (docs/gnn.md, "On a CPU")."""
    src, dst = edge_index
    messages = x.index_select(0, src)
    messages.add_(edge_feat[:, None, :]).relu_()
    summed = x.new_zeros(x.shape).index_add_(0, dst, messages)
    count = torch.bincount(dst, minlength=x.shape[0]).clamp_min(1).to(x.dtype)
    return conv.nn(summed / count[:, None, None] + (1 + conv.eps) * x)


class LinkLayer(nn.Module):
    """Per-config message passing over the configurable-node graph (both link directions,
    :func:`gine_mean`), residual, pre-normalisation. States are node-major, (nc, B, d)."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.forward_conv = GINEConv(nn.Linear(dim, dim), aggr="mean")
        self.backward_conv = GINEConv(nn.Linear(dim, dim), aggr="mean")
        self.norm = NodeNorm(dim)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.gate = nn.Parameter(torch.zeros(1))  # ReZero: each layer starts as the identity

    def forward(self, x: torch.Tensor, links: ConfigLinks, link_feat: torch.Tensor) -> torch.Tensor:
        h = self.norm(x, node_axis=0)  # (nc, B, d)
        msg = gine_mean(self.forward_conv, h, links.edge_index, link_feat) \
            + gine_mean(self.backward_conv, h, links.edge_index.flip(0), link_feat)
        return x + self.gate * self.dropout(self.act(msg))


class ConfigHead(nn.Module):
    """The factorized model's per-config part: configurable nodes' trunk embeddings joined with
    their layout embeddings, :data:`HEAD_LAYERS` of :class:`LinkLayer`, pooled over the nodes."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        d = args.hidden
        self.hop_embed = nn.Embedding(LINK_HOPS + 1, d)
        self.kind_embed = nn.Embedding(LINK_KINDS, d)
        self.link_proj = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        self.join = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        self.product = None
        if args.head_product:  # (U trunk + b) * (V layout): second-order terms in one lookup more
            self.product = nn.ModuleDict({"trunk": nn.Linear(d, d),
                                          "layout": nn.Linear(d, d, bias=False)})
            nn.init.zeros_(self.product["trunk"].weight)
            nn.init.zeros_(self.product["trunk"].bias)
        self.patterns = None  # the per-node bits, into the join and the product's layout side
        self.reads_patterns = args.head_patterns
        self.reads_sizes, self.reads_shares = args.head_sizes, args.head_shares
        width = PATTERN_WIDTH * args.head_patterns + SIZE_WIDTH * (args.head_sizes + args.head_shares)
        if width:
            self.patterns = nn.Linear(width, d * (1 + args.head_product), bias=False)
        self.layers = nn.ModuleList(LinkLayer(d, args.dropout) for _ in range(HEAD_LAYERS))
        self.pool = Pool(d, args.head_pool)
        self.heuristic = args.head_heuristic
        self.out_dim = self.pool.out_dim + self.heuristic

    def link_features(self, h: torch.Tensor, links: ConfigLinks) -> torch.Tensor:
        """(E, d) features of the links, from their kinds, lengths and the trunk embeddings ``h``
        (n, d) of their inner nodes (mean of those present): config-free, once per graph."""
        present = links.inner >= 0
        inner = h[links.inner.clamp_min(0)] * present[..., None].to(h.dtype)  # (E, 2, d)
        inner = inner.sum(dim=1) / present.sum(dim=1, keepdim=True).clamp_min(1).to(h.dtype)
        hops = self.hop_embed(links.hops.clamp(0, LINK_HOPS)) + self.kind_embed(links.kind)
        return self.link_proj(torch.cat([hops, inner], dim=-1))

    def node_inputs(self, node_h: torch.Tensor, encoder: LayoutConfigEncoder) -> torch.Tensor:
        """The config-free half of the join for the configurable nodes' trunk embeddings
        ``node_h`` (nc, d), with every bias folded in (once per graph); with the product term,
        the trunk side of the product too, as (nc, 2d)."""
        linear = self.join[0]
        d = node_h.shape[-1]
        bias = linear.bias + linear.weight[:, d:] @ encoder.proj.bias
        node_in = nn.functional.linear(node_h, linear.weight[:, :d], bias)
        if self.product is None:
            return node_in
        return torch.cat([node_in, self.product["trunk"](node_h)], dim=-1)

    def _lookup(self, encoder: LayoutConfigEncoder, idx: torch.Tensor, weight: torch.Tensor,
                shape: tuple[int, ...]) -> torch.Tensor:
        """``weight @ (encoder(values) - bias)`` per node, as one summed lookup."""
        return nn.functional.embedding_bag(idx, encoder.projected_table(weight),
                                           mode="sum").view(*shape)

    def _patterns(self, links: ConfigLinks, values: torch.Tensor) -> torch.Tensor:
        """(B, nc, d or 2d): the projected :func:`pattern_bits` and :func:`size_bits` of configs
        ``values`` (those the model reads)."""
        bits = []
        if self.reads_patterns:
            if links.patterns is None:
                raise ValueError(f"{links.graph}: no layout_context.npz, which this model's layout "
                                 f"patterns are read from: rebuild features (python -m features build)")
            bits.append(pattern_bits(links.patterns, values))
        if self.reads_sizes or self.reads_shares:
            bits.append(size_bits(links, values, self.reads_sizes, self.reads_shares))
        return self.patterns(torch.cat(bits, dim=-1))

    def forward(self, node_in: torch.Tensor, values: torch.Tensor, encoder: LayoutConfigEncoder,
                links: ConfigLinks, link_feat: torch.Tensor) -> torch.Tensor:
        """``node_in`` from :meth:`node_inputs`, ``values`` (B, nc, 18) layout values -> (B, P).
        The join ``GELU(W [trunk; encoder(values)] + b)`` is computed as the config-free half plus
        one summed lookup per node (:meth:`LayoutConfigEncoder.projected_table`): no per-config
        matrix product before the link layers."""
        batch, nc = values.shape[:2]
        if nc == 0:  # no configurable node: nothing to tell the configs apart
            return node_in.new_zeros(batch, self.out_dim)
        d = self.join[0].weight.shape[0]
        idx = encoder.indices(values).view(-1, LAYOUT_CONFIG_DIM)
        pre = self._lookup(encoder, idx, self.join[0].weight[:, d:], (batch, nc, d))
        pre = pre + node_in[:, :d].to(pre.dtype)
        bits = None if self.patterns is None else self._patterns(links, values).to(pre.dtype)
        if bits is not None:
            pre = pre + bits[..., :d]
        if self.product is not None:
            layout = self.product["layout"]
            v = self._lookup(encoder, idx, layout.weight, (batch, nc, d)) \
                + layout.weight @ encoder.proj.bias
            if bits is not None:
                v = v + bits[..., d:]
            pre = pre + node_in[:, d:].to(pre.dtype) * v
        x = self.join[1](pre).transpose(0, 1).contiguous()  # node-major for the link layers
        for layer in self.layers:
            x = layer(x, links, link_feat.to(x.dtype))
        pooled = self.pool(x.transpose(0, 1))
        if not self.heuristic:
            return pooled
        default = torch.full_like(values[:1], -1)  # the compiler's own layouts
        relative = heuristic_log_cost(links, values) - heuristic_log_cost(links, default)
        return torch.cat([pooled, relative[:, None].to(pooled.dtype)], -1)


@dataclass
class GraphState:
    """What :meth:`RankerGNN.embed_configs` needs of one graph, computed once per graph by
    :meth:`RankerGNN.graph_state` (the factorized trunk's outputs; the copy model's inputs)."""

    node_feat: torch.Tensor
    node_opcode: torch.Tensor
    edge_index: torch.Tensor
    config_node_pos: torch.Tensor | None
    summary: torch.Tensor | None = None  # factorized: (1, P) pooled trunk output
    node_in: torch.Tensor | None = None  # factorized: (nc, d) the join's config-free half
    links: ConfigLinks | None = None
    link_feat: torch.Tensor | None = None  # factorized: (E, d)


class RankerGNN(nn.Module):
    """One model class for both kinds; ``forward`` returns ``(B,)`` costs for ``B`` configs."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.kind not in ("layout", "tile"):
            raise ValueError(f"unknown model kind {args.kind!r}")
        self.args = args
        d = args.hidden
        self.opcode_embed = nn.Embedding(OPCODE_VOCAB, OPCODE_DIM)
        self.node_in = nn.Sequential(nn.Linear(args.node_dim + OPCODE_DIM, d), nn.GELU(),
                                     nn.Linear(d, d))
        if args.arch not in ARCHS:
            raise ValueError(f"unknown arch {args.arch!r}; expected one of {', '.join(ARCHS)}")
        self.late_join = args.kind == "tile"  # the tile config joins after pooling
        self.factorized = args.factorized
        if args.kind == "layout":
            self.config_encoder = LayoutConfigEncoder(LAYOUT_VALUE_DIM, d)
            if not self.factorized:
                self.no_config = nn.Parameter(torch.zeros(d))
                self.join = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        else:
            self.tile_encoder = nn.Sequential(nn.Linear(args.config_dim, d), nn.GELU(),
                                              nn.Linear(d, d))
        self.layers = nn.ModuleList(BiDirectionalLayer(d, args.dropout) for _ in range(args.layers))
        self.pool = Pool(d)
        self.config_head = ConfigHead(args) if self.factorized else None
        if self.late_join:
            self.graph_proj = nn.Linear(self.pool.out_dim, d)
        z_dim = 3 * d if self.late_join else self.pool.out_dim
        if self.factorized:
            z_dim += self.config_head.out_dim
        self.z_proj = nn.Sequential(nn.Linear(z_dim, d), nn.GELU())
        self.cross = CrossConfigAttention(d, CROSS_HEADS, args.dropout) if args.cross_attn else None
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        self.heuristic_weight = None
        if self.factorized and args.head_heuristic:  # the cost also reads it directly
            self.heuristic_weight = nn.Parameter(torch.zeros(1))

    def encode_nodes(self, node_feat: torch.Tensor, node_opcode: torch.Tensor) -> torch.Tensor:
        op = node_opcode.long().clamp(0, OPCODE_VOCAB - 1)
        return self.node_in(torch.cat([node_feat, self.opcode_embed(op)], dim=-1))

    def _message_passing(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        copies, n, _ = h.shape
        if copies > 1:
            offsets = (torch.arange(copies, device=h.device) * n).view(-1, 1, 1)
            edge_index = (edge_index.unsqueeze(0) + offsets).permute(1, 0, 2).reshape(2, -1)
        for layer in self.layers:
            h = layer(h, edge_index)
        return h

    def forward(self, node_feat: torch.Tensor, node_opcode: torch.Tensor, edge_index: torch.Tensor,
                config_feat: torch.Tensor, config_node_pos: torch.Tensor | None = None, *,
                links: ConfigLinks | None = None) -> torch.Tensor:
        """Costs (B,) of ``config_feat`` (layout (B, nc, 18), tile (B, Ft)) on a graph of ``n``
        nodes (``edge_index`` producer->consumer), the batch as each other's attention context;
        ``links`` for factorized models."""
        state = self.graph_state(node_feat, node_opcode, edge_index, config_node_pos, links)
        pooled = self.embed_configs(state, config_feat)
        return self.score(self.config_vectors(pooled, config_feat))

    # --- config-free part: once per graph
    def trunk(self, node_feat: torch.Tensor, node_opcode: torch.Tensor,
              edge_index: torch.Tensor) -> torch.Tensor:
        """Node embeddings (n, d) of the graph without any config (the factorized trunk)."""
        return self._message_passing(self.encode_nodes(node_feat, node_opcode)[None], edge_index)[0]

    def graph_state(self, node_feat: torch.Tensor, node_opcode: torch.Tensor,
                    edge_index: torch.Tensor, config_node_pos: torch.Tensor | None = None,
                    links: ConfigLinks | None = None) -> GraphState:
        """Everything per graph that the configs share: for a factorized model the trunk (its
        embeddings of the configurable nodes, the pooled summary, the links' features)."""
        if not self.factorized:
            return GraphState(node_feat, node_opcode, edge_index, config_node_pos)
        if config_node_pos is None or links is None:
            raise ValueError("a factorized layout model needs config_node_pos and links")
        h = self.trunk(node_feat, node_opcode, edge_index)
        return GraphState(node_feat, node_opcode, edge_index, config_node_pos,
                          summary=self.pool(h[None]),
                          node_in=self.config_head.node_inputs(h[config_node_pos], self.config_encoder),
                          links=links, link_feat=self.config_head.link_features(h, links))

    # --- embedding part: chunkable over configs
    def embed_configs(self, state: GraphState, config_feat: torch.Tensor) -> torch.Tensor:
        """Pooled embedding (B, P') of each config of ``config_feat`` on the graph of ``state``
        (tile: the config-independent (1, P) embedding of the kernel graph)."""
        if self.factorized:
            local = self.config_head(state.node_in, config_feat, self.config_encoder, state.links,
                                     state.link_feat)
            return torch.cat([state.summary.to(local.dtype).expand(local.shape[0], -1), local],
                             dim=-1)
        base = self.encode_nodes(state.node_feat, state.node_opcode)  # (n, d)
        if self.late_join:
            return self.pool(self._message_passing(base[None], state.edge_index))
        if state.config_node_pos is None:
            raise ValueError("layout model needs config_node_pos")
        batch = config_feat.shape[0]
        n, d = base.shape
        cfg = self.no_config.expand(batch, n, d).clone()
        cfg[:, state.config_node_pos] = self.config_encoder(config_feat).to(cfg.dtype)
        h = self._message_passing(self.join(torch.cat([base.expand(batch, n, d), cfg], dim=-1)),
                                  state.edge_index)
        return self.pool(h)

    # --- scoring part: cross-configuration attention over a set of config vectors -> costs
    def config_vectors(self, pooled: torch.Tensor, config_feat: torch.Tensor) -> torch.Tensor:
        """Pooled embeddings (B, P) (late tile: (1, P)) -> (B, hidden) inputs of the attention
        (with the heuristic, one more column: its value)."""
        if self.late_join:
            x = config_feat.float()
            t = self.tile_encoder(torch.sign(x) * torch.log1p(x.abs()))  # (B, d), signed log
            g = self.graph_proj(pooled).expand(t.shape[0], -1)
            return self.z_proj(torch.cat([g, t, g * t], dim=-1))
        z = self.z_proj(pooled)  # with the heuristic, it rides along as the last column to score
        return z if self.heuristic_weight is None else torch.cat([z, pooled[:, -1:].to(z.dtype)], -1)

    def score(self, z: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """Costs (B,) of config vectors ``z`` (B, hidden), attending to ``context`` (C, hidden)
        (default: to each other)."""
        heuristic = None
        if self.heuristic_weight is not None:
            z, heuristic = z[:, :-1], z[:, -1]
            context = None if context is None else context[:, :-1]
        if self.cross is not None:
            z = self.cross(z, context)
        cost = self.head(z).squeeze(-1)
        return cost if heuristic is None else cost + HEURISTIC_GAIN * self.heuristic_weight * heuristic
