"""Exact dot-general dimension numbers from the protos vs the inference from shapes
(``features.dot_features.dot_dims_for_graph``) on the JAX modules.

Inference sees only the npz arrays: the dot's shape and the shapes of its operands, in edge
order (the npz loses which operand is lhs). Where exactly one assignment of batch/contracting
dimensions in exactly one operand order reproduces the output shape, inference is unambiguous
and must return the exact value; elsewhere (e.g. square matrices, ``x @ x.T``) it may not.
"""

from __future__ import annotations

import itertools

from features.hlo import exact_dot_dims, module_arrays, read_module
from features.hlo.convert import index_module


def _solutions(out, lhs, rhs):
    """Every (lhs_c, rhs_c, lhs_b, rhs_b) consistent with the shapes (brute force, small ranks)."""
    found = []
    lr, rr = len(lhs), len(rhs)
    for nb in range(min(lr, rr) + 1):
        for lb in itertools.combinations(range(lr), nb):
            for rb in itertools.permutations(range(rr), nb):
                lrest = [d for d in range(lr) if d not in lb]
                rrest = [d for d in range(rr) if d not in rb]
                for nc in range(min(len(lrest), len(rrest)) + 1):
                    for lc in itertools.combinations(lrest, nc):
                        for rc in itertools.permutations(rrest, nc):
                            if any(lhs[a] != rhs[b] for a, b in zip(lb + lc, rb + rc)):
                                continue
                            lf = [d for d in lrest if d not in lc]
                            rf = [d for d in rrest if d not in rc]
                            shape = [lhs[d] for d in lb] + [lhs[d] for d in lf] + [rhs[d] for d in rf]
                            if tuple(shape) == tuple(out):
                                found.append((lc, rc, lb, rb))
    return found


def test_exact_equals_inferred_where_unambiguous(shared_data):
    from features import dot_features

    pbs = sorted((shared_data / "jax-hlo").glob("*.pb"))
    unambiguous = ambiguous = 0
    for pb in pbs:
        module = read_module(pb)
        arrays = module_arrays(module)
        exact = exact_dot_dims(pb)
        instructions = index_module(module).instructions
        inferred = dot_features.dot_dims_for_graph(arrays["node_feat"], arrays["node_opcode"],
                                                 arrays["edge_index"])
        for node, dd in exact.items():
            out = tuple(int(d) for d in instructions[node].shape.dimensions)
            n_sol = (len(_solutions(out, dd.lhs_shape, dd.rhs_shape))
                     + len(_solutions(out, dd.rhs_shape, dd.lhs_shape)))
            assert n_sol >= 1, f"{pb.name} node {node}: exact dims inconsistent with shapes"
            if n_sol > 1:
                ambiguous += 1
                continue
            unambiguous += 1
            got, is_exact = inferred[node]
            assert not is_exact
            assert got == dd, f"{pb.name} node {node}: inferred {got} != exact {dd}"
        # with the exact values passed in, they are used as they are
        with_exact = dot_features.dot_dims_for_graph(arrays["node_feat"], arrays["node_opcode"],
                                                   arrays["edge_index"], exact)
        assert {u: d for u, (d, _) in with_exact.items()} == exact
    assert unambiguous >= 30 and ambiguous > 0  # 32 and 24 of the 56 dots


def test_features_build_uses_pb_tree(shared_data, tmp_path):
    """A ``pb/`` tree mirroring ``npz_all/`` makes ``features build`` use the exact dot dims."""
    import json
    import shutil

    from features import build
    from features.hlo import convert_file

    src = shared_data / "jax-hlo" / "transformer_fwd.pre.hlo.pb"
    root = tmp_path / "root"
    [c] = convert_file(src, root, split="train", layout_collection="layout:xla:random")
    rel = c.path.relative_to(root / "npz_all" / "npz").with_suffix(".pb")
    (root / "pb" / rel).parent.mkdir(parents=True)
    shutil.copy(src, root / "pb" / rel)
    assert build.main(["--data", str(root), "--work", str(tmp_path / "work"), "--collections",
                       "layout:xla:random", "--jobs", "1", "--progress", "false",
                       "--tabular", "false"]) == 0
    meta = json.loads(next((tmp_path / "work" / "features").rglob("meta.json")).read_text())
    assert meta["exact_dot"] is True
