"""``python -m models.gnn search`` (issue 42): legal proposals, the budgets, the proposals file,
and the oracle (``benchmarks/oracle.py``) on a tiny generated graph."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from models.gnn.candidates import NodeSpace
from benchmarks.search_oracle import distance, legal
from models.gnn.search import LayoutSpace, TileSpace, run_search

_spec = importlib.util.spec_from_file_location("_rp", Path(__file__).with_name("real_pipeline.py"))
_rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rp)
pipeline = _rp.load_helper()

SPACES = [NodeSpace(3, "conv.1", "convolution", (4, 4, 4)), NodeSpace(7, "dot.2", "dot", (3, 3)),
          NodeSpace(9, "reshape.3", "reshape", (0, 1)), NodeSpace(11, "r.4", "reshape", (0, 0))]


def test_layout_space_proposes_only_legal_layouts():
    space = LayoutSpace(SPACES)
    assert space.movable == [0, 1, 2]  # a node with only rank-0 tensors cannot move
    assert [len(c) for c in space.choices[0]] == [13, 13, 13]  # conv: default + 4*3 ordered pairs
    assert [len(c) for c in space.choices[1]] == [7, 7]  # dot: default + 3! permutations
    rng = np.random.default_rng(0)
    cfgs = list(space.random(rng, 50))
    for c in cfgs[:20]:
        child = c.copy()
        for _ in range(5):
            space.mutate(rng, child)
        cfgs.append(space.crossover(rng, child, cfgs[0]))
    assert all(legal(space, c) for c in cfgs) and legal(space, space.default)
    assert all((c[0, :18].reshape(3, 6)[:, 2:] == -1).all() for c in cfgs)  # conv: two minor dims
    bad = space.default.copy()
    bad[1, 0:2] = [0, 1]  # a dot output given only partly
    assert not legal(space, bad)
    bad = space.default.copy()
    bad[2, 12] = 0  # a kernel slot the reshape has not
    assert not legal(space, bad)
    full = LayoutSpace(SPACES, "full")
    assert len(full.choices[0][0]) == 25  # default + 4!
    with pytest.raises(ValueError, match="no configurable node"):
        LayoutSpace([SPACES[3]])


def test_tile_space_legal_bounds():
    given = np.zeros((3, 24), np.float32)
    given[:, 8:10] = [[1, 4], [2, 8], [1, 3]]
    given[:, 0] = [1, 1, 1]
    TileSpace.encode(given)
    space = TileSpace(given)
    assert space.dims == [0, 8, 9]
    assert space.values[9].tolist() == [1, 2, 3, 4, 8]
    rng = np.random.default_rng(0)
    cfgs = space.random(rng, 30)
    for c in cfgs:
        space.mutate(rng, c)
    assert all(legal(space, c) for c in cfgs)
    assert cfgs[0][14] == cfgs[0][8] + cfgs[0][9] and cfgs[0][15] == cfgs[0][8] * cfgs[0][9]
    every = space.every()
    assert space.size() == len(every) == 1 * 2 * 5 and all(legal(space, c) for c in every)
    res = run_search(space, lambda c: np.abs(c[:, 8] - 2) + np.abs(c[:, 9] - 3), given, k=3,
                     time_budget=5)
    assert res.evals == 10 and res.configs[0][8:10].tolist() == [2, 3] and res.changed is None
    bad = cfgs[0].copy()
    bad[9] = 16  # beyond the kernel's largest bound
    assert not legal(space, TileSpace.encode(bad))


def _separable_cost(cfgs: np.ndarray) -> np.ndarray:
    """Best: every set value small; -1 (default) costs 1 per slot."""
    v = np.asarray(cfgs, np.float64)
    return np.where(v < 0, 1.0, v * 0.5).sum(axis=(1, 2))


def test_search_budgets_and_proposals():
    space = LayoutSpace(SPACES)
    start = space.random(np.random.default_rng(1), 8)
    res = run_search(space, _separable_cost, start, k=5, time_budget=0, max_evals=300, batch=64)
    assert res.evals == 300  # the evaluation budget, exactly
    assert len(res.configs) == 5 and list(res.costs) == sorted(res.costs)
    assert len({c.tobytes() for c in res.configs}) == 5
    assert all(legal(space, c) for c in res.configs)
    assert res.costs[0] < min(_separable_cost(start)) and res.costs[0] < res.default_cost

    def slow(cfgs):
        time.sleep(0.05)
        return _separable_cost(cfgs)

    lines = []
    t0 = time.perf_counter()
    res = run_search(space, slow, start, k=3, time_budget=0.3, batch=16, progress=lines.append)
    assert time.perf_counter() - t0 < 0.3 + 0.2  # stops within one batch of the budget
    assert lines and "configs scored" in lines[-1]
    with pytest.raises(ValueError, match="budget"):
        run_search(space, slow, start, time_budget=0, max_evals=0)


def test_search_ladder_one_proposal_per_trust_radius():
    from models.gnn.search import trust_rungs

    assert trust_rungs(10) == [0, 1, 2, 3, 4, 6, 8, 12, 16, float("inf")]
    space = LayoutSpace(SPACES)
    start = space.random(np.random.default_rng(2), 16)
    def far(c):  # predicted: the more slots set, the faster
        return -(np.asarray(c) >= 0).sum(axis=(1, 2)).astype(float)

    res = run_search(space, far, space.default[None], k=4, time_budget=0, max_evals=400, batch=32)
    assert sorted(res.changed) == [0, 1, 2, 3]  # the default, the best at <= 1, <= 2, anywhere
    assert list(res.costs) == sorted(res.costs) and res.changed[0] == 3
    assert all(distance(c) == d for c, d in zip(res.configs, res.changed))
    plain = run_search(space, far, start, k=4, time_budget=0, max_evals=400, batch=32, ladder=False)
    assert plain.changed is None and all(distance(c) == 3 for c in plain.configs)
    anchored = run_search(space, far, start, k=4, time_budget=0, max_evals=400, batch=32)
    codes = LayoutSpace.node_codes(np.concatenate([space.default[None], start]))
    for c, d in zip(anchored.configs, anchored.changed):  # nodes away from the nearest anchor
        assert d == (LayoutSpace.node_codes(c[None]) != codes).sum(-1).min()
    assert 0 in anchored.changed


def test_search_exhausts_a_tiny_space():
    space = LayoutSpace([NodeSpace(0, "r", "reshape", (1, 1))])  # 2 x 2 configs in all
    res = run_search(space, _separable_cost, space.default[None], k=10, time_budget=5, batch=8)
    assert res.evals == 4 and len(res.configs) == 4 and res.seconds < 5


def test_oracle_reprices_the_generated_runtimes(tiny_root):
    from benchmarks.oracle import check_oracle, load_oracle

    npz = tiny_root / "npz_all" / "npz"
    layout = sorted((npz / "layout" / "nlp" / "random" / "train").glob("*.npz"))[0]
    tile = sorted((npz / "tile" / "xla" / "train").glob("*.npz"))[0]
    assert check_oracle(layout) < 0.01  # 0.15 % measurement noise
    assert check_oracle(tile) < 0.03  # 0.5 % noise and machine speeds
    oracle = load_oracle(layout)
    default = oracle.runtimes(oracle.default[None])
    assert default.shape == (1,) and default[0] > 0
    renamed = layout.with_name("resnet_000_00000000.npz")
    renamed.write_bytes(layout.read_bytes())
    try:
        with pytest.raises(ValueError, match="does not match"):
            load_oracle(renamed)
    finally:
        renamed.unlink()


def test_search_npz_and_oracle_end_to_end(shared_data, tiny_root, tmp_path):
    """Plumbing: a model trained on the real record searches a tiny generated graph; the oracle
    prices its proposals (benchmarks/search_oracle.py's per-graph case)."""
    from models.gnn.search import main
    from models.gnn.rank import load_pipeline
    from tpurank.collections import get_collection

    work = pipeline.trained_work(shared_data)
    graph = sorted((tiny_root / "npz_all/npz/layout/xla/random/test").glob("*.npz"))[0]
    out = tmp_path / "proposals.txt"
    assert main([str(graph), "--work", str(work), "--k", "3", "--max-evals", "200",
                 "--time-budget", "0", "--pool", "8", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.count("## proposal") == 3 and "200 configs scored" in text
    assert "tensor" in text and "default" in text
    spec = importlib.util.spec_from_file_location(
        "_so", Path(__file__).resolve().parents[3] / "benchmarks" / "search_oracle.py")
    so = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(so)
    coll = get_collection(pipeline.COLLECTION)
    case = so.graph_case(graph, coll, load_pipeline(work, coll), 5, 0, 150, 0)
    assert case["evals"] == 150
    true = case["true_ns"]
    assert true["best_given"] <= true["ranked_given"] and all(v > 0 for v in true.values())
    row = so.summarize([case, case])
    assert row["graphs"] == 2 and 0 <= row["win_rate_vs_random"] <= 1


def test_search_hlo_end_to_end(shared_data, tmp_path, capsys):
    from models.gnn.__main__ import main

    work = pipeline.trained_work(shared_data)
    out = tmp_path / "hlo.txt"
    pb = shared_data / "jax-hlo" / "convnet_fwd.post.hlo.pb"
    assert main(["search", "--hlo", str(pb), "--work", str(work), "--candidates", "16",
                 "--max-evals", "100", "--time-budget", "0", "--k", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.count("## proposal") == 2 and "convolution" in text
    assert "best predicted" in capsys.readouterr().out


def test_search_errors(tmp_path, capsys):
    from models.gnn.search import main

    with pytest.raises(SystemExit):
        main(["--work", str(tmp_path)])  # neither a graph nor --hlo
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x12\x05abc")
    assert main(["--hlo", str(bad), "--work", str(tmp_path)]) == 1
    assert "bad.pb" in capsys.readouterr().err
