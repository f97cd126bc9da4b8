"""LightGBM ranker on per-config tabular features (``python -m models.lgbm train|predict``;
docs/lgbm.md)."""

import os

# OpenMP threads that spin while waiting are many times slower on a busy (shared or
# oversubscribed) machine: 100 lambdarank rounds took 14 s with 2 spinning threads vs 0.9 s
# passive on a 2-core VM at load 7. Must be set before LightGBM loads the OpenMP runtime; an
# explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from models.lgbm.config import LgbmConfig  # noqa: E402
from models.lgbm.model import RankerModel  # noqa: E402
from models.ranker import Ranker  # noqa: E402

class LgbmRanker(Ranker):
    name, title, config = "lgbm", "LightGBM", "models.lgbm.config:LgbmConfig"
    # the planner: trains first (early-stops before its limit in every run of BENCHMARKS.md, its
    # overrun at the limit not measured: 5 % kept back)
    capped, overrun, predict_cost = True, 0.05, (3.0, 10.0)
    report, score_key, marker = "metrics.json", "valid_score", "model.txt"

    def real_costs(self, dirs: list[Path], records: Any, device: str) -> tuple[list[dict], str]:
        path = records.tabular()
        models = [RankerModel.load(d) for d in dirs]
        costs = [m.predict_file(path, progress=False) for m in models]
        return costs, models[0].info.mode

RANKER = LgbmRanker()
__all__ = ["LgbmConfig", "RankerModel", "RANKER"]
