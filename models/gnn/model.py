"""The GNN ranker: node encoder, config join, message passing (PyG), pooling, cross-configuration
attention and a scoring MLP. It outputs one **cost** per config (lower = predicted faster).

Layout (node-level configs): the graph is copied once per config of the batch and each copy gets
its config's 18 layout values joined at the configurable nodes (embedded as categories); all other
nodes get a learned "no config" vector. Message passing then runs over the ``B`` copies at once
(PyG batching: edge indices offset by ``n`` per copy).

Tile (graph-level configs): the config's features (24 raw, or the feature pipeline's engineered
columns) are encoded and either joined at every node before message passing (``tile_join="early"``,
one graph copy per config, as for layout) or joined with the embedding of the kernel graph after
pooling (``"late"``: one message passing per graph, config and graph embeddings combined with
their product so the MLP can model kernel-specific preferences).

The model has two parts: :meth:`RankerGNN.embed` (node encoder, config join, message passing,
pooling: one vector per config, chunkable over configs and over graph segments, see
``models.gnn.gst``) and the scoring part :meth:`RankerGNN.config_vectors` + :meth:`RankerGNN.score`
(cross-configuration attention over a set of config vectors, then the MLP head). ``forward`` is
the two in a row with the batch as its own attention context; inference can instead give every
config the same fixed context (``models.gnn.infer.predict_costs``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import torch
from torch import nn
from torch_geometric.nn import GATv2Conv, SAGEConv

LAYOUT_CONFIG_DIM = 18
LAYOUT_VALUES = 8  # values -1..5 -> 0..6, plus one bucket for anything out of range
OPCODE_VOCAB = 256  # HLO opcode ids (about 120 today); larger ids share the last bucket


@dataclass
class ModelArgs:
    """Everything needed to rebuild a model (saved in every checkpoint)."""

    kind: str  # "layout" | "tile"
    node_dim: int
    config_dim: int  # 18 (layout) or the tile config width
    hidden: int = 64
    layers: int = 3
    conv: str = "sage"
    heads: int = 2
    opcode_dim: int = 16
    layout_value_dim: int = 4
    norm: str = "instance"
    pool: str = "meanmax"
    dropout: float = 0.0
    cross_attn: bool = True
    cross_heads: int = 4
    tile_join: str = "early"  # early | late
    tabular_dim: int = 0  # layout: width of the per-config descriptive features joined after pooling (0 = none)

    def to_dict(self) -> dict:
        return asdict(self)


def make_conv(kind: str, dim: int, heads: int) -> nn.Module:
    """One PyG message-passing layer mapping ``dim`` -> ``dim``."""
    if kind == "sage":
        return SAGEConv(dim, dim, aggr="mean")
    if kind == "gatv2":
        if dim % heads:
            raise ValueError(f"hidden size {dim} is not divisible by {heads} GATv2 heads")
        return GATv2Conv(dim, dim // heads, heads=heads, add_self_loops=False)
    raise ValueError(f"unknown conv {kind!r}; expected sage or gatv2")


class NodeNorm(nn.Module):
    """Normalisation over nodes: ``instance`` normalises each config copy's nodes separately
    (statistics over the ``n`` nodes of one copy), ``layer`` normalises each node's features,
    ``none`` is the identity."""

    def __init__(self, kind: str, dim: int):
        super().__init__()
        if kind not in ("instance", "layer", "none"):
            raise ValueError(f"unknown norm {kind!r}; expected instance, layer or none")
        self.kind = kind
        if kind != "none":
            self.weight = nn.Parameter(torch.ones(dim))
            self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # h: (B, n, d)
        if self.kind == "none":
            return h
        axis = 1 if self.kind == "instance" else 2
        mean = h.mean(dim=axis, keepdim=True)
        var = h.var(dim=axis, keepdim=True, unbiased=False)
        return (h - mean) * torch.rsqrt(var + 1e-5) * self.weight + self.bias


class BiDirectionalLayer(nn.Module):
    """Message passing over both edge directions (producer->consumer and back), summed, with a
    residual connection and (pre-)normalisation over nodes."""

    def __init__(self, conv: str, dim: int, heads: int, norm: str, dropout: float):
        super().__init__()
        self.forward_conv = make_conv(conv, dim, heads)
        self.backward_conv = make_conv(conv, dim, heads)
        self.norm = NodeNorm(norm, dim)
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
    """Nodes of each copy -> one vector: ``meanmax`` (concat of mean and max) or ``attention``
    (softmax-gated sum)."""

    def __init__(self, kind: str, dim: int):
        super().__init__()
        if kind not in ("meanmax", "attention"):
            raise ValueError(f"unknown pool {kind!r}; expected meanmax or attention")
        self.kind = kind
        self.gate = nn.Linear(dim, 1) if kind == "attention" else None
        self.out_dim = 2 * dim if kind == "meanmax" else dim

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, out_dim)
        if self.gate is None:
            return torch.cat([h.mean(dim=1), h.amax(dim=1)], dim=-1)
        weights = torch.softmax(self.gate(h).squeeze(-1), dim=1)
        return torch.einsum("bn,bnd->bd", weights, h)

    def combine(self, parts: torch.Tensor, weights: torch.Tensor, mode: str = "pool") -> torch.Tensor:
        """Pooled segment vectors ``parts`` (B, K, out_dim) -> one vector per config (B, out_dim).

        ``weights`` (B, K) are the segments' node counts, 0 for a segment left out (stale
        embedding dropout). ``mode="pool"`` combines like the pooling itself: size-weighted mean
        of the mean half and max of the max half for ``meanmax`` (so segments that cut no edge
        reproduce whole-graph pooling exactly), size-weighted mean for ``attention``;
        ``mode="mean"`` is the size-weighted mean of whole vectors.
        """
        if mode not in ("pool", "mean"):
            raise ValueError(f"unknown segment combine {mode!r}; expected pool or mean")
        w = weights.to(parts.dtype)
        mean = (parts * w[..., None]).sum(dim=1) / w.sum(dim=1, keepdim=True).clamp_min(1e-12)
        if mode == "mean" or self.gate is not None:
            return mean
        half = parts.shape[-1] // 2
        present = (weights > 0)[..., None]
        top = parts[..., half:].masked_fill(~present, float("-inf")).amax(dim=1)
        return torch.cat([mean[..., :half], top], dim=-1)


class CrossConfigAttention(nn.Module):
    """Lets the ``B`` configs of one graph attend to each other (SPEC §7): a pre-norm transformer
    block whose sequence is the batch of configs. A config's score can then depend on how it
    differs from the other configs of the same graph."""

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

    def forward(self, values: torch.Tensor) -> torch.Tensor:  # (B, nc, 18) ints -> (B, nc, d)
        idx = (values.long() + 1).clamp(0, LAYOUT_VALUES - 1) + self.offsets
        emb = self.embed(idx)  # (B, nc, 18, e)
        return self.proj(emb.flatten(-2))


def signed_log1p(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.log1p(x.abs())


class RankerGNN(nn.Module):
    """One model class for both kinds; ``forward`` returns ``(B,)`` costs for ``B`` configs."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.kind not in ("layout", "tile"):
            raise ValueError(f"unknown model kind {args.kind!r}")
        self.args = args
        d = args.hidden
        self.opcode_embed = nn.Embedding(OPCODE_VOCAB, args.opcode_dim)
        self.node_in = nn.Sequential(nn.Linear(args.node_dim + args.opcode_dim, d), nn.GELU(),
                                     nn.Linear(d, d))
        if args.tile_join not in ("early", "late"):
            raise ValueError(f"unknown tile_join {args.tile_join!r}; expected early or late")
        self.late_join = args.kind == "tile" and args.tile_join == "late"
        if args.kind == "layout":
            self.config_encoder = LayoutConfigEncoder(args.layout_value_dim, d)
            self.no_config = nn.Parameter(torch.zeros(d))
        else:
            self.tile_encoder = nn.Sequential(nn.Linear(args.config_dim, d), nn.GELU(),
                                              nn.Linear(d, d))
        if not self.late_join:
            self.join = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        self.layers = nn.ModuleList(BiDirectionalLayer(args.conv, d, args.heads, args.norm,
                                                       args.dropout) for _ in range(args.layers))
        self.pool = Pool(args.pool, d)
        if self.late_join:
            self.graph_proj = nn.Linear(self.pool.out_dim, d)
        z_dim = 3 * d if self.late_join else self.pool.out_dim
        self.tabular_encoder = None
        if args.tabular_dim > 0:
            if args.kind != "layout":
                raise ValueError("tabular_dim is for layout models (tile config features already "
                                 "are the tabular ones)")
            self.tabular_encoder = nn.Sequential(nn.Linear(args.tabular_dim, d), nn.GELU(),
                                                 nn.Linear(d, d))
            z_dim += d
        self.z_proj = nn.Sequential(nn.Linear(z_dim, d), nn.GELU())
        self.cross = CrossConfigAttention(d, args.cross_heads, args.dropout) if args.cross_attn else None
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))

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

    def forward(self, node_feat: torch.Tensor | None = None, node_opcode: torch.Tensor | None = None,
                edge_index: torch.Tensor | None = None, config_feat: torch.Tensor | None = None,
                config_node_pos: torch.Tensor | None = None, tabular: torch.Tensor | None = None, *,
                run: Callable[["RankerGNN"], torch.Tensor] | None = None) -> torch.Tensor:
        """``node_feat`` (n, F), ``node_opcode`` (n,), ``edge_index`` (2, m) producer->consumer,
        ``config_feat`` layout (B, nc, 18) / tile (B, Ft), ``config_node_pos`` (nc,) for layout,
        ``tabular`` (B, T) per-config features when ``args.tabular_dim`` > 0. The configs of the
        batch are each other's attention context.

        ``run``: compute ``run(self)`` instead (e.g. a Graph Segment Training step built from the
        parts below), so that a DistributedDataParallel wrapper still sees a forward call."""
        if run is not None:
            return run(self)
        if node_feat is None or node_opcode is None or edge_index is None or config_feat is None:
            raise ValueError("RankerGNN.forward needs node_feat, node_opcode, edge_index, config_feat")
        pooled = self.embed(node_feat, node_opcode, edge_index, config_feat, config_node_pos)
        return self.score(self.config_vectors(pooled, config_feat, tabular))

    # --- embedding part: chunkable over configs (and over graph segments)
    def embed(self, node_feat: torch.Tensor, node_opcode: torch.Tensor, edge_index: torch.Tensor,
              config_feat: torch.Tensor, config_node_pos: torch.Tensor | None = None,
              pool_nodes: int | None = None) -> torch.Tensor:
        """Pooled graph embedding of each config, (B, P) with ``P = pool.out_dim``; for a late-join
        tile model the config-independent (1, P) embedding of the kernel graph.

        ``pool_nodes`` pools only the first nodes (a segment's own nodes, ahead of its halo)."""
        base = self.encode_nodes(node_feat, node_opcode)  # (n, d)
        batch = config_feat.shape[0]
        n, d = base.shape
        if self.args.kind == "layout":
            if config_node_pos is None:
                raise ValueError("layout model needs config_node_pos")
            cfg = self.no_config.expand(batch, n, d).clone()
            cfg[:, config_node_pos] = self.config_encoder(config_feat).to(cfg.dtype)
        elif self.late_join:
            h = self._message_passing(base[None], edge_index)
            return self.pool(h[:, :pool_nodes] if pool_nodes is not None else h)
        else:
            t = self.tile_encoder(signed_log1p(config_feat.float()))  # (B, d)
            cfg = t[:, None, :].expand(batch, n, d)
        h = self._message_passing(self.join(torch.cat([base.expand(batch, n, d), cfg], dim=-1)),
                                  edge_index)
        return self.pool(h[:, :pool_nodes] if pool_nodes is not None else h)

    # --- scoring part: cross-configuration attention over a set of config vectors -> costs
    def config_vectors(self, pooled: torch.Tensor, config_feat: torch.Tensor,
                       tabular: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled embeddings (B, P) (late tile: (1, P)) -> (B, hidden) inputs of the attention;
        a layout model with ``tabular_dim`` joins the encoded per-config ``tabular`` (B, T) here."""
        if self.late_join:
            t = self.tile_encoder(signed_log1p(config_feat.float()))  # (B, d)
            g = self.graph_proj(pooled).expand(t.shape[0], -1)
            return self.z_proj(torch.cat([g, t, g * t], dim=-1))
        if self.tabular_encoder is not None:
            if tabular is None:
                raise ValueError("this model joins per-config tabular features: pass tabular")
            pooled = torch.cat([pooled, self.tabular_encoder(tabular.to(pooled.dtype))], dim=-1)
        return self.z_proj(pooled)

    @property
    def uses_tabular(self) -> bool:
        return self.tabular_encoder is not None

    def score(self, z: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """Costs (B,) of config vectors ``z`` (B, hidden), attending to ``context`` (C, hidden)
        (default: to each other)."""
        if self.cross is not None:
            z = self.cross(z, context)
        return self.head(z).squeeze(-1)
