"""Exact per-node facts read from the raw protos, which the npz files lose (docs/competition.md §7):
dot-general contracting/batch dimensions and operand shapes. Keys are flat node indices in the
converted graph's order.
"""

from __future__ import annotations

import os
from typing import Any

from features.dot_features import DotDims
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
