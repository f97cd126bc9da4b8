"""Cross-configuration attention context at inference: all configs vs fixed seeded subsets.

Every config of a graph attends to the same context (``models.gnn.infer.predict_costs``): all the
configs being ranked, or a fixed seeded subset of ``--predict-context`` of them (the default,
1024, keeps the attention linear in the config count on graphs with up to 100k configs). This
scores a trained GNN's predictions of every config of every official valid graph under each
setting and writes ``benchmarks/attention_context.json``::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.context \\
        --model-dir W/models/gnn/layout-xla-random/seed0 --features W/features
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

from models import metrics  # noqa: E402
from models.gnn.data import load_graphs  # noqa: E402
from models.gnn.infer import TensorCache, load_trained_dir, predict_costs  # noqa: E402
from tpurank.atomic import write_json  # noqa: E402
from tpurank.collections import get_collection  # noqa: E402
from benchmarks.render.artifacts import bench_metadata  # noqa: E402

CONTEXTS = (0, 1024, 256, 64)  # 0 = all configs


def score_contexts(model_dir: Path, features: Path) -> list[dict]:
    model, saved = load_trained_dir(model_dir)
    coll = get_collection(saved.collection or saved.collections)
    graphs = [g for g in load_graphs(features, coll, "valid")
              if g.target is not None and g.num_configs >= 2]
    cache = TensorCache(torch.device("cpu"))
    truth = {g.stem: np.asarray(g.target, dtype=np.float64) for g in graphs}
    rows, full = [], {}
    for context in CONTEXTS:
        options = dataclasses.replace(model.inference_options, context=context)
        start = time.process_time()
        preds = {g.stem: predict_costs(model, g, saved.predict_batch, cache=cache, options=options)
                 for g in graphs}
        seconds = time.process_time() - start
        full = full or preds
        score = metrics.score_collection(coll, preds, truth)["score"]
        drift = max(float(np.max(np.abs(preds[s] - full[s]))) for s in preds)
        rows.append({"collection": coll.name, "model": str(model_dir.relative_to(model_dir.parents[3])),
                     "graphs": len(graphs), "configs": int(sum(g.num_configs for g in graphs)),
                     "context": context or "all", "score": score, "cpu_seconds": seconds,
                     "max_cost_change_vs_all": drift})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", action="append", required=True,
                    help="a trained model directory (repeat for several collections)")
    ap.add_argument("--features", required=True, help="the features directory of its valid graphs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "attention_context.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = [r for d in args.model_dir for r in score_contexts(Path(d), Path(args.features))]
    write_json(args.out, {**bench_metadata("OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.context "
                                           + " ".join(argv if argv is not None else sys.argv[1:])),
                          "rows": rows})


if __name__ == "__main__":
    main()
