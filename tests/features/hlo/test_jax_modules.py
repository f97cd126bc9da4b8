"""Every HLO module in ``data/jax-hlo``: decode the .pb and check it against the HLO text
XLA printed for the same module (.txt): instruction count, opcodes, dot dimension numbers,
convolution dim labels, and that the converted graph is topologically ordered (docs/competition.md §3)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from features.hlo import exact_dot_dims, module_arrays, read_proto
from features.hlo.convert import index_module, opcode_ids, operand_shapes

INST = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s+=\s+.*?\s([a-z][a-z0-9\-]*)\(")
DIMS = {key: re.compile(key + r"_dims=\{([\d,]*)\}")
        for key in ("lhs_contracting", "rhs_contracting", "lhs_batch", "rhs_batch")}
DIM_LABELS = re.compile(r"dim_labels=(\w+)_(\w+)->(\w+)")
# What each program must contain (docs/competition.md §9: a small conv net and a transformer block).
EXPECTED_OPCODES = {"convnet": {"convolution", "dot", "reduce-window"},
                    "transformer": {"dot", "reduce", "exponential"}}


def _modules(shared_data: Path) -> list[Path]:
    pbs = sorted((shared_data / "jax-hlo").glob("*.pb"))
    if not pbs:
        pytest.skip(f"no .pb files in {shared_data / 'jax-hlo'}")
    return pbs


def _text_instructions(txt: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for line in txt.read_text().splitlines():
        m = INST.match(line)
        if m:
            out[m.group(1)] = (m.group(2), line)
    return out


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


def test_all_jax_modules_decode(shared_data):
    pbs = _modules(shared_data)
    assert len(pbs) == 8
    for pb in pbs:
        pf = read_proto(pb)
        assert pf.kind == "HloModuleProto", pb.name
        mod = pf.message
        text = _text_instructions(pb.with_suffix(".txt"))
        ours = {i.name: i.opcode for c in mod.computations for i in c.instructions}
        assert len(ours) == sum(len(c.instructions) for c in mod.computations), "unique names"
        assert {k: v[0] for k, v in text.items()} == ours, pb.name
        arrays = module_arrays(mod)
        n = len(ours)
        assert arrays["node_feat"].shape == (n, 140) and arrays["node_opcode"].shape == (n,)
        table = opcode_ids()
        assert Counter(arrays["node_opcode"].tolist()) == Counter(table[o] for o in ours.values())
        family = pb.name.split("_")[0]
        assert EXPECTED_OPCODES[family] <= set(ours.values()), pb.name
        e = arrays["edge_index"]
        assert len(e) > 0 and (e[:, 1] < e[:, 0]).all(), f"{pb.name}: not topologically ordered"
        assert len(np.unique(e, axis=0)) == len(e)
        assert arrays["node_splits"][0] == 0 and arrays["node_splits"][-1] == n
        # exactly one root flag per computation
        assert arrays["node_feat"][:, 0].sum() == len(mod.computations)


def test_dot_dimension_numbers_match_text(shared_data):
    total = 0
    for pb in _modules(shared_data):
        text = _text_instructions(pb.with_suffix(".txt"))
        names = [i.name for c in read_proto(pb).message.computations for i in c.instructions]
        dots = exact_dot_dims(pb)
        assert len(dots) == sum(op == "dot" for op, _ in text.values())
        for node, dd in dots.items():
            _, line = text[names[node]]
            for key, rx in DIMS.items():
                m = rx.search(line)
                assert getattr(dd, key) == (_ints(m.group(1)) if m else ()), (pb.name, key)
            assert len(dd.lhs_shape) >= len(dd.lhs_contracting) + len(dd.lhs_batch)
            total += 1
    assert total >= 50  # 1+1+3+3+6+6+18+18 dots in the eight modules


def test_convolution_features_match_dim_labels(shared_data):
    seen = 0
    for pb in _modules(shared_data):
        if not pb.name.startswith("convnet"):
            continue
        text = _text_instructions(pb.with_suffix(".txt"))
        names = [i.name for c in read_proto(pb).message.computations for i in c.instructions]
        module = read_proto(pb).message
        feats = module_arrays(module)["node_feat"]
        index = index_module(module)
        convolutions = [n for n, inst in enumerate(index.instructions) if inst.opcode == "convolution"]
        for node in convolutions:
            lhs, rhs, out = DIM_LABELS.search(text[names[node]][1]).groups()
            f = feats[node]
            assert (f[93], f[94]) == (lhs.index("b"), lhs.index("f"))
            assert (f[99], f[100]) == (rhs.index("i"), rhs.index("o"))
            assert (f[105], f[106]) == (out.index("b"), out.index("f"))
            shapes = operand_shapes(index, node)
            assert len(shapes) == 2 and len(shapes[1]) == len(rhs)
            seen += 1
    assert seen > 0
