"""Hand-made processed graphs (the feature pipeline's output format) for GNN tests.

Runtimes are a known function of the configs, so a model can learn to rank them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from tpurank.collections import Collection, get_collection
from features.processed import ProcessedGraph, graph_dir, save_processed
from features.tabular import GRAPH_FEATURES

NODE_DIM = 6
TILE_DIM = 24


def layout_context(rng: np.random.Generator, nc: int) -> dict[str, np.ndarray]:
    """Random :class:`features.tabular.LayoutContext` tables for ``nc`` configurable nodes."""
    dims = lambda: np.pad(rng.random((nc, 3, 6)) < 0.3, ((0, 0), (0, 0), (0, 1)))  # noqa: E731
    return {"graph_feats": rng.random(len(GRAPH_FEATURES)).astype(np.float32),
            "type_onehot": np.eye(4, dtype=np.float32)[rng.integers(0, 4, nc)],
            "rank": rng.integers(1, 5, (nc, 3)), "log_size": rng.random((nc, 3)) * 10,
            "largest": dims(), "aligned128": dims(), "aligned8": dims(), "contract": dims(),
            "pairs": np.zeros((0, 2), np.int64),
            "padding": rng.random((nc, 3, 7, 2)).astype(np.float32),
            "default_dims": rng.integers(-1, 3, (nc, 3, 2)).astype(np.int8)}


def make_graph(collection: Collection, split: str, stem: str, seed: int, nodes: int = 12,
               configs: int = 24, with_target: bool = True) -> ProcessedGraph:
    """A random DAG (producer -> consumer edges) whose runtime depends on its configs."""
    rng = np.random.default_rng(seed)
    src = np.concatenate([rng.integers(0, max(1, v), size=2) for v in range(1, nodes)])
    dst = np.repeat(np.arange(1, nodes), 2)
    edge_index = np.unique(np.stack([src, dst]), axis=1).astype(np.int64)
    node_feat = rng.normal(size=(nodes, NODE_DIM)).astype(np.float32)
    node_opcode = rng.integers(1, 30, size=nodes).astype(np.int64)
    if collection.is_tile:
        config_feat = rng.integers(1, 9, size=(configs, TILE_DIM)).astype(np.float32)
        target = config_feat[:, 0] * 2.0 + config_feat[:, 8] + 0.01 * rng.random(configs)
        pos = context = None
    else:
        pos = np.sort(rng.choice(nodes, size=3, replace=False)).astype(np.int64)
        config_feat = rng.integers(-1, 6, size=(configs, 3, 18)).astype(np.int8)
        # runtime: a per-node cost of the output layout's most minor dim, summed over nodes
        target = 20.0 + config_feat[:, :, 0].sum(axis=1) + 3.0 * (config_feat[:, :, 1] == 2).sum(axis=1) \
            + 0.01 * rng.random(configs)
        context = layout_context(rng, len(pos))
    return ProcessedGraph(
        collection=collection.name, split=split, stem=stem, node_feat=node_feat,
        node_opcode=node_opcode, edge_index=edge_index, orig_node_ids=np.arange(nodes),
        config_feat=config_feat, config_index=np.arange(configs), config_node_pos=pos,
        target=target.astype(np.float64) if with_target else None, layout_context=context)


def write_features(root: Path, collections: list[str], counts=(4, 2, 2), configs: int = 24) -> Path:
    """A features directory with train/valid/test graphs of each collection."""
    seed = 0
    for name in collections:
        coll = get_collection(name)
        for split, count in zip(("train", "valid", "test"), counts):
            for k in range(count):
                seed += 1
                g = make_graph(coll, split, f"g{k}", seed, configs=configs + 3 * k,
                               with_target=split != "test")
                save_processed(g, graph_dir(root, coll, split, g.stem))
    return root


@pytest.fixture(scope="session")
def toy_features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Features dir with tile:xla and layout:xla:random/default toy graphs."""
    root = tmp_path_factory.mktemp("gnn") / "features"
    return write_features(root, ["tile:xla", "layout:xla:random", "layout:xla:default"])


@pytest.fixture
def graph_factory() -> Callable[..., ProcessedGraph]:
    return make_graph


@pytest.fixture(scope="session")
def learnable_features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More configs per graph (6 train graphs x ~80 configs) so that a ranking must generalise."""
    root = tmp_path_factory.mktemp("gnn-learn") / "features"
    return write_features(root, ["layout:xla:random"], counts=(6, 2, 1), configs=80)
