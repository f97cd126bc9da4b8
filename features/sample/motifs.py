"""Model motifs (part of the sample generator, see ``features.sample``): ResNet, UNet and BERT
graphs and fused tile kernels, built op by op with :class:`features.sample.hlo.HloBuilder`.
"""

from __future__ import annotations

import math
from typing import Sequence
import numpy as np

from features.sample.constants import TYPE_BYTES
from features.sample.hlo import HloBuilder, row_major


def _pick(rng: np.random.Generator, options: Sequence):
    return options[int(rng.integers(len(options)))]


def _normalize(b: HloBuilder, x: int, axes: Sequence[int], keep: tuple[int, ...]) -> tuple[int, int]:
    """(x - mean, 1 / sqrt(var + eps)) over ``axes``; the statistics keep the dims ``keep``."""
    s = b.shape(x)
    kept = tuple(s[d] for d in keep)
    n = b.scalar_bcast(kept)
    mean = b.ew("divide", b.reduce(x, axes), n)
    cen = b.ew("subtract", x, b.bcast(mean, s, keep))
    var = b.ew("divide", b.reduce(b.ew("multiply", cen, cen), axes), n)
    return cen, b.ew("rsqrt", b.ew("add", var, b.scalar_bcast(kept)))


def _batch_norm(b: HloBuilder, x: int, train: bool) -> int:
    s = b.shape(x)
    r = len(s)
    scale, shift = b.param((s[-1],)), b.param((s[-1],))
    if train:
        x, inv = _normalize(b, x, list(range(r - 1)), (r - 1,))
        scale = b.ew("multiply", inv, scale)
    y = b.ew("multiply", x, b.bcast(scale, s, (r - 1,)))
    return b.ew("add", y, b.bcast(shift, s, (r - 1,)))


def _relu(b: HloBuilder, x: int) -> int:
    return b.ew("maximum", x, b.scalar_bcast(b.shape(x), b.dtype(x)))


def _conv_bn_relu(b: HloBuilder, x: int, cout: int, k: int, stride: int, train: bool,
                  act: bool = True, lhs_dilation: int = 1) -> int:
    nsp = len(b.shape(x)) - 2
    w = b.param([k] * nsp + [b.shape(x)[-1], cout], b.dtype(x))
    conv = b.conv(x, w, stride, lhs_dilation=lhs_dilation)
    y = _batch_norm(b, conv, train)
    y = _relu(b, y) if act else y
    if b.trace is not None:
        b.trace.append((x, w, conv, y if act else None, stride, lhs_dilation))
    return y


def _incoming_grad(b: HloBuilder, seed_grad: int, dy: int | None, s: tuple[int, ...],
                   dt: str) -> int:
    """``dy`` when it has shape ``s``; else (a gradient from another branch) its rescaled total."""
    if dy is not None and b.shape(dy) == s:
        return dy
    src = seed_grad if dy is None else dy
    total = b.reduce(src, tuple(range(len(b.shape(src)))))
    return b.ew("multiply", b.bcast(total, s, ()), b.scalar_bcast(s, dt))


def _backward(b: HloBuilder, seed_grad: int, target: int) -> list[int]:
    """Backward pass of the traced convolutions (none unless a training step), last first, as JAX
    lowers it: ReLU masks (select), weight-gradient convs (``f01b_i01o->01bf``), input-gradient
    convs with a reversed kernel (``b01f_01oi->b01f``) and SGD updates. Stops near ``target``."""
    updates: list[int] = []
    dy: int | None = None
    for x, w, conv, act, stride, lhs_dil in reversed(b.trace or []):
        if b.num_nodes() >= target - 30:
            break
        s, dt = b.shape(conv), b.dtype(conv)
        nsp = len(s) - 2
        dy = _incoming_grad(b, seed_grad, dy, s, dt)
        if act is not None:
            mask = b.ew("compare", act, b.scalar_bcast(s, dt), dtype="pred")
            dy = b.add("select", s, (mask, dy, b.scalar_bcast(s, dt)), dt)
        ks = b.shape(w)
        k = ks[0]
        wgrad_dn = dict(ib=nsp + 1, if_=0, isp=list(range(1, nsp + 1)), ki=0, ko=nsp + 1,
                        ksp=list(range(1, nsp + 1)), ob=nsp, of=nsp + 1)
        dw = b.conv_general(x, dy, ks, s[1:-1], [k // 2] * nsp, wgrad_dn, wdil=stride)
        updates.append(b.ew("subtract", w, b.ew("multiply", dw, b.scalar_bcast(ks, dt))))
        if lhs_dil != 1:
            dy = None
            continue
        xs = b.shape(x)
        dgrad_dn = dict(ib=0, if_=nsp + 1, isp=list(range(1, nsp + 1)), ki=nsp + 1, ko=nsp,
                        ksp=list(range(nsp)), ob=0, of=nsp + 1)
        dy = b.conv_general(dy, b.reverse(w, range(nsp)), xs, ks[:nsp], [k - 1 - k // 2] * nsp,
                            dgrad_dn, bdil=stride)
    return updates


def _softmax(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    r = len(s)
    keep = tuple(range(r - 1))
    mx = b.bcast(b.reduce(x, (r - 1,), "maximum"), s, keep)
    e = b.ew("exponential", b.ew("subtract", x, mx))
    return b.ew("divide", e, b.bcast(b.reduce(e, (r - 1,)), s, keep))


def _classifier_head(b: HloBuilder, x: int, classes: int) -> int:
    s = b.shape(x)
    pooled = b.ew("divide", b.reduce(x, tuple(range(1, len(s) - 1))), b.scalar_bcast((s[0], s[-1])))
    w, bias = b.param((s[-1], classes)), b.param((classes,))
    logits = b.dot(pooled, w, (1,), (0,))
    logits = b.ew("add", logits, b.bcast(bias, b.shape(logits), (1,)))
    return _softmax(b, logits)


def _train_step(b: HloBuilder, rng: np.random.Generator, prob: float, target: int,
                share: float) -> tuple[bool, int]:
    """Whether the graph is a training step (probability ``prob``) and its forward pass's node
    target: ``share`` of ``target``, the rest left to the backward pass of the traced layers."""
    if rng.random() >= prob:
        return False, target
    b.trace, b.dense_trace = [], []
    return True, int(target * share)


def build_resnet(b: HloBuilder, rng: np.random.Generator, target: int) -> list[int]:
    """ResNet/EfficientNet-like 2-D conv net; stops adding blocks near ``target`` nodes."""
    train, fwd = _train_step(b, rng, 0.5, target, 0.6)
    batch = int(_pick(rng, [1, 2, 4, 8, 16, 32, 64]))
    size = int(_pick(rng, [32, 64, 96, 128, 224]))
    widths = _pick(rng, [(64, 128, 256, 512), (32, 64, 128, 256), (24, 40, 80, 112, 192),
                         (48, 96, 192, 384), (16, 32, 64, 128)])
    dtype = "bf16" if rng.random() < 0.4 else "f32"
    x = b.param((batch, size, size, 3), dtype)
    x = _conv_bn_relu(b, x, widths[0], int(_pick(rng, [3, 7])), 2, train)
    if rng.random() < 0.7 and b.shape(x)[1] >= 8:
        x = b.reduce_window(x, 3, 2)
    stage = 0
    per_stage = max(1, int(fwd / (len(widths) * 30)))
    blocks_in_stage = 0
    while b.num_nodes() < fwd - 60:
        cout = widths[min(stage, len(widths) - 1)]
        stride = 2 if blocks_in_stage == 0 and stage > 0 and b.shape(x)[1] >= 4 else 1
        y = _conv_bn_relu(b, x, cout, 3, stride, train)
        y = _conv_bn_relu(b, y, cout, 3, 1, train, act=False)
        if stride != 1 or b.shape(x)[-1] != cout:
            x = _conv_bn_relu(b, x, cout, 1, stride, train, act=False)
        x = _relu(b, b.ew("add", y, x))
        blocks_in_stage += 1
        if blocks_in_stage >= per_stage and stage < len(widths) - 1:
            stage, blocks_in_stage = stage + 1, 0
    return [_classifier_head(b, x, int(_pick(rng, [10, 100, 1000]))), *_backward(b, x, target)]


def build_unet(b: HloBuilder, rng: np.random.Generator, target: int, nsp: int) -> list[int]:
    """UNet-like encoder/decoder (2-D or 3-D) with transposed convs and concatenated skips."""
    train, fwd = _train_step(b, rng, 0.6, target, 0.6)
    batch = int(_pick(rng, [1, 2, 4] if nsp == 3 else [2, 4, 8, 16]))
    size = int(_pick(rng, [16, 24, 32, 48, 64] if nsp == 3 else [64, 128, 160, 256]))
    base = int(_pick(rng, [16, 32, 48, 64]))
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    x = b.param([batch] + [size] * nsp + [int(_pick(rng, [1, 3, 4]))], dtype)
    label = x
    skips: list[int] = []
    width = base
    depth_budget = max(1, int(math.log2(size)) - 2)
    while True:
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        if len(skips) >= depth_budget or b.num_nodes() > fwd * 0.45:
            break
        skips.append(x)
        if rng.random() < 0.5:
            x = b.reduce_window(x, 2, 2)
        else:
            x = _conv_bn_relu(b, x, width, 3, 2, train)  # strided conv downsampling
        width *= 2
    while skips:
        skip = skips.pop()
        width //= 2
        x = _conv_bn_relu(b, x, width, 3, 1, train, lhs_dilation=2)  # transposed conv (x2)
        if b.shape(x)[1:-1] != b.shape(skip)[1:-1]:
            x = b.slice(x, [0] * len(b.shape(x)), list(b.shape(x)[:1]) + list(b.shape(skip)[1:-1])
                        + [b.shape(x)[-1]])
        x = b.concat([x, skip], len(b.shape(x)) - 1)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
        x = _conv_bn_relu(b, x, width, 3, 1, train)
    while b.num_nodes() < fwd - 30:  # refinement convs until the size target
        x = _conv_bn_relu(b, x, b.shape(x)[-1], 3, 1, train)
    w = b.param([1] * nsp + [b.shape(x)[-1], b.shape(label)[-1]], dtype)
    out = b.conv(x, w, 1)
    diff = b.ew("subtract", out, label)
    loss = b.reduce(b.ew("multiply", diff, diff), tuple(range(len(b.shape(diff)))))
    return [out, loss, *_backward(b, x, target)]


def _layer_norm(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    r = len(s)
    keep = tuple(range(r - 1))
    cen, inv = _normalize(b, x, (r - 1,), keep)
    y = b.ew("multiply", cen, b.bcast(inv, s, keep))
    y = b.ew("multiply", y, b.bcast(b.param((s[-1],)), s, (r - 1,)))
    return b.ew("add", y, b.bcast(b.param((s[-1],)), s, (r - 1,)))


def _dense(b: HloBuilder, x2: int, out: int) -> int:
    key = (b.layer_slot, b.shape(x2)[1], out)
    b.layer_slot += 1
    if b.shared is not None and key in b.shared:  # ALBERT: the same weights in every layer
        w, bias = b.shared[key]
    else:
        w, bias = b.param((b.shape(x2)[1], out), b.dtype(x2)), b.param((out,), b.dtype(x2))
        if b.shared is not None:
            b.shared[key] = (w, bias)
    y = b.dot(x2, w, (1,), (0,))
    if b.dense_trace is not None:
        b.dense_trace.append((x2, w, y))
    return b.ew("add", y, b.bcast(bias, b.shape(y), (1,)))


def _dense_backward(b: HloBuilder, seed_grad: int, target: int) -> list[int]:
    """Backward pass of the traced dense layers (none unless a training step), last first:
    ``dW = x^T dY`` (dot contracting dim 0 of both), ``dX = dY W^T`` (contracting dim 1 of both)
    and SGD updates."""
    updates: list[int] = []
    dy: int | None = None
    for x2, w, y in reversed(b.dense_trace or []):
        if b.num_nodes() >= target - 20:
            break
        s, dt = b.shape(y), b.dtype(y)
        dy = _incoming_grad(b, seed_grad, dy, s, dt)
        dw = b.dot(x2, dy, (0,), (0,))
        updates.append(b.ew("subtract", w, b.ew("multiply", dw, b.scalar_bcast(b.shape(w), dt))))
        dy = b.dot(dy, w, (1,), (1,))
    return updates


def _gelu(b: HloBuilder, x: int) -> int:
    s = b.shape(x)
    x3 = b.ew("multiply", b.ew("multiply", x, x), x)
    inner = b.ew("add", x, b.ew("multiply", x3, b.scalar_bcast(s)))
    t = b.ew("tanh", b.ew("multiply", inner, b.scalar_bcast(s)))
    return b.ew("multiply", b.ew("multiply", x, b.scalar_bcast(s)),
                b.ew("add", t, b.scalar_bcast(s)))


def _attention(b: HloBuilder, x: int, heads: int, fused_qkv: bool = False,
               masked: bool = True) -> int:
    """Multi-head self-attention. ``fused_qkv``: one dense to 3H, sliced into Q/K/V (K then
    contracts on its last dim); otherwise three denses with K transposed to (B, h, hd, S)."""
    bs, seq, hid = b.shape(x)
    hd = hid // heads
    x2 = b.reshape(x, (bs * seq, hid))
    if fused_qkv:
        qkv = b.transpose(b.reshape(_dense(b, x2, 3 * hid), (bs, seq, 3, heads, hd)),
                          (2, 0, 3, 1, 4))  # (3, B, h, S, hd)
        q, k, v = (b.reshape(b.slice(qkv, (i, 0, 0, 0, 0), (i + 1, bs, heads, seq, hd)),
                             (bs, heads, seq, hd)) for i in range(3))
        scores = b.dot(q, k, (3,), (3,), (0, 1), (0, 1))  # (B, h, S, S)
    else:
        def proj(perm: Sequence[int]) -> int:
            y = b.reshape(_dense(b, x2, hid), (bs, seq, heads, hd))
            return b.transpose(y, perm)

        q, k, v = proj((0, 2, 1, 3)), proj((0, 2, 3, 1)), proj((0, 2, 1, 3))
        scores = b.dot(q, k, (3,), (2,), (0, 1), (0, 1))  # (B, h, S, S)
    scores = b.ew("multiply", scores, b.scalar_bcast(b.shape(scores)))
    if masked:
        mask = b.param((bs, seq), "f32")
        scores = b.ew("add", scores, b.bcast(mask, b.shape(scores), (0, 3)))
    probs = _softmax(b, scores)
    ctx = b.dot(probs, v, (3,), (2,), (0, 1), (0, 1))  # (B, h, S, hd)
    ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3)), (bs * seq, hid))
    return b.reshape(_dense(b, ctx, hid), (bs, seq, hid))


def build_bert(b: HloBuilder, rng: np.random.Generator, target: int, shared: bool = False,
               train_prob: float = 0.3) -> list[int]:
    """BERT/ALBERT-like encoder stack; adds layers until ``target`` nodes. ``shared``: ALBERT's
    cross-layer weight sharing; a training step (probability ``train_prob``) adds the backward
    pass of the dense layers."""
    _, fwd = _train_step(b, rng, train_prob, target, 0.65)
    if shared:
        b.shared = {}
    batch = int(_pick(rng, [1, 2, 4, 8, 16, 32]))
    seq = int(_pick(rng, [64, 128, 256, 384, 512]))
    hid = int(_pick(rng, [128, 256, 312, 384, 512, 768, 1024]))
    heads = max(1, hid // int(_pick(rng, [32, 64, 64, 128])))
    while hid % heads:
        heads -= 1
    ffn = hid * int(_pick(rng, [2, 4, 4]))
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    x = b.param((batch, seq, hid), dtype)
    pos = b.param((seq, hid), dtype)
    x = _layer_norm(b, b.ew("add", x, b.bcast(pos, (batch, seq, hid), (1, 2))))
    pre_ln = bool(rng.random() < 0.35)  # pre-LN (x + f(LN(x))) or post-LN (LN(x + f(x)))
    fused = bool(rng.random() < 0.4)
    masked = bool(rng.random() < 0.8)
    act = _gelu if rng.random() < 0.8 else _relu

    def ffn_block(y: int) -> int:
        h = act(b, _dense(b, b.reshape(y, (batch * seq, hid)), ffn))
        return b.reshape(_dense(b, h, hid), (batch, seq, hid))

    while True:
        b.layer_slot = 0
        if pre_ln:
            x = b.ew("add", x, _attention(b, _layer_norm(b, x), heads, fused, masked))
            x = b.ew("add", x, ffn_block(_layer_norm(b, x)))
        else:
            x = _layer_norm(b, b.ew("add", x, _attention(b, x, heads, fused, masked)))
            x = _layer_norm(b, b.ew("add", x, ffn_block(x)))
        if b.num_nodes() >= fwd - 110:
            break
    b.layer_slot = 100
    cls = b.reshape(b.slice(x, (0, 0, 0), (batch, 1, hid)), (batch, hid))
    pooled = b.ew("tanh", _dense(b, cls, hid))
    probs = _softmax(b, _dense(b, pooled, int(_pick(rng, [2, 3, 10]))))
    return [probs, *_dense_backward(b, probs, target)]


def build_layout_graph(source: str, rng: np.random.Generator, target: int) -> tuple[HloBuilder, str]:
    """One whole-program graph for the ``nlp`` or ``xla`` layout collections, with a family name."""
    b = HloBuilder()
    if source == "nlp":
        family = _pick(rng, ["bert", "albert", "electra", "roberta"])
        outs = build_bert(b, rng, target, shared=family == "albert")
    else:
        family = _pick(rng, ["resnet", "resnet", "efficientnet", "unet2d", "unet3d", "unet3d",
                             "transformer"])
        if family in ("resnet", "efficientnet"):
            outs = build_resnet(b, rng, target)
        elif family.startswith("unet"):
            outs = build_unet(b, rng, target, 3 if family == "unet3d" else 2)
        else:
            outs = build_bert(b, rng, target, train_prob=0.5)
    b.tuple_(outs)
    return b, family


# -- tile kernels ------------------------------------------------------------------------------


def build_tile_kernel(rng: np.random.Generator, target: int) -> tuple[HloBuilder, dict]:
    """A fused kernel (body computation, then outer params and the fusion node) and the
    description the tile cost models use."""
    b = HloBuilder()
    body = b.new_comp()
    b.cur = body
    kind = _pick(rng, ["conv", "conv", "dot", "dot", "elementwise", "reduce", "copy"])
    dtype = "bf16" if rng.random() < 0.5 else "f32"
    info: dict = {"kind": kind, "dtype": dtype}
    if kind == "conv":
        n, hw, cin, cout, k = (int(_pick(rng, o)) for o in (  # drawn in this order
            [1, 8, 16, 32, 64], [7, 12, 14, 28, 56], [3, 32, 64, 96, 128, 192, 256, 384, 512],
            [32, 64, 128, 192, 256, 384, 512], [1, 3, 3, 5]))
        x, w = b.param((n, hw, hw, cin), dtype), b.param((k, k, cin, cout), dtype)
        y = b.conv(x, w)
        info.update(contract=k * k * cin, cin=cin, kernel_shape=(k, k, cin, cout))
    elif kind == "dot":
        m, kk, nn = (int(_pick(rng, o)) for o in ([128, 256, 512, 1024, 2048, 4096, 8192],
                     [64, 128, 256, 512, 768, 1024, 3072], [64, 128, 256, 384, 768, 1024, 3072]))
        x, w = b.param((m, kk), dtype), b.param((kk, nn), dtype)
        y = b.dot(x, w, (1,), (0,))
        info.update(contract=kk, cin=kk, kernel_shape=(kk, nn))
    else:
        rank = int(_pick(rng, [3, 4] if kind == "reduce" else [2, 3, 4]))
        shape = [int(_pick(rng, [2, 8, 16, 32, 64, 128, 256, 384, 512, 1024])) for _ in range(rank)]
        y = b.param(shape, dtype)
        if kind == "copy":
            perm = list(rng.permutation(rank))
            y = b.transpose(y, perm) if perm != list(range(rank)) else b.ew("negate", y)
        info.update(contract=0, cin=0, kernel_shape=())
    ops = ["multiply", "add", "maximum", "subtract", "exponential", "tanh", "convert", "select"]
    while b.num_nodes() < target - 4:
        op = _pick(rng, ops)
        s = b.shape(y)
        if op in ("multiply", "add", "maximum", "subtract"):
            other = b.param(s[-1:], b.dtype(y)) if rng.random() < 0.5 else b.const((), b.dtype(y))
            dims = (len(s) - 1,) if b.shape(other) else ()
            y = b.ew(op, y, b.bcast(other, s, dims))
        elif op == "select":
            pred = b.ew("compare", y, b.scalar_bcast(s, b.dtype(y)), dtype="pred")
            y = b.add("select", s, (pred, y, b.scalar_bcast(s, b.dtype(y))), b.dtype(y))
        elif op == "convert":
            y = b.ew("convert", b.ew("convert", y, dtype="f32"), dtype=b.dtype(y))
        else:
            y = b.ew(op, y)
    if kind == "reduce":
        y = b.reduce(y, (len(b.shape(y)) - 1,))
        info["reduce"] = True
    root = y
    rank = len(b.shape(root))
    layout = row_major(rank)
    if kind == "conv" and rng.random() < 0.5 and rank == 4:
        layout = (3, 0, 2, 1)  # feature minor, batch second-minor (as in real conv kernels)
    for nd in b.comps[body]:  # layout assignment already ran: same-rank arrays share it
        if len(nd.shape) == rank and nd.op != "parameter":
            nd.layout = layout
    info.update(out_shape=b.shape(root), layout=layout,
                in_bytes=sum(math.prod(nd.shape) * TYPE_BYTES.get(nd.dtype, 4)
                             for nd in b.comps[body] if nd.op == "parameter"))
    # outer computation: one parameter per body parameter, then the fusion node (root)
    b.cur = b.entry
    outer = [b.param(nd.shape, nd.dtype) for nd in b.comps[body] if nd.op == "parameter"]
    b.add("fusion", info["out_shape"], outer, b.comps[body][root].dtype, calls=(body,),
          layout=layout)
    return b, info
