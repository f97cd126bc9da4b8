"""Raw HLO protos (docs/competition.md §8): read ``TuningData`` / ``ModuleTuningData`` / ``HloModuleProto`` files
with the protobuf runtime only, convert them to the npz arrays of the TpuGraphs release, and read
exact per-node facts (dot-general dimension numbers, operand shapes) the npz files lose. The API
and the CLI (``python -m features.hlo convert IN.pb OUT_DIR ...``): docs/hlo.md.
"""

from features.hlo.convert import (DEFAULT_CONFIGURABLE, configurable_nodes, convert_file,
                                  exact_dot_dims, layout_record_arrays, module_arrays,
                                  module_dot_dims, module_to_graph, tile_record_arrays)
from features.hlo.reader import HloProtoError, read_module, read_proto

__all__ = [
    "DEFAULT_CONFIGURABLE", "HloProtoError", "configurable_nodes", "convert_file", "exact_dot_dims",
    "layout_record_arrays", "module_arrays", "module_dot_dims", "module_to_graph", "read_module",
    "read_proto", "tile_record_arrays",
]
