"""LightGBM ranker throughput on synthetic tabular files (``python -m benchmarks.lgbm``, part of
``make bench``).

Prints, per mode: training rows/s (boosting rounds fixed, no early stopping) and prediction
configs/s on a 5-collection toy work dir of 40 train graphs x 500 configs x 40 features.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tpurank.collections import get_collection
from tpurank.config import with_preset
from features.processed import tabular_path
from models.lgbm.config import LgbmConfig
from models.lgbm.data import load_rows
from benchmarks.synthetic import write_toy_features
from models.lgbm.fit import fit_model

ROUNDS = 100


def quick() -> list[dict]:
    rows = []
    collection = get_collection("layout:xla:random")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_toy_features(work / "features", (collection,), n_graphs=(40, 8, 8), n_configs=500,
                           n_features=40)
        train = load_rows(tabular_path(work / "features", collection, "train"), 0)
        test = tabular_path(work / "features", collection, "test")
        print(f"toy: {len(train)} train rows, {train.X.shape[1]} features; {ROUNDS} rounds, 1 thread")
        for mode in ("lambdarank", "pairwise"):
            cfg = with_preset(LgbmConfig, "quick", work=str(work), threads=1,
                              num_boost_round=ROUNDS, early_stopping_rounds=ROUNDS)
            start = time.perf_counter()
            model = fit_model(mode, train, None, cfg, collection)
            fit_s = time.perf_counter() - start
            start = time.perf_counter()
            preds = model.predict_file(test, progress=False)
            pred_s = time.perf_counter() - start
            n = sum(len(v) for v in preds.values())
            rows += [{"figure": f"LightGBM {mode} fit, {len(train):,} rows x {train.X.shape[1]} features, "
                                f"{ROUNDS} rounds", "value": fit_s, "unit": "s"},
                     {"figure": f"LightGBM {mode} predict {n:,} configs", "value": pred_s, "unit": "s"}]
            print(f"{mode:12s} fit {fit_s:6.2f} s ({len(train) / fit_s * ROUNDS:,.0f} row-rounds/s)  "
                  f"predict {n} configs in {pred_s:5.2f} s ({n / pred_s:,.0f} configs/s)")

    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse

    argparse.ArgumentParser(prog="python -m benchmarks.lgbm", description=__doc__).parse_args(argv)
    quick()


if __name__ == "__main__":
    main()
