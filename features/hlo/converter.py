"""Convert raw proto files into npz files in the Kaggle layout (``python -m features.hlo convert``)
and graphs for new programs (:func:`module_to_graph`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tpurank.atomic import save_npz
from tpurank.collections import Collection, get_collection
from features.hlo.convert import (LAYOUT_CONFIG_DIM, is_layout_record, is_tile_record,
                                  layout_record_arrays, module_arrays, opcode_ids,
                                  tile_record_arrays)
from features.hlo.reader import read_proto
from features.io import Graph, graph_from_arrays

# Opcodes an XLA layout autotuner configures in the Kaggle data (docs/competition.md §3).
DEFAULT_CONFIGURABLE = ("convolution", "dot", "reshape")
TILE_COLLECTION = "tile:xla"
LAYOUT_COLLECTION = "layout:xla:default"


def configurable_nodes(module: Any, opcodes: Sequence[str] = DEFAULT_CONFIGURABLE,
                       extra_nodes: Sequence[int] = ()) -> np.ndarray:
    """Flat indices of nodes whose opcode is in ``opcodes`` plus ``extra_nodes`` (sorted, unique)."""
    table = opcode_ids()
    wanted = {table[o] for o in opcodes if o in table}
    ops = module_arrays_opcodes(module)
    ids = set(np.flatnonzero(np.isin(ops, list(wanted))).tolist()) | {int(n) for n in extra_nodes}
    bad = [n for n in ids if not 0 <= n < len(ops)]
    if bad:
        raise ValueError(f"configurable node ids out of range 0..{len(ops) - 1}: {bad[:5]}")
    return np.asarray(sorted(ids), dtype=np.int64)


def module_arrays_opcodes(module: Any) -> np.ndarray:
    table = opcode_ids()
    return np.asarray([table.get(i.opcode, 0) for c in module.computations
                       for i in c.instructions], dtype=np.int64)


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


def _out_path(out_dir: Path, coll: Collection, split: str, stem: str) -> Path:
    return coll.split_dir(out_dir, split) / f"{stem}.npz"


def convert_records(pb_path: str | os.PathLike) -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """``(kind, stem, arrays)`` of every usable record in ``pb_path``.

    Stems: ``<file stem>`` for a layout record or a plain module, ``<file stem>__<kernel>`` for
    tile records in a TuningData (as in ``real-tpu/reference``). Tile kernels the official
    iterator skips (one run, no default run, runs without tile config) are left out.
    """
    pf = read_proto(pb_path)
    stem = Path(pb_path).name.split(".pb")[0] if Path(pb_path).name.endswith(".pb") \
        else Path(pb_path).stem
    if pf.kind == "HloModuleProto":
        return [("layout", stem, module_to_arrays(pf.message))]
    out = []
    for rec in pf.modules():
        if len(rec.runs) == 0:  # a record without measurements: just the program
            out.append(("layout", stem if pf.kind == "ModuleTuningData"
                        else f"{stem}__{rec.module.name}", module_to_arrays(rec.module)))
        elif is_tile_record(rec):
            arrays = tile_record_arrays(rec)
            if arrays is not None:
                name = stem if pf.kind == "ModuleTuningData" else f"{stem}__{rec.module.name}"
                out.append(("tile", name, arrays))
        elif is_layout_record(rec):
            out.append(("layout", stem if pf.kind == "ModuleTuningData"
                        else f"{stem}__{rec.module.name}", layout_record_arrays(rec)))
        else:
            raise ValueError(f"{pb_path}: record {rec.module.name!r} has neither tile nor "
                             "layout runs")
    return out


def convert_file(pb_path: str | os.PathLike, out_dir: str | os.PathLike, split: str = "train",
                 tile_collection: str = TILE_COLLECTION,
                 layout_collection: str = LAYOUT_COLLECTION) -> list[Converted]:
    """Write every record of ``pb_path`` as npz under ``out_dir/npz_all/npz/...`` (Kaggle layout).

    A plain HloModuleProto (no runs) becomes a layout file with one default config, runtime 0.
    """
    out_dir = Path(out_dir)
    written = []
    for kind, stem, arrays in convert_records(pb_path):
        coll = get_collection(tile_collection if kind == "tile" else layout_collection)
        if coll.is_tile != (kind == "tile"):
            raise ValueError(f"collection {coll.name} does not hold {kind} records")
        path = _out_path(out_dir, coll, split, stem)
        save_npz(path, **arrays)
        written.append(Converted(path, kind, stem, int(arrays["node_feat"].shape[0]),
                                 int(arrays["config_runtime"].shape[0])))
    return written
