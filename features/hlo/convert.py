"""Turn an HloModuleProto (+ tuning runs) into the npz arrays of the TpuGraphs release (docs/competition.md §3–5, §8).

Node order: all computations in proto order, instructions in proto order (operands first).
Edges ``[user, operand]`` over the unique operand ids of each instruction, plus
``[caller, root of each called computation]``, sorted lexicographically (as the official
featurizer's sparse adjacency matrix is). ``node_splits``: 0, then the end of every computation
whose name contains ``cluster``/``while``/``cond``, then the node count if not yet present.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from features.hlo.node_features import (WINDOW_FIELDS, InstructionFacts, encode_dims, node_features)
from features.hlo.schema import ELEMENT_TYPE_SLOTS
from features.io import TILE_CONFIG_DIM, LAYOUT_CONFIG_DIM
from features.columns import UNKNOWN_OPCODE_ID, opcode_ids  # name -> id from features/data/hlo_opcodes.tsv

SPLIT_MARKERS = ("cluster", "while", "cond")
LAYOUT_MAX_DIMS, LAYOUT_MAX_TENSORS = 6, 3


# ---------------------------------------------------------------- node features (docs/competition.md §4)
# the encoding itself is features.hlo.node_features (shared with the sample generator)

def instruction_facts(inst: Any, is_root: bool) -> InstructionFacts:
    """What :func:`features.hlo.node_features.node_features` encodes, read from an HloInstructionProto."""
    wd = inst.window.dimensions
    cd = inst.convolution_dimension_numbers
    sd = inst.slice_dimensions
    pd = inst.padding_config.dimensions
    return InstructionFacts(
        is_root=is_root,
        element_slot=ELEMENT_TYPE_SLOTS.get(int(inst.shape.element_type)),
        dims=tuple(inst.shape.dimensions),
        tuple_size=len(inst.shape.tuple_shapes),
        parameter_number=int(inst.parameter_number),
        dimensions=tuple(inst.dimensions),
        window={name: [getattr(d, attr) for d in wd] for name, attr in zip(
            WINDOW_FIELDS, ("size", "stride", "padding_low", "padding_high", "window_dilation",
                            "base_dilation"))},
        reversal=[d.window_reversal for d in wd],
        conv=(cd.input_batch_dimension, cd.input_feature_dimension, tuple(cd.input_spatial_dimensions),
              cd.kernel_input_feature_dimension, cd.kernel_output_feature_dimension,
              tuple(cd.kernel_spatial_dimensions), cd.output_batch_dimension,
              cd.output_feature_dimension),
        feature_group_count=int(inst.feature_group_count),
        batch_group_count=int(inst.batch_group_count),
        slice_start=[s.start for s in sd], slice_stride=[s.stride for s in sd],
        slice_limit=[s.limit for s in sd],
        dynamic_slice_sizes=tuple(inst.dynamic_slice_sizes),
        pad_low=[x.edge_padding_low for x in pd], pad_high=[x.edge_padding_high for x in pd],
        is_stable=bool(inst.is_stable),
        minor_to_major=tuple(inst.shape.layout.minor_to_major),
    )


def instruction_features(inst: Any, is_root: bool) -> np.ndarray:
    """The 140 node features of one HloInstructionProto (docs/competition.md §4 order)."""
    return np.asarray(node_features(instruction_facts(inst, is_root)), dtype=np.float32)


# ---------------------------------------------------------------- graph structure

@dataclass
class ModuleIndex:
    """Flat node numbering of a module and the lookups needed to build edges."""

    instructions: list[Any]                       # flat order
    computation_of: list[Any]                     # parent computation per node
    node_of: dict[tuple[int, int], int]           # (computation id, instruction id) -> node
    global_node_of: dict[int, int]                # instruction id -> node (when ids are unique)
    root_node_of: dict[int, int]                  # computation id -> node of its root
    splits: list[int] = field(default_factory=list)

    def operand_node(self, comp_id: int, operand_id: int) -> int:
        node = self.node_of.get((comp_id, operand_id))
        if node is None:
            node = self.global_node_of.get(operand_id)
        if node is None:
            raise ValueError(f"operand id {operand_id} not found (computation {comp_id})")
        return node


def index_module(module: Any) -> ModuleIndex:
    insts, comps = [], []
    node_of: dict[tuple[int, int], int] = {}
    global_node_of: dict[int, int] = {}
    root_node_of: dict[int, int] = {}
    splits = [0]
    for comp in module.computations:
        for inst in comp.instructions:
            n = len(insts)
            insts.append(inst)
            comps.append(comp)
            node_of[(comp.id, inst.id)] = n
            global_node_of.setdefault(inst.id, n)
            if inst.id == comp.root_id:
                root_node_of[comp.id] = n
        if comp.id not in root_node_of:
            raise ValueError(f"computation {comp.name!r}: root id {comp.root_id} not among its "
                             "instructions")
        if any(marker in comp.name for marker in SPLIT_MARKERS):
            splits.append(len(insts))
    if splits[-1] < len(insts):
        splits.append(len(insts))
    return ModuleIndex(insts, comps, node_of, global_node_of, root_node_of, splits)


def module_edges(index: ModuleIndex) -> np.ndarray:
    """``(m, 2)`` int64 edges ``[user, operand]`` (unique operands + called roots), sorted."""
    edges: set[tuple[int, int]] = set()
    for u, (inst, comp) in enumerate(zip(index.instructions, index.computation_of)):
        for op_id in set(inst.operand_ids):
            edges.add((u, index.operand_node(comp.id, op_id)))
        for called in inst.called_computation_ids:
            edges.add((u, index.root_node_of[called]))
    if not edges:
        return np.zeros((0, 2), np.int64)
    return np.asarray(sorted(edges), dtype=np.int64)


def module_arrays(module: Any) -> dict[str, np.ndarray]:
    """``node_feat``, ``node_opcode``, ``edge_index``, ``node_splits`` of an HloModuleProto."""
    index = index_module(module)
    table = opcode_ids()
    unknown = unknown_opcodes(module)
    if unknown:
        warnings.warn(f"module {module.name!r}: opcode(s) {unknown} not in hlo_opcodes.tsv get id "
                      f"{UNKNOWN_OPCODE_ID}", stacklevel=2)
    feats = np.stack([instruction_features(inst, inst.id == comp.root_id)
                      for inst, comp in zip(index.instructions, index.computation_of)])
    opcodes = np.asarray([table.get(inst.opcode, UNKNOWN_OPCODE_ID)
                          for inst in index.instructions], dtype=np.int64)
    return {"node_feat": feats, "node_opcode": opcodes, "edge_index": module_edges(index),
            "node_splits": np.asarray(index.splits, dtype=np.int64)}


def unknown_opcodes(module: Any) -> list[str]:
    """Opcodes of ``module`` that are not in the opcode table (they get id 0)."""
    table = opcode_ids()
    return sorted({i.opcode for c in module.computations for i in c.instructions
                   if i.opcode not in table})


# ---------------------------------------------------------------- configs (docs/competition.md §5)

def tile_config_features(tile: Any) -> np.ndarray:
    """24 tile features: kernel/output/input bounds, each 6 + sum + product (0 when empty)."""
    f: list[float] = []
    for attr in ("kernel_bounds", "output_bounds", "input_bounds"):
        f += encode_dims(getattr(tile, attr), 6, True, zero_product_on_empty=True)
    assert len(f) == TILE_CONFIG_DIM
    return np.asarray(f, dtype=np.float32)


def layout_config_features(layout: Any) -> np.ndarray:
    """(nodes, 18) layout features: up to 3 tensors x 6 dims each, -1 where absent."""
    out = np.full((len(layout.nodes), LAYOUT_CONFIG_DIM), -1, dtype=np.float32)
    for i, node in enumerate(layout.nodes):
        if len(node.tensors) > LAYOUT_MAX_TENSORS:
            raise ValueError(f"layout config node {i} has {len(node.tensors)} tensors (max 3)")
        for t, tensor in enumerate(node.tensors):
            dims = list(tensor.dims)[:LAYOUT_MAX_DIMS]
            out[i, t * LAYOUT_MAX_DIMS: t * LAYOUT_MAX_DIMS + len(dims)] = dims
    return out


def usable_layout_runs(record: Any) -> list[Any]:
    """Runs with a module config, no error and a profile; none when no default run exists."""
    runs = [r for r in record.runs if r.HasField("module_config") and not r.error
            and r.HasField("profile")]
    return runs if any(r.is_default for r in runs) else []


def usable_tile_runs(record: Any) -> list[Any]:
    """Runs without error and with a measured time (> 1 ns)."""
    return [r for r in record.runs if not r.error and r.profile.compute_time_ns > 1]


def layout_record_arrays(record: Any) -> dict[str, np.ndarray]:
    """All npz arrays of a layout ``ModuleTuningData`` (usable runs only)."""
    arrays = module_arrays(record.module)
    n = arrays["node_feat"].shape[0]
    ids = np.asarray(record.config_index_to_node, dtype=np.int64)
    if len(ids) == 0:
        raise ValueError("layout record has no config_index_to_node")
    if ids.max() >= n:
        raise ValueError(f"config_index_to_node refers to node {ids.max()} of {n}")
    runs = usable_layout_runs(record)
    feats = np.full((len(runs), len(ids), LAYOUT_CONFIG_DIM), -1, dtype=np.float32)
    for c, run in enumerate(runs):
        cfg = layout_config_features(run.module_config.layout_config)
        if cfg.shape[0] != len(ids):
            raise ValueError(f"run {c}: {cfg.shape[0]} layout nodes, expected {len(ids)}")
        feats[c] = cfg
    arrays.update(node_config_ids=ids, node_config_feat=feats,
                  config_runtime=np.asarray([r.profile.compute_time_ns for r in runs], np.int64))
    return arrays


def tile_record_arrays(record: Any) -> dict[str, np.ndarray] | None:
    """All npz arrays of one tile kernel, or None when the record is skipped (as the official
    iterator does): a single run, no module, a run without tile config, or no default run."""
    if len(record.runs) <= 1 or not record.HasField("module"):
        return None
    if any(not r.op_config.HasField("tile_size_config") for r in record.runs):
        return None
    runs = usable_tile_runs(record)
    default = next((r for r in runs if r.is_default), None)
    if default is None:
        return None
    arrays = module_arrays(record.module)
    arrays.update(
        config_feat=np.stack([tile_config_features(r.op_config.tile_size_config) for r in runs])
        if runs else np.zeros((0, TILE_CONFIG_DIM), np.float32),
        config_runtime=np.asarray([r.profile.compute_time_ns for r in runs], np.int64),
        config_runtime_normalizers=np.full(len(runs), default.profile.compute_time_ns, np.int64))
    return arrays


def is_tile_record(record: Any) -> bool:
    return any(r.HasField("op_config") for r in record.runs)


def is_layout_record(record: Any) -> bool:
    return any(r.HasField("module_config") for r in record.runs)


def operand_shapes(index: ModuleIndex, node: int) -> list[tuple[int, ...]]:
    """Logical shapes of the operands of ``node`` (in operand order, duplicates kept)."""
    inst, comp = index.instructions[node], index.computation_of[node]
    return [tuple(int(d) for d in index.instructions[index.operand_node(comp.id, o)]
                  .shape.dimensions) for o in inst.operand_ids]
