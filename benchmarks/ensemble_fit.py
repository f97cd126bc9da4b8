"""Ensemble at real-data scale: weight fitting on 100k-config graphs, checker on a full test set.

Figures: seconds for ``fit_weights`` (2 and 3 models) on 20 valid graphs x 100,000 configs (the
size of layout:nlp:default valid) and on 676 tile graphs x 500 configs, and seconds to write and
strictly check an 894-row submission (844 tile + 50 layout rows of 1,000 configs).
``python -m benchmarks.ensemble_fit`` (part of ``make bench``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ensemble.weights import fit_weights
from ensemble.submission import check_file, submission_rows, write_submission
from tpurank.collections import COLLECTIONS, get_collection
from models.predictions import normalise_costs


def _views(rng, n_graphs, n_configs, n_models):
    truth = {f"g{i}": rng.lognormal(size=n_configs) for i in range(n_graphs)}
    models = [{s: normalise_costs(t + rng.normal(scale=1 + k, size=n_configs)) for s, t in truth.items()}
              for k in range(n_models)]
    return truth, models


def bench_fit() -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for coll_name, n_graphs, n_configs in (("layout:nlp:default", 20, 100_000), ("tile:xla", 676, 500)):
        for n_models in (2, 3):
            truth, models = _views(rng, n_graphs, n_configs, n_models)
            start = time.perf_counter()
            fit = fit_weights(get_collection(coll_name), models, truth)
            rows.append({"figure": f"fit_weights {coll_name}: {n_graphs} graphs x {n_configs:,} configs, "
                                   f"{n_models} models", "value": time.perf_counter() - start, "unit": "s"})
            print(f"fit_weights {coll_name}: {n_graphs} graphs x {n_configs} configs, {n_models} models: "
                  f"{time.perf_counter() - start:.1f} s (weights {np.round(fit.weights, 2).tolist()}, "
                  f"shrink {fit.alpha:g})", flush=True)
    return rows


def bench_check() -> list[dict]:
    rng = np.random.default_rng(1)
    counts = {c.name: (844 if c.is_tile else 8 if c.source == "xla" else 17) for c in COLLECTIONS}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = {}
        for coll in COLLECTIONS:
            d = coll.split_dir(root, "test")
            d.mkdir(parents=True)
            costs = {}
            for i in range(counts[coll.name]):
                n = int(rng.integers(20, 1000)) if coll.is_tile else 1000
                np.savez(d / f"g{i}.npz", config_runtime=np.zeros(n, np.int64))
                costs[f"g{i}"] = rng.normal(size=n)
            rows.update(submission_rows(coll, costs))
        start = time.perf_counter()
        path = write_submission(root / "submission.csv", rows)
        written = time.perf_counter() - start
        start = time.perf_counter()
        problems = check_file(path, root)
        checked = time.perf_counter() - start
        print(f"submission: {len(rows)} rows written in {written:.2f} s, strictly checked in "
              f"{checked:.2f} s ({'OK' if not problems else problems[0]})")
    return [{"figure": f"write a {len(rows)}-row submission", "value": written, "unit": "s"},
            {"figure": f"strictly check a {len(rows)}-row submission", "value": checked, "unit": "s"}]


def quick() -> list[dict]:
    return bench_check() + bench_fit()


def main(argv: list[str] | None = None) -> None:
    import argparse

    argparse.ArgumentParser(prog="python -m benchmarks.ensemble_fit", description=__doc__).parse_args(argv)
    quick()


if __name__ == "__main__":
    main()
