"""Small HloModuleProtos built in code (no shared data needed)."""

from __future__ import annotations

from typing import Any

from features.hlo.schema import message_class

F32, S32, TUPLE = 11, 4, 13


def shape(dims, etype=F32, layout=None):
    s = message_class("ShapeProto")(element_type=etype, dimensions=list(dims))
    if layout is not None:
        s.layout.minor_to_major.extend(layout)
    return s


def add_inst(comp, iid, name, opcode, dims, operands=(), etype=F32, **kw):
    inst = comp.instructions.add(id=iid, name=name, opcode=opcode)
    inst.shape.CopyFrom(shape(dims, etype, layout=list(range(len(dims)))[::-1]))
    inst.operand_ids.extend(operands)
    for key, value in kw.items():
        field = getattr(inst, key)
        if isinstance(value, list):
            field.extend(value)
        else:
            setattr(inst, key, value)
    return inst


def matmul_module() -> Any:
    """``add`` reducer computation + entry: p0[4,8] . p1[8,16] -> reduce over dim 1 -> [4]."""
    mod = message_class("HloModuleProto")(name="matmul", entry_computation_id=2)
    red = mod.computations.add(name="region_add", id=1, root_id=12)
    add_inst(red, 10, "a", "parameter", [], parameter_number=0)
    add_inst(red, 11, "b", "parameter", [], parameter_number=1)
    add_inst(red, 12, "sum", "add", [], operands=[10, 11])
    entry = mod.computations.add(name="main", id=2, root_id=25)
    add_inst(entry, 20, "p0", "parameter", [4, 8], parameter_number=0)
    add_inst(entry, 21, "p1", "parameter", [8, 16], parameter_number=1)
    dot = add_inst(entry, 22, "dot", "dot", [4, 16], operands=[20, 21])
    dot.dot_dimension_numbers.lhs_contracting_dimensions.append(1)
    dot.dot_dimension_numbers.rhs_contracting_dimensions.append(0)
    add_inst(entry, 23, "zero", "constant", [])
    add_inst(entry, 24, "red", "reduce", [4], operands=[22, 23, 23], dimensions=[1],
             called_computation_ids=[1])
    add_inst(entry, 25, "out", "tuple", [], operands=[24], etype=TUPLE)
    return mod
