"""Reading raw protos: kind detection, unknown fields, clear errors for bad files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from features.hlo import HloProtoError, read_module, read_proto
from features.hlo.schema import message_class

_spec = importlib.util.spec_from_file_location("hlo_builders", Path(__file__).with_name("hlo_builders.py"))
builders = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builders)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_detects_each_kind(tmp_path):
    mod = builders.matmul_module()
    rec = message_class("ModuleTuningData")(module=mod, config_index_to_node=[4])
    rec.runs.add(is_default=True).profile.compute_time_ns = 5
    td = message_class("TuningData")()
    td.modules.add().CopyFrom(rec)
    for kind, msg in (("HloModuleProto", mod), ("ModuleTuningData", rec), ("TuningData", td)):
        pf = read_proto(_write(tmp_path / f"{kind}.pb", msg.SerializeToString()))
        assert pf.kind == kind
        assert [r.module.name for r in pf.modules()] == ["matmul"]
        assert read_module(pf.path).name == "matmul"


def test_unknown_fields_are_tolerated(tmp_path):
    data = builders.matmul_module().SerializeToString()
    # field 999 (varint) and field 1000 (length-delimited) — neither is in our schema subset
    extra = bytes([0xB8, 0x3E, 0x07]) + bytes([0xC2, 0x3E, 0x03]) + b"abc"
    mod = read_module(_write(tmp_path / "m.pb", data + extra))
    assert len(mod.computations) == 2


def test_truncated_file_gives_clear_error(tmp_path, shared_data):
    data = (shared_data / "real-tpu" / "op_tuning_data.pb").read_bytes()
    bad = _write(tmp_path / "truncated.pb", data[: len(data) // 2])
    with pytest.raises(HloProtoError, match=r"truncated\.pb.*(truncated|wrong message type)"):
        read_proto(bad)


def test_truncated_small_module(tmp_path):
    data = builders.matmul_module().SerializeToString()
    with pytest.raises(HloProtoError, match="cut.pb"):
        read_proto(_write(tmp_path / "cut.pb", data[:-7]))


def test_wrong_message_type(tmp_path):
    other = descriptor_pb2.FileDescriptorProto(name="x.proto", package="a.b").SerializeToString()
    with pytest.raises(HloProtoError, match=r"other\.pb: .*(wrong message type|cannot parse)"):
        read_proto(_write(tmp_path / "other.pb", other))
    with pytest.raises(HloProtoError, match="empty"):
        read_proto(_write(tmp_path / "empty.pb", b""))
    with pytest.raises(FileNotFoundError, match="missing.pb"):
        read_proto(tmp_path / "missing.pb")


def test_several_modules_need_a_name(shared_data):
    path = shared_data / "real-tpu" / "op_tuning_data.pb"
    with pytest.raises(HloProtoError, match="15 modules"):
        read_module(path)
    assert read_module(path, name="copy.24").name == "copy.24"
    with pytest.raises(KeyError, match="nope"):
        read_module(path, name="nope")
