"""Turn raw proto files into the npz arrays of the TpuGraphs release (docs/competition.md §3–5, §8):
npz files in the Kaggle layout (``python -m features.hlo convert``) and graphs for new programs
(:func:`module_to_graph`); and the exact per-node facts the npz files lose (docs/competition.md §7):
dot-general dimension numbers and operand shapes, by flat node index (:func:`exact_dot_dims`).

Node order: all computations in proto order, instructions in proto order (operands first).
Edges ``[user, operand]`` over the unique operand ids of each instruction, plus
``[caller, root of each called computation]``, sorted lexicographically (as the official
featurizer's sparse adjacency matrix is). ``node_splits``: 0, then the end of every computation
whose name contains ``cluster``/``while``/``cond``, then the node count if not yet present.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tpurank.atomic import save_npz
from tpurank.collections import get_collection
from features.hlo.node_features import (WINDOW_FIELDS, InstructionFacts, encode_dims, node_features)
from features.dot_features import DotDims
from features.hlo.reader import read_module, read_proto
from features.hlo.schema import ELEMENT_TYPE_SLOTS
from features.io import TILE_CONFIG_DIM, LAYOUT_CONFIG_DIM, Graph, graph_from_arrays
from features.columns import UNKNOWN_OPCODE_ID, opcode_ids  # name -> id from features/data/hlo_opcodes.tsv

SPLIT_MARKERS = ("cluster", "while", "cond")
LAYOUT_MAX_DIMS, LAYOUT_MAX_TENSORS = 6, 3
# Opcodes an XLA layout autotuner configures in the Kaggle data (docs/competition.md §3).
DEFAULT_CONFIGURABLE = ("convolution", "dot", "reshape")
TILE_COLLECTION = "tile:xla"
LAYOUT_COLLECTION = "layout:xla:default"


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


def module_opcodes(module: Any) -> np.ndarray:
    """Opcode ids of the nodes of ``module`` (an opcode missing from the table gets the unknown id)."""
    table = opcode_ids()
    return np.asarray([table.get(i.opcode, UNKNOWN_OPCODE_ID) for c in module.computations
                       for i in c.instructions], dtype=np.int64)


def module_arrays(module: Any) -> dict[str, np.ndarray]:
    """``node_feat``, ``node_opcode``, ``edge_index``, ``node_splits`` of an HloModuleProto."""
    index = index_module(module)
    table = opcode_ids()
    unknown = sorted({i.opcode for i in index.instructions if i.opcode not in table})
    if unknown:
        warnings.warn(f"module {module.name!r}: opcode(s) {unknown} not in hlo_opcodes.tsv get id "
                      f"{UNKNOWN_OPCODE_ID}", stacklevel=2)
    feats = np.stack([np.asarray(node_features(instruction_facts(inst, inst.id == comp.root_id)),
                                 dtype=np.float32)
                      for inst, comp in zip(index.instructions, index.computation_of)])
    return {"node_feat": feats, "node_opcode": module_opcodes(module),
            "edge_index": module_edges(index), "node_splits": np.asarray(index.splits, dtype=np.int64)}


def operand_shapes(index: ModuleIndex, node: int) -> list[tuple[int, ...]]:
    """Logical shapes of the operands of ``node`` (in operand order, duplicates kept)."""
    inst, comp = index.instructions[node], index.computation_of[node]
    return [tuple(int(d) for d in index.instructions[index.operand_node(comp.id, o)]
                  .shape.dimensions) for o in inst.operand_ids]


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


def layout_record_arrays(record: Any) -> dict[str, np.ndarray]:
    """All npz arrays of a layout ``ModuleTuningData``: its runs with a module config, no error
    and a profile (none when no default run exists)."""
    arrays = module_arrays(record.module)
    n = arrays["node_feat"].shape[0]
    ids = np.asarray(record.config_index_to_node, dtype=np.int64)
    if len(ids) == 0:
        raise ValueError("layout record has no config_index_to_node")
    if ids.max() >= n:
        raise ValueError(f"config_index_to_node refers to node {ids.max()} of {n}")
    runs = [r for r in record.runs if r.HasField("module_config") and not r.error
            and r.HasField("profile")]
    runs = runs if any(r.is_default for r in runs) else []
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
    """All npz arrays of one tile kernel (its runs without error and with a measured time > 1 ns),
    or None when the record is skipped (as the official iterator does): a single run, no module,
    a run without tile config, or no default run."""
    if len(record.runs) <= 1 or not record.HasField("module"):
        return None
    if any(not r.op_config.HasField("tile_size_config") for r in record.runs):
        return None
    runs = [r for r in record.runs if not r.error and r.profile.compute_time_ns > 1]
    default = next((r for r in runs if r.is_default), None)
    if default is None:
        return None
    arrays = module_arrays(record.module)
    arrays.update(
        config_feat=np.stack([tile_config_features(r.op_config.tile_size_config) for r in runs]),
        config_runtime=np.asarray([r.profile.compute_time_ns for r in runs], np.int64),
        config_runtime_normalizers=np.full(len(runs), default.profile.compute_time_ns, np.int64))
    return arrays


# ---------------------------------------------------------------- new programs and files
def configurable_nodes(module: Any, opcodes: Sequence[str] = DEFAULT_CONFIGURABLE,
                       extra_nodes: Sequence[int] = ()) -> np.ndarray:
    """Flat indices of nodes whose opcode is in ``opcodes`` plus ``extra_nodes`` (sorted, unique)."""
    table = opcode_ids()
    ops = module_opcodes(module)
    wanted = [table[o] for o in opcodes if o in table]
    ids = set(np.flatnonzero(np.isin(ops, wanted)).tolist()) | {int(n) for n in extra_nodes}
    bad = [n for n in ids if not 0 <= n < len(ops)]
    if bad:
        raise ValueError(f"configurable node ids out of range 0..{len(ops) - 1}: {bad[:5]}")
    return np.asarray(sorted(ids), dtype=np.int64)


def module_to_arrays(module: Any, config_node_ids: Sequence[int] | None = None,
                     node_config_feat: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Layout npz arrays for a module without measurements (a new program to rank).

    ``config_node_ids`` defaults to the convolution/dot/reshape nodes; ``node_config_feat``
    defaults to one config, the compiler's default (all -1). Runtimes are 0 (as in test files).
    """
    arrays = module_arrays(module)
    ids = (configurable_nodes(module) if config_node_ids is None
           else np.asarray(config_node_ids, dtype=np.int64))
    if node_config_feat is None:
        node_config_feat = np.full((1, len(ids), LAYOUT_CONFIG_DIM), -1, np.float32)
    node_config_feat = np.asarray(node_config_feat, dtype=np.float32)
    if node_config_feat.shape[1:] != (len(ids), LAYOUT_CONFIG_DIM):
        raise ValueError(f"node_config_feat shape {node_config_feat.shape} does not match "
                         f"{len(ids)} configurable nodes")
    arrays.update(node_config_ids=ids, node_config_feat=node_config_feat,
                  config_runtime=np.zeros(len(node_config_feat), np.int64))
    return arrays


def module_to_graph(module: Any, config_node_ids: Sequence[int] | None = None,
                    node_config_feat: np.ndarray | None = None,
                    path: Path | None = None) -> Graph:
    """A :class:`features.io.Graph` (layout kind) for ``module``; see :func:`module_to_arrays`."""
    return graph_from_arrays(module_to_arrays(module, config_node_ids, node_config_feat), path)


@dataclass(frozen=True)
class Converted:
    """One npz written by :func:`convert_file`."""

    path: Path
    kind: str  # "tile" or "layout"
    module: str
    num_nodes: int
    num_configs: int


def convert_file(pb_path: str | os.PathLike, out_dir: str | os.PathLike, split: str = "train",
                 tile_collection: str = TILE_COLLECTION,
                 layout_collection: str = LAYOUT_COLLECTION) -> list[Converted]:
    """Write every usable record of ``pb_path`` as npz under ``out_dir/npz_all/npz/...`` (Kaggle layout).

    Stems: ``<file stem>`` for a layout record or a plain module, ``<file stem>__<kernel>`` for
    the records of a TuningData (as in ``real-tpu/reference``). A record without runs is just the
    program (one default config, runtime 0); tile kernels the official iterator skips are left out.
    """
    pf = read_proto(pb_path)
    name = Path(pb_path).name
    stem = name.split(".pb")[0] if name.endswith(".pb") else Path(pb_path).stem
    records = []  # every record converted before the first file is written
    for rec in pf.modules():
        rec_stem = f"{stem}__{rec.module.name}" if pf.kind == "TuningData" else stem
        if len(rec.runs) == 0:
            records.append(("layout", rec_stem, module_to_arrays(rec.module)))
        elif any(r.HasField("op_config") for r in rec.runs):
            records.append(("tile", rec_stem, tile_record_arrays(rec)))
        elif any(r.HasField("module_config") for r in rec.runs):
            records.append(("layout", rec_stem, layout_record_arrays(rec)))
        else:
            raise ValueError(f"{pb_path}: record {rec.module.name!r} has neither tile nor "
                             "layout runs")
    written = []
    for kind, rec_stem, arrays in records:
        if arrays is None:  # a skipped tile kernel
            continue
        coll = get_collection(tile_collection if kind == "tile" else layout_collection)
        if coll.is_tile != (kind == "tile"):
            raise ValueError(f"collection {coll.name} does not hold {kind} records")
        path = coll.split_dir(Path(out_dir), split) / f"{rec_stem}.npz"
        save_npz(path, **arrays)
        written.append(Converted(path, kind, rec_stem, int(arrays["node_feat"].shape[0]),
                                 int(arrays["config_runtime"].shape[0])))
    return written


# ---------------------------------------------------------------- exact dot dims
def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def module_dot_dims(module: Any, index: ModuleIndex | None = None) -> dict[int, DotDims]:
    """DotDims of every ``dot`` node of an HloModuleProto, by flat node index."""
    index = index or index_module(module)
    out: dict[int, DotDims] = {}
    for node, inst in enumerate(index.instructions):
        if inst.opcode != "dot":
            continue
        shapes = operand_shapes(index, node)
        if len(shapes) < 2:
            raise ValueError(f"dot {inst.name!r} has {len(shapes)} operands")
        dn = inst.dot_dimension_numbers
        out[node] = DotDims(lhs_contracting=_ints(dn.lhs_contracting_dimensions),
                            rhs_contracting=_ints(dn.rhs_contracting_dimensions),
                            lhs_batch=_ints(dn.lhs_batch_dimensions),
                            rhs_batch=_ints(dn.rhs_batch_dimensions),
                            lhs_shape=shapes[0], rhs_shape=shapes[1])
    return out


def exact_dot_dims(pb_path: str | os.PathLike, name: str | None = None) -> dict[int, DotDims]:
    """DotDims of every ``dot`` node of the module in ``pb_path`` (any raw proto kind)."""
    return module_dot_dims(read_module(pb_path, name=name))
