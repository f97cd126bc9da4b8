"""A test graph is never dropped: the documented repairs of the problems a test file may have and
still be ranked (the table: docs/data.md, "Validation"): non-finite node features become ``-1``,
an unknown opcode id the unknown bucket ``0``, and a graph without configurable node gets tied
configs (no model is asked; ``ensemble blend`` keeps the file order).

``features build`` applies the repairs when it loads a test graph (:func:`repair_graph`). Train and
valid files with any problem are still skipped: a repaired graph is never learnt from or scored on.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from features.columns import UNKNOWN_OPCODE_ID, opcode_ids
from features.io import Graph, npz_headers

PADDING_VALUE = -1.0
NON_FINITE = "non-finite node features become the padding value -1"
UNKNOWN_OPCODE = f"opcode ids outside hlo_opcodes.tsv become the shared unknown bucket {UNKNOWN_OPCODE_ID}"
NO_CONFIGURABLE_NODE = "no configurable node: every config ties, the submission keeps the file order"
#: the split whose files are repaired instead of skipped
REPAIRED_SPLIT = "test"


def known_opcode_ids() -> np.ndarray:
    """The opcode ids of ``features/data/hlo_opcodes.tsv``, sorted."""
    return np.sort(np.fromiter(opcode_ids().values(), np.int64))


def repair_nodes(node_feat: np.ndarray, node_opcode: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(node_feat, node_opcode, repairs made)``: copies where something was repaired, the
    inputs themselves otherwise."""
    repairs = []
    finite = np.isfinite(node_feat)
    if not finite.all():
        node_feat = np.where(finite, node_feat, np.float32(PADDING_VALUE)).astype(node_feat.dtype)
        repairs.append(NON_FINITE)
    opcode = np.asarray(node_opcode)
    unknown = ~np.isin(opcode, known_opcode_ids())
    if unknown.any():
        node_opcode = np.where(unknown, UNKNOWN_OPCODE_ID, opcode).astype(opcode.dtype)
        repairs.append(UNKNOWN_OPCODE)
    return node_feat, node_opcode, repairs


def repair_graph(graph: Graph) -> tuple[Graph, list[str]]:
    """The graph with its node problems repaired (:func:`repair_nodes`) and what was done."""
    node_feat, node_opcode, repairs = repair_nodes(np.asarray(graph.node_feat), graph.node_opcode)
    if not repairs:
        return graph, []
    return dataclasses.replace(graph, node_feat=node_feat, node_opcode=node_opcode), repairs


def has_no_configurable_node(path: str | os.PathLike) -> bool:
    """Whether an npz file is a layout graph with an empty ``node_config_ids`` (headers only)."""
    shape = getattr(npz_headers(Path(path)).get("node_config_ids"), "shape", None)
    return shape is not None and int(np.prod(shape)) == 0
