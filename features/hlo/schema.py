"""The subset of XLA's ``hlo.proto`` / ``xla_data.proto`` and tpu_graphs' ``tuning.proto`` that
tpurank reads (docs/competition.md §8), built as protobuf descriptors in code: no ``protoc``, no TensorFlow.

Each message is written as its fields in ``.proto`` syntax. Field numbers follow the public XLA
schema, so real files parse; every field not listed here is kept by the protobuf runtime as an
*unknown field* and ignored. Messages are proto3 (repeated integers accept both packed and
unpacked encodings).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from google.protobuf.message_factory import GetMessageClass

FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {"int64": FDP.TYPE_INT64, "uint64": FDP.TYPE_UINT64, "int32": FDP.TYPE_INT32,
           "bool": FDP.TYPE_BOOL, "string": FDP.TYPE_STRING}  # any other type names a message
FIELD = re.compile(r"(repeated )?([\w.]+) (\w+) = (\d+);")

XLA_MESSAGES: dict[str, str] = {
    "LayoutProto": "repeated int64 minor_to_major = 1;",
    "ShapeProto": "int32 element_type = 2; repeated int64 dimensions = 3; "  # element_type: PrimitiveType
                  "repeated .xla.ShapeProto tuple_shapes = 4; .xla.LayoutProto layout = 5;",
    "WindowDimension": "int64 size = 1; int64 stride = 2; int64 padding_low = 3; int64 padding_high = 4; "
                       "int64 window_dilation = 5; int64 base_dilation = 6; bool window_reversal = 7;",
    "Window": "repeated .xla.WindowDimension dimensions = 1;",
    "ConvolutionDimensionNumbers":
        "int64 kernel_input_feature_dimension = 3; int64 kernel_output_feature_dimension = 4; "
        "repeated int64 kernel_spatial_dimensions = 6; int64 input_batch_dimension = 7; "
        "int64 input_feature_dimension = 8; int64 output_batch_dimension = 9; "
        "int64 output_feature_dimension = 10; repeated int64 input_spatial_dimensions = 11;",
    "PaddingConfigDimension": "int64 edge_padding_low = 1; int64 edge_padding_high = 2;",
    "PaddingConfig": "repeated .xla.PaddingConfigDimension dimensions = 1;",
    "DotDimensionNumbers": "repeated int64 lhs_contracting_dimensions = 1; repeated int64 "
                           "rhs_contracting_dimensions = 2; repeated int64 lhs_batch_dimensions = 3; "
                           "repeated int64 rhs_batch_dimensions = 4;",
    "SliceDimensions": "int64 start = 1; int64 limit = 2; int64 stride = 3;",
    "HloInstructionProto":
        "string name = 1; string opcode = 2; .xla.ShapeProto shape = 3; int64 parameter_number = 9; "
        "repeated int64 dimensions = 14; .xla.Window window = 15; "
        ".xla.ConvolutionDimensionNumbers convolution_dimension_numbers = 16; "
        "repeated .xla.SliceDimensions slice_dimensions = 17; repeated int64 dynamic_slice_sizes = 20; "
        ".xla.PaddingConfig padding_config = 21; .xla.DotDimensionNumbers dot_dimension_numbers = 30; "
        "int64 id = 35; repeated int64 operand_ids = 36; repeated int64 called_computation_ids = 38; "
        "int64 feature_group_count = 50; int64 batch_group_count = 58; bool is_stable = 60;",
    "HloComputationProto": "string name = 1; repeated .xla.HloInstructionProto instructions = 2; "
                           "int64 id = 5; int64 root_id = 6;",
    "HloModuleProto": "string name = 1; repeated .xla.HloComputationProto computations = 3; int64 id = 5; "
                      "int64 entry_computation_id = 6;",
    "ExecutionProfile": "int64 compute_time_ns = 4;",
}

TPU_GRAPHS_MESSAGES: dict[str, str] = {
    "TileSizeConfig": "repeated int64 kernel_bounds = 1; repeated int64 output_bounds = 2; "
                      "repeated int64 input_bounds = 3;",
    "HloOpConfig": ".tpu_graphs.TileSizeConfig tile_size_config = 1;",
    "TensorLayoutConfig": "repeated int32 dims = 1;",
    "NodeLayoutConfig": "repeated .tpu_graphs.TensorLayoutConfig tensors = 1;",
    "LayoutConfig": "repeated .tpu_graphs.NodeLayoutConfig nodes = 1;",
    "HloModuleConfig": ".tpu_graphs.LayoutConfig layout_config = 1;",
    # ``oneof config`` of ConfigProfile is not needed to read it, so it is left out
    "ConfigProfile": ".tpu_graphs.HloOpConfig op_config = 1; .tpu_graphs.HloModuleConfig module_config = 2; "
                     "bool error = 3; .xla.ExecutionProfile profile = 4; bool is_default = 5;",
    "ModuleTuningData": ".xla.HloModuleProto module = 1; repeated .tpu_graphs.ConfigProfile runs = 3; "
                        "repeated uint64 config_index_to_node = 4;",
    "TuningData": "repeated .tpu_graphs.ModuleTuningData modules = 1;",
    # The same records without ``runs``: what reading only the graph needs. A layout record can
    # hold 100k runs; left unparsed they stay raw bytes (unknown fields) instead of 100k objects.
    "ModuleTuningDataHeader": ".xla.HloModuleProto module = 1; repeated uint64 config_index_to_node = 4;",
    "TuningDataHeader": "repeated .tpu_graphs.ModuleTuningDataHeader modules = 1;",
}


def _file_proto(name: str, package: str, messages: dict[str, str],
                deps: tuple[str, ...] = ()) -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    fp.dependency.extend(deps)
    for msg_name, spec in messages.items():
        msg = fp.message_type.add(name=msg_name)
        for repeated, type_name, fname, number in FIELD.findall(spec):
            f = msg.field.add(name=fname, number=int(number),
                              type=SCALARS.get(type_name, FDP.TYPE_MESSAGE),
                              label=FDP.LABEL_REPEATED if repeated else FDP.LABEL_OPTIONAL)
            if type_name not in SCALARS:
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


#: XLA PrimitiveType numbers (docs/competition.md §8) in the order of their one-hot slots among node
#: features 2..20 (docs/competition.md §4): INVALID, PRED, S8, S16, S32, S64, U8, U16, U32, U64, F16,
#: F32, F64, BF16, C64, C128, TUPLE, OPAQUE_TYPE, TOKEN
ELEMENT_TYPE_SLOTS: dict[int, int] = {t: slot for slot, t in enumerate(
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 15, 18, 13, 14, 17))}
