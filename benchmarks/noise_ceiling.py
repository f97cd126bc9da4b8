"""How far a run's layout rankings are from what any ranker could reach: the noise ceiling.

The sample generator measures a layout config's runtime as its true (cost model) runtime times
``exp(N(0, LAYOUT_NOISE))``. Generating the same sample again (same ``--scale``, seed and physics)
with that noise set to zero gives every config's true runtime: the random draws are the same,
so the graphs and configs are too (checked, file by file). A ranker that knew the true runtimes
would score τ(true, measured) on a graph: its ceiling. This scores it on the rows the run's GNN
was scored on out of fold (``oof-config``, ``oof-target``: deduplicated, averaged, subsampled as
the run did), next to the GNN's own out-of-fold τ and its τ against the true runtimes::

    .venv/bin/python -m benchmarks.noise_ceiling --run tpu tpu data/sample-small WORK \\
        --run alt alt data/sample-alt WORK2 --scale small --sample-seed 0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

import features.sample.files as sample_files
import features.sample.kaggle as sample_kaggle
from benchmarks.render.artifacts import bench_metadata
from features.sample.writer import main as generate
from models.metrics import kendall_tau
from models.predictions import read_predictions
from tpurank.atomic import write_json
from tpurank.collections import get_collection

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ("layout:nlp:default", "layout:nlp:random", "layout:xla:default", "layout:xla:random")
COLUMNS = ["data", "collection", "runs", "graphs", "ceiling", "worst ceiling", "gnn oof", "gnn vs true",
           "headroom"]
NOTES = ("Mean ± sd over the runs (seeds) of a data set. ceiling: the mean over the labelled "
         "graphs of τ(true runtimes, measured runtimes), the best any ranker can expect; gnn oof: the "
         "GNN's out-of-fold τ against the measured runtimes (what the run reports); gnn vs true: its "
         "τ against the true ones; worst ceiling: the graph whose measurements are noisiest; "
         "headroom: ceiling − gnn oof. The rows are those the run scored out of fold. The true "
         "runtimes come from regenerating the sample with the measurement noise at zero (same scale, "
         "seed and physics; configs checked equal).")


def noiseless_sample(out: Path, scale: str, seed: int, physics: str) -> Path:
    """The sample of ``scale``, ``seed``, ``physics`` generated without layout measurement noise."""
    with mock.patch.object(sample_files, "LAYOUT_NOISE", 0.0), \
            mock.patch.object(sample_kaggle, "LAYOUT_NOISE", 0.0):
        generate(["--out", str(out), "--scale", scale, "--seed", str(seed), "--physics", physics])
    return out


def _source(root: Path, name: str, stem: str) -> Path:
    coll = get_collection(name)
    hits = sorted((root / "npz_all" / "npz" / coll.kind / coll.source / coll.search).glob(f"*/{stem}.npz"))
    if len(hits) != 1:
        raise FileNotFoundError(f"{root}: {len(hits)} files for {name} graph {stem} (expected one)")
    return hits[0]


def true_runtimes(data: Path, clean: Path, name: str, stem: str) -> np.ndarray:
    """The true runtimes of ``stem``'s configs, after checking that the noiseless file has the
    same configs as ``data``'s and that its runtimes differ from the measured ones by noise only."""
    measured, noiseless = (np.load(_source(root, name, stem)) for root in (data, clean))
    if not np.array_equal(measured["node_config_feat"], noiseless["node_config_feat"]):
        raise ValueError(f"{stem}: configs differ from {data}'s: wrong --scale, --sample-seed or physics")
    true = noiseless["config_runtime"].astype(np.float64)
    ratio = np.abs(np.log(np.maximum(measured["config_runtime"], 1) / np.maximum(true, 1)))
    if ratio.max() > 10 * sample_files.LAYOUT_NOISE + 1e-3:
        raise ValueError(f"{stem}: measured runtimes are not the true ones with noise: another sample")
    return true


def collection_row(label: str, data: Path, clean: Path, work: Path, name: str) -> dict:
    """The ceiling and the GNN's τ on one collection of one run (its one GNN seed)."""
    runs = sorted((work / "preds").glob(f"gnn@seed*/{get_collection(name).slug}"))
    if len(runs) != 1:
        raise FileNotFoundError(f"{work}: {len(runs)} GNN seeds for {name} (expected one)")
    oof, configs, target = (read_predictions(runs[0] / f"{part}.npz")
                            for part in ("oof", "oof-config", "oof-target"))
    ceiling, model, versus_true = [], [], []
    for stem, cost in oof.items():
        true = true_runtimes(data, clean, name, stem)[configs[stem].astype(np.int64)]
        ceiling.append(kendall_tau(true, target[stem]))
        model.append(kendall_tau(cost, target[stem]))
        versus_true.append(kendall_tau(cost, true))
    return {"data": label, "collection": name, "run": work.name, "graphs": len(oof),
            "ceiling": float(np.mean(ceiling)), "gnn oof": float(np.mean(model)),
            "gnn vs true": float(np.mean(versus_true)), "worst ceiling": float(np.min(ceiling))}


def summary(per_run: list[dict]) -> list[dict]:
    """Per data set and collection: the mean ± sd over its runs (seeds), and the headroom."""
    out = []
    for key in dict.fromkeys((r["data"], r["collection"]) for r in per_run):
        rows = [r for r in per_run if (r["data"], r["collection"]) == key]
        cell = {k: (np.mean([r[k] for r in rows]), np.std([r[k] for r in rows]))
                for k in ("ceiling", "gnn oof", "gnn vs true", "worst ceiling")}
        out.append({"data": key[0], "collection": key[1], "runs": len(rows), "graphs": rows[0]["graphs"],
                    **{k: f"{m:.3f}±{sd:.3f}" for k, (m, sd) in cell.items()},
                    "headroom": f"{cell['ceiling'][0] - cell['gnn oof'][0]:.3f}"})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs=4, action="append", required=True,
                    metavar=("LABEL", "PHYSICS", "DATA", "WORK"),
                    help="a finished run (WORK) on the generated sample DATA of PHYSICS (repeat)")
    ap.add_argument("--scale", default="small", help="the samples' --scale")
    ap.add_argument("--sample-seed", type=int, default=0, help="the samples' --seed")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "noise_ceiling.json"))
    args = ap.parse_args(argv)
    per_run, cleaned = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, physics, data, work in args.run:
            if (physics, data) not in cleaned:
                out = Path(tmp) / f"{physics}-{len(cleaned)}"
                cleaned[physics, data] = noiseless_sample(out, args.scale, args.sample_seed, physics)
            per_run += [collection_row(label, Path(data), cleaned[physics, data], Path(work), name)
                        for name in LAYOUT]
    given = argv if argv is not None else sys.argv[1:]
    command = ".venv/bin/python -m benchmarks.noise_ceiling " + " ".join(given)
    rows = summary(per_run)
    write_json(args.out, {**bench_metadata(command), "columns": COLUMNS, "rows": rows, "per_run": per_run,
                          "notes": NOTES})
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
