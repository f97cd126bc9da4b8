"""Processed graphs: open files stay bounded whatever the number of graphs; coded configs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from features.configcodes import CodedConfigs, encode_array, pack_keys, unpack_keys
from features.processed import ProcessedGraph, graph_dir, load_processed, save_processed
from tpurank.collections import get_collection

ROOT = Path(__file__).resolve().parents[2]


def _graph(coll: str, split: str, i: int, rng: np.random.Generator) -> ProcessedGraph:
    n, c = 6, 5
    tile = coll.startswith("tile")
    cfg = rng.random((c, 7)).astype(np.float32) if tile else \
        rng.integers(-1, 6, size=(c, 3, 18)).astype(np.int8)
    return ProcessedGraph(coll, split, f"g{i:05d}", rng.random((n, 4)).astype(np.float32),
                          np.arange(n), np.array([[0, 1], [1, 2]]), np.arange(n), cfg, np.arange(c),
                          None if tile else np.array([0, 2, 4]), rng.random(c))


def test_codes_round_trip_and_are_small() -> None:
    rng = np.random.default_rng(0)
    vals = rng.integers(-1, 6, size=(50, 18))
    assert np.array_equal(unpack_keys(pack_keys(vals)), vals)
    menu = rng.integers(-1, 6, size=(7, 18)).astype(np.int8)
    configs = menu[rng.integers(7, size=(300, 40))]  # (300, 40, 18): few distinct vectors
    coded = encode_array(configs, chunk=64)
    assert coded.codes.dtype == np.uint8 and coded.shape == configs.shape
    idx = np.array([5, 0, 299, 5])
    assert np.array_equal(coded[idx], configs[idx]) and np.array_equal(np.asarray(coded), configs)
    assert np.array_equal(coded[3:7, 2], configs[3:7, 2])
    assert (coded.codes.nbytes + coded.table.nbytes) * 9 < configs.nbytes


def test_split_of_thousands_of_graphs_under_a_256_descriptor_limit(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    fd = tmp_path / "features"
    for coll in ("tile:xla", "layout:nlp:random"):
        for i in range(1500 if coll.startswith("tile") else 600):
            g = _graph(coll, "train", i, rng)
            save_processed(g, graph_dir(fd, get_collection(coll), "train", g.stem))
    g0 = load_processed(graph_dir(fd, get_collection("layout:nlp:random"), "train", "g00000"))
    assert isinstance(g0.config_feat, CodedConfigs) and g0.config_feat.shape == (5, 3, 18)
    script = textwrap.dedent(f"""
        import os, resource, sys
        import numpy as np
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        sys.path.insert(0, {str(ROOT)!r})
        from tpurank.collections import get_collection
        from models.gnn.data import config_rows, load_graphs
        import torch
        held, peak = [], 0
        for coll in ("tile:xla", "layout:nlp:random"):
            graphs = load_graphs({str(fd)!r}, get_collection(coll), "train")
            held += graphs
            for g in graphs:
                rows = config_rows(g, np.array([4, 0, 2]), torch.device("cpu"))
                assert rows.shape[0] == 3 and np.isfinite(np.asarray(g.node_feat)).all()
                assert g.num_configs == 5 and g.target.shape == (5,)
                peak = max(peak, len(os.listdir("/proc/self/fd")))
        print(len(held), peak)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    graphs, peak = map(int, out.stdout.split())
    assert graphs == 2100 and peak < 100
