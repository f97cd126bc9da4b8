"""A training-free heuristic ranking (model name ``baseline``), computed from the raw graphs: the
floor every learned model must beat, and a valid submission before any model exists. The cost is
:mod:`features.heuristic`'s (docs/ensemble.md, "Baseline").

CLI::

    python -m models.baseline predict --data ROOT --work WORK [--collections all] [--splits valid,test]

writes ``WORK/preds/baseline/<slug>/<split>.npz`` (:mod:`models.predictions`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from tpurank.cli import dispatch
from tpurank.collections import parse_collections
from tpurank.config import StageConfig, parse_config, save_run_config
from features.heuristic import graph_costs
from features.io import discover
from features.repair import REPAIRED_SPLIT, has_no_configurable_node
from models.predictions import predictions_path, write_predictions
from models.ranker import Ranker

MODEL_NAME = "baseline"


@dataclass
class BaselineConfig(StageConfig):
    """Heuristic (training-free) baseline ranking: python -m models.baseline predict."""

    splits: str = "valid,test"  # comma list of the splits to predict

    PRESETS = {"quick": {}, "full": {}}


def predict(cfg: BaselineConfig) -> list[Path]:
    """Write baseline predictions for every collection and split asked for."""
    preds_dir = Path(cfg.work) / "preds"
    written = []
    for coll in parse_collections(cfg.collections):
        for split in [s.strip() for s in cfg.splits.split(",") if s.strip()]:
            files = [gf for gf in discover(cfg.data, [coll], [split])  # configs that all tie: no ranking
                     if coll.is_tile or split != REPAIRED_SPLIT or not has_no_configurable_node(gf.path)]
            if not files:
                continue
            costs = {gf.stem: graph_costs(gf.path, coll.is_tile)
                     for gf in tqdm(files, desc=f"baseline {coll.name}/{split}", leave=False)}
            path = predictions_path(preds_dir, MODEL_NAME, coll, split)
            write_predictions(path, costs)
            written.append(path)
    save_run_config(cfg, preds_dir / MODEL_NAME)
    return written


class BaselineRanker(Ranker):
    """Training-free: the planner measures its predict stage before it plans."""

    name, title = MODEL_NAME, "heuristic"


RANKER = BaselineRanker()


def predict_main(argv: list[str]) -> int:
    cfg = parse_config(BaselineConfig, argv, prog="python -m models.baseline predict")
    written = predict(cfg)
    print(f"baseline: wrote {len(written)} prediction files under {Path(cfg.work) / 'preds' / MODEL_NAME}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return dispatch("models.baseline", {"predict": ("models.baseline:predict_main",
                                                    "write the heuristic's valid+test predictions")}, argv)


if __name__ == "__main__":
    sys.exit(main())
