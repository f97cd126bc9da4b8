"""Read raw protos: ``TuningData`` (tile records), ``ModuleTuningData`` (layout records) and plain
``HloModuleProto`` files (e.g. from ``jax.jit(f).lower(...).compiler_ir('hlo')
.as_serialized_hlo_module_proto()``).

The three cannot be told apart on the wire (all start with a length-delimited field 1), so
:func:`read_proto` keeps the kind whose *content* makes sense. Unknown fields are tolerated;
truncated files and files of another type raise :class:`HloProtoError` naming the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from features.hlo.schema import message_class

class HloProtoError(ValueError):
    """A raw proto file that cannot be read as the expected message."""


@dataclass
class ProtoFile:
    """A parsed raw proto file; ``kind``: TuningData, ModuleTuningData or HloModuleProto."""

    path: Path
    kind: str
    message: Any

    def modules(self) -> list[Any]:
        """The ``ModuleTuningData`` records in the file (a plain module gets no runs)."""
        if self.kind == "TuningData":
            return list(self.message.modules)
        if self.kind == "ModuleTuningData":
            return [self.message]
        wrapper = message_class("ModuleTuningData")()
        wrapper.module.CopyFrom(self.message)
        return [wrapper]


def module_problem(module: Any) -> str | None:
    """Why ``module`` (an HloModuleProto) is not a usable HLO module, or None when it is."""
    if len(module.computations) == 0:
        return "no computations"
    ids: set[int] = set()
    for comp in module.computations:
        if comp.id in ids:
            return f"duplicate computation id {comp.id}"
        ids.add(comp.id)
        if len(comp.instructions) == 0:
            return f"computation {comp.name!r} has no instructions"
        for inst in comp.instructions:
            if not inst.opcode or not inst.opcode.replace("-", "").isalnum():
                return f"instruction {inst.name!r} in {comp.name!r} has no valid opcode"
    for comp in module.computations:
        for inst in comp.instructions:
            for called in inst.called_computation_ids:
                if called not in ids:
                    return f"instruction {inst.name!r} calls unknown computation id {called}"
    return None


def _problem(kind: str, msg: Any) -> str | None:
    if kind == "HloModuleProto":
        return module_problem(msg)
    if kind == "ModuleTuningData":
        return module_problem(msg.module) if msg.HasField("module") else "no module"
    if len(msg.modules) == 0:
        return "no modules"
    problems = ((i, module_problem(r.module)) for i, r in enumerate(msg.modules) if r.HasField("module"))
    return next((f"module {i}: {problem}" for i, problem in problems if problem), None)


def parse_bytes(data: bytes, kind: str, name: str = "<bytes>", with_runs: bool = True) -> Any:
    """Parse ``data`` as message ``kind`` and check its content; errors name ``name``.

    ``with_runs=False`` skips the tuning runs (kept as unparsed bytes): much faster for big records.
    """
    cls_name = kind if with_runs or kind == "HloModuleProto" else kind + "Header"
    try:
        msg = message_class(cls_name).FromString(data)
    except DecodeError as exc:
        raise HloProtoError(f"{name}: cannot parse as {kind} ({exc}); "
                            "the file is truncated, corrupt or of another type") from exc
    problem = _problem(kind, msg)
    if problem:
        raise HloProtoError(f"{name}: not a valid {kind}: {problem}")
    return msg


def read_proto(path: str | os.PathLike, with_runs: bool = True) -> ProtoFile:
    """Read a raw proto file, detecting TuningData / ModuleTuningData / HloModuleProto;
    ``with_runs=False`` leaves the tuning runs unparsed (enough to build the graph)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    data = path.read_bytes()
    if not data:
        raise HloProtoError(f"{path}: empty file")
    decode_failed, wrong_content = [], []
    for candidate in ("ModuleTuningData", "TuningData", "HloModuleProto"):
        try:
            return ProtoFile(path, candidate, parse_bytes(data, candidate, str(path), with_runs))
        except HloProtoError as exc:
            if isinstance(exc.__cause__, DecodeError):
                decode_failed.append(candidate)
            else:
                wrong_content.append(str(exc).split(": not a valid ", 1)[-1])
    if not wrong_content:
        raise HloProtoError(f"{path}: cannot parse ({len(data)} bytes): truncated or corrupt "
                            "protobuf, or not a protobuf at all (wire format invalid as "
                            + ", ".join(decode_failed) + ")")
    raise HloProtoError(f"{path}: wrong message type: not a TuningData, ModuleTuningData or "
                        "HloModuleProto (" + "; ".join(wrong_content) + ")")


def read_module(path: str | os.PathLike, name: str | None = None) -> Any:
    """The HloModuleProto in ``path`` (any of the three kinds).

    A TuningData holding several modules needs ``name`` (the module name, e.g. ``fusion.232``).
    """
    pf = read_proto(path, with_runs=False)
    records = pf.modules()
    if name is not None:
        for rec in records:
            if rec.module.name == name:
                return rec.module
        raise KeyError(f"{path}: no module named {name!r}; have {[r.module.name for r in records]}")
    if len(records) != 1:
        raise HloProtoError(f"{path}: holds {len(records)} modules; pass name= one of "
                            f"{[r.module.name for r in records][:10]}")
    return records[0].module
