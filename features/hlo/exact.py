"""Exact per-node facts read from the raw protos, which the npz files lose (docs/competition.md §7):
dot-general contracting/batch dimensions, operand shapes of dot and convolution nodes,
gather/scatter dimension numbers. Keys are flat node indices in the converted graph's order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from features.dotdims import DotDims
from features.hlo.convert import ModuleIndex, index_module, operand_shapes
from features.hlo.reader import read_module


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


@dataclass(frozen=True)
class GatherDims:
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    slice_sizes: tuple[int, ...]


@dataclass(frozen=True)
class ScatterDims:
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int


@dataclass(frozen=True)
class NodeDetails:
    """What the proto says about one node beyond the 140 npz features."""

    opcode: str
    name: str
    shape: tuple[int, ...]
    operand_shapes: tuple[tuple[int, ...], ...]
    dot: DotDims | None = None
    gather: GatherDims | None = None
    scatter: ScatterDims | None = None


DETAIL_OPCODES = ("dot", "convolution", "gather", "scatter")


def module_details(module: Any, opcodes: tuple[str, ...] = DETAIL_OPCODES
                   ) -> dict[int, NodeDetails]:
    """Operand shapes (and dot/gather/scatter dimension numbers) of nodes with these opcodes."""
    index = index_module(module)
    dots = module_dot_dims(module, index) if "dot" in opcodes else {}
    out: dict[int, NodeDetails] = {}
    for node, inst in enumerate(index.instructions):
        if inst.opcode not in opcodes:
            continue
        gather = scatter = None
        if inst.opcode == "gather":
            g = inst.gather_dimension_numbers
            gather = GatherDims(_ints(g.offset_dims), _ints(g.collapsed_slice_dims),
                                _ints(g.start_index_map), int(g.index_vector_dim),
                                _ints(inst.gather_slice_sizes))
        elif inst.opcode == "scatter":
            s = inst.scatter_dimension_numbers
            scatter = ScatterDims(_ints(s.update_window_dims), _ints(s.inserted_window_dims),
                                  _ints(s.scatter_dims_to_operand_dims), int(s.index_vector_dim))
        out[node] = NodeDetails(opcode=inst.opcode, name=inst.name,
                                shape=_ints(inst.shape.dimensions),
                                operand_shapes=tuple(operand_shapes(index, node)),
                                dot=dots.get(node), gather=gather, scatter=scatter)
    return out


def exact_details(pb_path: str | os.PathLike, name: str | None = None,
                  opcodes: tuple[str, ...] = DETAIL_OPCODES) -> dict[int, NodeDetails]:
    """:func:`module_details` of the module in ``pb_path``."""
    return module_details(read_module(pb_path, name=name), opcodes)
