"""A tiny trained pipeline for plumbing tests of ``rank --hlo`` and ``ensemble real``.

It trains on the real layout record itself (train = valid = that record), a few steps: the point
is that every stage connects (convert -> features build -> GNN train -> load -> score), never
the scores it produces. Built once per test session (cached in this module).
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

COLLECTION = "layout:xla:random"
_CACHE: dict[str, Path] = {}


def load_helper() -> object:
    """This module, imported once under a fixed name (tests import it by path)."""
    name = "tpurank_tests_real_pipeline"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def trained_work(shared_data: Path) -> Path:
    """``WORK`` with features and a GNN for :data:`COLLECTION` trained for 3 steps."""
    if "work" in _CACHE and _CACHE["work"].is_dir():
        return _CACHE["work"]
    import torch

    from features.build import main as build_main
    from features.hlo import convert_file
    from models.gnn.__main__ import main as gnn_main

    torch.set_num_threads(1)
    base = Path(tempfile.mkdtemp(prefix="tpurank-real-pipeline-"))
    atexit.register(shutil.rmtree, base, True)
    data, work = base / "data", base / "work"
    pb = shared_data / "real-tpu" / "module_tuning_data_layout.pb"
    for split in ("train", "valid"):
        convert_file(pb, data, split=split, layout_collection=COLLECTION)
    common = ["--data", str(data), "--work", str(work), "--collections", COLLECTION]
    assert build_main([*common, "--jobs", "1", "--progress", "false"]) == 0
    assert gnn_main(["train", *common, "--steps", "3", "--eval-every", "3", "--hidden", "16",
                     "--layers", "2", "--device", "cpu", "--threads", "1",
                     "--configs-per-step", "16"]) == 0
    _CACHE["work"] = work
    return work


def cleanup() -> None:
    work = _CACHE.pop("work", None)
    if work is not None:
        shutil.rmtree(work.parent, ignore_errors=True)
