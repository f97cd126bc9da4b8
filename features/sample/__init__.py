"""Generated TpuGraphs-like sample data in the exact Kaggle layout:
``python -m features.sample --out DIR --scale tiny|small``.

What the graphs, configs and cost model are: docs/data.md, "Sample data".
"""

from features.sample.constants import OPCODE_IDS, SCALES, ScaleSpec
from features.sample.hlo import FlatGraph, HloBuilder, featurize
from features.sample.layout_cost import PERM_ID, LayoutCostModel, padded_bytes_table
from features.sample.motifs import build_layout_graph, build_tile_kernel
from features.sample.tile_cost import tile_runtime
from features.sample.writer import generate_dataset, main

__all__ = ["OPCODE_IDS", "SCALES", "ScaleSpec", "FlatGraph", "HloBuilder", "featurize", "PERM_ID",
           "LayoutCostModel", "padded_bytes_table", "build_layout_graph", "build_tile_kernel",
           "tile_runtime", "generate_dataset", "main"]
