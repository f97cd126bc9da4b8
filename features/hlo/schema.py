"""The subset of XLA's ``hlo.proto`` / ``xla_data.proto`` and tpu_graphs' ``tuning.proto`` that
tpurank reads (docs/competition.md §8), built as protobuf descriptors in code: no ``protoc``, no TensorFlow.

Field numbers follow the public XLA schema, so real files parse; every field not listed here is
kept by the protobuf runtime as an *unknown field* and ignored. Messages are proto3 (repeated
integers accept both packed and unpacked encodings).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from google.protobuf.message_factory import GetMessageClass

FDP = descriptor_pb2.FieldDescriptorProto
T_INT64, T_UINT64, T_INT32, T_BOOL = FDP.TYPE_INT64, FDP.TYPE_UINT64, FDP.TYPE_INT32, FDP.TYPE_BOOL
T_STRING, T_MSG = FDP.TYPE_STRING, FDP.TYPE_MESSAGE
REP, OPT = FDP.LABEL_REPEATED, FDP.LABEL_OPTIONAL

# (name, number, type, label, message type name or None)
Field = tuple[str, int, int, int, "str | None"]

XLA_MESSAGES: dict[str, list[Field]] = {
    "LayoutProto": [("minor_to_major", 1, T_INT64, REP, None)],
    "ShapeProto": [("element_type", 2, T_INT32, OPT, None),  # PrimitiveType enum, read as int
                   ("dimensions", 3, T_INT64, REP, None),
                   ("tuple_shapes", 4, T_MSG, REP, ".xla.ShapeProto"),
                   ("layout", 5, T_MSG, OPT, ".xla.LayoutProto")],
    "WindowDimension": [("size", 1, T_INT64, OPT, None), ("stride", 2, T_INT64, OPT, None),
                        ("padding_low", 3, T_INT64, OPT, None),
                        ("padding_high", 4, T_INT64, OPT, None),
                        ("window_dilation", 5, T_INT64, OPT, None),
                        ("base_dilation", 6, T_INT64, OPT, None),
                        ("window_reversal", 7, T_BOOL, OPT, None)],
    "Window": [("dimensions", 1, T_MSG, REP, ".xla.WindowDimension")],
    "ConvolutionDimensionNumbers": [
        ("kernel_input_feature_dimension", 3, T_INT64, OPT, None),
        ("kernel_output_feature_dimension", 4, T_INT64, OPT, None),
        ("kernel_spatial_dimensions", 6, T_INT64, REP, None),
        ("input_batch_dimension", 7, T_INT64, OPT, None),
        ("input_feature_dimension", 8, T_INT64, OPT, None),
        ("output_batch_dimension", 9, T_INT64, OPT, None),
        ("output_feature_dimension", 10, T_INT64, OPT, None),
        ("input_spatial_dimensions", 11, T_INT64, REP, None)],
    "PaddingConfigDimension": [("edge_padding_low", 1, T_INT64, OPT, None),
                               ("edge_padding_high", 2, T_INT64, OPT, None)],
    "PaddingConfig": [("dimensions", 1, T_MSG, REP, ".xla.PaddingConfigDimension")],
    "DotDimensionNumbers": [("lhs_contracting_dimensions", 1, T_INT64, REP, None),
                            ("rhs_contracting_dimensions", 2, T_INT64, REP, None),
                            ("lhs_batch_dimensions", 3, T_INT64, REP, None),
                            ("rhs_batch_dimensions", 4, T_INT64, REP, None)],
    "SliceDimensions": [("start", 1, T_INT64, OPT, None), ("limit", 2, T_INT64, OPT, None),
                        ("stride", 3, T_INT64, OPT, None)],
    "HloInstructionProto": [
        ("name", 1, T_STRING, OPT, None),
        ("opcode", 2, T_STRING, OPT, None),
        ("shape", 3, T_MSG, OPT, ".xla.ShapeProto"),
        ("parameter_number", 9, T_INT64, OPT, None),
        ("dimensions", 14, T_INT64, REP, None),
        ("window", 15, T_MSG, OPT, ".xla.Window"),
        ("convolution_dimension_numbers", 16, T_MSG, OPT, ".xla.ConvolutionDimensionNumbers"),
        ("slice_dimensions", 17, T_MSG, REP, ".xla.SliceDimensions"),
        ("dynamic_slice_sizes", 20, T_INT64, REP, None),
        ("padding_config", 21, T_MSG, OPT, ".xla.PaddingConfig"),
        ("dot_dimension_numbers", 30, T_MSG, OPT, ".xla.DotDimensionNumbers"),
        ("id", 35, T_INT64, OPT, None),
        ("operand_ids", 36, T_INT64, REP, None),
        ("called_computation_ids", 38, T_INT64, REP, None),
        ("feature_group_count", 50, T_INT64, OPT, None),
        ("batch_group_count", 58, T_INT64, OPT, None),
        ("is_stable", 60, T_BOOL, OPT, None)],
    "HloComputationProto": [("name", 1, T_STRING, OPT, None),
                            ("instructions", 2, T_MSG, REP, ".xla.HloInstructionProto"),
                            ("id", 5, T_INT64, OPT, None),
                            ("root_id", 6, T_INT64, OPT, None)],
    "HloModuleProto": [("name", 1, T_STRING, OPT, None),
                       ("computations", 3, T_MSG, REP, ".xla.HloComputationProto"),
                       ("id", 5, T_INT64, OPT, None),
                       ("entry_computation_id", 6, T_INT64, OPT, None)],
    "ExecutionProfile": [("compute_time_ns", 4, T_INT64, OPT, None)],
}

TPU_GRAPHS_MESSAGES: dict[str, list[Field]] = {
    "TileSizeConfig": [("kernel_bounds", 1, T_INT64, REP, None),
                       ("output_bounds", 2, T_INT64, REP, None),
                       ("input_bounds", 3, T_INT64, REP, None)],
    "HloOpConfig": [("tile_size_config", 1, T_MSG, OPT, ".tpu_graphs.TileSizeConfig")],
    "TensorLayoutConfig": [("dims", 1, T_INT32, REP, None)],
    "NodeLayoutConfig": [("tensors", 1, T_MSG, REP, ".tpu_graphs.TensorLayoutConfig")],
    "LayoutConfig": [("nodes", 1, T_MSG, REP, ".tpu_graphs.NodeLayoutConfig")],
    "HloModuleConfig": [("layout_config", 1, T_MSG, OPT, ".tpu_graphs.LayoutConfig")],
    "ConfigProfile": [("op_config", 1, T_MSG, OPT, ".tpu_graphs.HloOpConfig"),
                      ("module_config", 2, T_MSG, OPT, ".tpu_graphs.HloModuleConfig"),
                      ("error", 3, T_BOOL, OPT, None),
                      ("profile", 4, T_MSG, OPT, ".xla.ExecutionProfile"),
                      ("is_default", 5, T_BOOL, OPT, None)],
    "ModuleTuningData": [("module", 1, T_MSG, OPT, ".xla.HloModuleProto"),
                         ("runs", 3, T_MSG, REP, ".tpu_graphs.ConfigProfile"),
                         ("config_index_to_node", 4, T_UINT64, REP, None)],
    "TuningData": [("modules", 1, T_MSG, REP, ".tpu_graphs.ModuleTuningData")],
    # The same records without ``runs``: what reading only the graph needs. A layout record can
    # hold 100k runs; left unparsed they stay raw bytes (unknown fields) instead of 100k objects.
    "ModuleTuningDataHeader": [("module", 1, T_MSG, OPT, ".xla.HloModuleProto"),
                               ("config_index_to_node", 4, T_UINT64, REP, None)],
    "TuningDataHeader": [("modules", 1, T_MSG, REP, ".tpu_graphs.ModuleTuningDataHeader")],
}

# ``oneof config`` of ConfigProfile is not needed to read it, so it is left out.


def _file_proto(name: str, package: str, messages: dict[str, list[Field]],
                deps: tuple[str, ...] = ()) -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    fp.dependency.extend(deps)
    for msg_name, fields in messages.items():
        msg = fp.message_type.add(name=msg_name)
        for fname, number, ftype, label, type_name in fields:
            f = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
    return fp


@lru_cache(maxsize=1)
def _classes() -> dict[str, Any]:
    # A private pool: never clashes with another library that registers the real xla protos.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_proto("tpurank/xla_subset.proto", "xla", XLA_MESSAGES))
    pool.Add(_file_proto("tpurank/tuning_subset.proto", "tpu_graphs", TPU_GRAPHS_MESSAGES,
                         deps=("tpurank/xla_subset.proto",)))
    out: dict[str, Any] = {}
    for package, messages in (("xla", XLA_MESSAGES), ("tpu_graphs", TPU_GRAPHS_MESSAGES)):
        for msg_name in messages:
            out[msg_name] = GetMessageClass(pool.FindMessageTypeByName(f"{package}.{msg_name}"))
    return out


def message_class(name: str) -> Any:
    """The generated message class for ``name`` (e.g. ``"HloModuleProto"``, ``"TuningData"``)."""
    try:
        return _classes()[name]
    except KeyError:
        raise KeyError(f"no message {name!r} in the tpurank HLO schema subset") from None


# XLA PrimitiveType numbers (docs/competition.md §8) and their one-hot slot among node features 2..20 (docs/competition.md §4).
ELEMENT_TYPE_SLOTS: dict[int, int] = {
    0: 0,    # PRIMITIVE_TYPE_INVALID
    1: 1,    # PRED
    2: 2, 3: 3, 4: 4, 5: 5,      # S8 S16 S32 S64
    6: 6, 7: 7, 8: 8, 9: 9,      # U8 U16 U32 U64
    10: 10, 11: 11, 12: 12,      # F16 F32 F64
    16: 13,  # BF16
    15: 14,  # C64
    18: 15,  # C128
    13: 16,  # TUPLE
    14: 17,  # OPAQUE_TYPE
    17: 18,  # TOKEN
}
