"""``python -m models.gnn rank --hlo``: candidate enumeration and the end-to-end run on a JAX
module with a (tiny, plumbing-only) trained pipeline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from models.gnn.candidates import LayoutSpace, NodeSpace

_spec = importlib.util.spec_from_file_location("_rp", Path(__file__).with_name("real_pipeline.py"))
_rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rp)
pipeline = _rp.load_helper()

SPACES = [NodeSpace(3, "conv.1", "convolution", (4, 4, 4)), NodeSpace(7, "dot.2", "dot", (2, 2)),
          NodeSpace(9, "reshape.3", "reshape", (0, 1))]


def test_candidates_default_first_distinct_and_valid():
    c = LayoutSpace(SPACES, "minor2").distinct(50, seed=1)
    assert c.shape == (50, 3, 18) and c.dtype == np.float32
    assert (c[0] == -1).all()
    assert len({row.tobytes() for row in c}) == 50
    for ns_i, ns in enumerate(SPACES):
        for t in range(3):
            block = c[:, ns_i, 6 * t:6 * t + 6]
            rank = ns.ranks[t] if t < len(ns.ranks) else 0
            set_vals = block[block >= 0]
            assert (set_vals < max(rank, 1)).all()
            assert (block[:, 2:] == -1).all()  # minor2: two most-minor dims at most
            if rank:  # a set layout never repeats a dimension
                rows = block[(block >= 0).any(axis=1)]
                assert all(len(set(r[r >= 0].tolist())) == (r >= 0).sum() for r in rows)
    full = LayoutSpace(SPACES, "full").distinct(20, seed=2)
    assert ((full[:, 0, 0:6] >= 0).sum(axis=1) % 4 == 0).all()  # whole permutations of rank 4


def test_candidates_small_space_stops():
    tiny = [NodeSpace(0, "r", "reshape", (1, 1))]
    c = LayoutSpace(tiny, "minor2").distinct(10)
    assert len(c) == 2  # default + the only other layout, no endless loop
    with pytest.raises(ValueError, match="unknown layout space"):
        LayoutSpace(tiny, "bogus")


def test_describe():
    space = LayoutSpace(SPACES, "minor2")
    c = space.distinct(5, seed=0)
    assert space.describe(c[0]) == "(compiler default)"
    assert any(name in space.describe(c[1]) for name in ("conv.1", "dot.2", "reshape.3"))


def test_rank_hlo_end_to_end(shared_data, tmp_path, capsys):
    from models.gnn.__main__ import main

    work = pipeline.trained_work(shared_data)
    pb = shared_data / "jax-hlo" / "transformer_fwd.pre.hlo.pb"
    out_csv = tmp_path / "ranked.csv"
    assert main(["rank", "--hlo", str(pb), "--candidates", "24", "--work", str(work),
                 "--collection", pipeline.COLLECTION, "--top", "5", "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "jit_transformer_block" in out and "compiler default (candidate 0) ranks" in out
    rows = out_csv.read_text().splitlines()
    assert len(rows) == 1 + 24 and rows[1].startswith("1,")
    costs = [float(r.split(",")[2]) for r in rows[1:]]
    assert costs == sorted(costs) and np.isfinite(costs).all()


def test_rank_errors(shared_data, tmp_path, capsys):
    from models.gnn.rank import main

    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x12\x05abc")
    assert main(["--hlo", str(bad), "--work", str(tmp_path)]) == 1
    assert "bad.pb" in capsys.readouterr().err
    pb = shared_data / "jax-hlo" / "convnet_fwd.pre.hlo.pb"
    assert main(["--hlo", str(pb), "--work", str(tmp_path / "nowhere")]) == 1
    assert "no trained GNN" in capsys.readouterr().err
    assert main(["--hlo", str(pb), "--work", str(tmp_path), "--opcodes", "fft"]) == 1
    assert "no configurable node" in capsys.readouterr().err


def test_rank_uses_record_config_nodes(shared_data):
    from models.gnn.rank import read_target

    module, nodes = read_target(str(shared_data / "real-tpu" / "module_tuning_data_layout.pb"))
    assert len(nodes) == 62 and module.name == "main__.10904"  # docs/competition.md §9: 53 convs + 9 reshapes
    module, nodes = read_target(str(shared_data / "jax-hlo" / "convnet_fwd.pre.hlo.pb"))
    assert nodes == []
