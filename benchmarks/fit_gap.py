"""How well the GNN's layout fold models fit the graphs they trained on, against the graphs they
never saw: is a collection short of steps (both low) or of graphs (a wide gap)?

For each fold model of a finished run (``WORK/models/gnn/<slug>/seed<k>/fold<j>``, every seed) this scores
every labelled graph of its collection with all its configs: the graphs its fold manifest says it
saw (**in-sample**: never a held-out figure) and the others (its held-out fold). Writes
``benchmarks/fit_gap.json``::

    .venv/bin/python -m benchmarks.fit_gap --work W1 --work W2 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from benchmarks.render.artifacts import bench_metadata
from features.processed import iter_processed
from models.gnn.infer import load_trained_dir, predict_costs
from models.metrics import kendall_tau
from tpurank.atomic import write_json
from tpurank.collections import get_collection

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ("layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random")


def fold_rows(work: Path, name: str, models: Path) -> list[dict]:
    """One row per fold model of ``name`` in ``models``: its mean τ on the graphs it saw and on the
    others."""
    coll, seed = get_collection(name), int(models.name.removeprefix("seed"))
    manifest = json.loads((models / "folds.json").read_text())
    graphs = [g for split in ("train", "valid") for g in iter_processed(work / "features", coll, split)]
    rows = []
    for k in range(int(manifest["folds"])):
        model, _ = load_trained_dir(models / f"fold{k}")
        seen = set(manifest["seen"][str(k)])
        taus: dict[bool, list[float]] = {True: [], False: []}
        for g in graphs:
            tau = kendall_tau(predict_costs(model, g), np.asarray(g.target))
            taus[f"{g.split}/{g.stem}" in seen].append(tau)
        rows.append({"work": work.name, "collection": name, "seed": seed, "fold": k,
                     "in-sample": float(np.mean(taus[True])), "held-out": float(np.mean(taus[False])),
                     "graphs seen": len(taus[True]), "graphs held out": len(taus[False])})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", action="append", required=True, help="a finished run's WORK (repeat)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "fit_gap.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for work in args.work:
        for name in LAYOUT:
            for models in sorted((Path(work) / "models" / "gnn" / get_collection(name).slug).glob("seed*")):
                rows += fold_rows(Path(work), name, models)
                print(json.dumps(rows[-1]), flush=True)
    write_json(args.out, {**bench_metadata(".venv/bin/python -m benchmarks.fit_gap "
                                           + " ".join(argv if argv is not None else sys.argv[1:])),
                          "rows": rows})


if __name__ == "__main__":
    main()
