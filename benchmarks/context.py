"""Cross-configuration attention context at inference: all configs vs fixed seeded subsets.

Every config of a graph attends to the same context (``models.gnn.infer.predict_costs``): all the
configs being ranked, or a fixed seeded subset of ``--predict-context`` of them (the default,
1024, keeps the attention linear in the config count on graphs with up to 100k configs). This
scores a trained GNN's predictions of every config of every labelled graph it never saw (a fold
model: its held-out graphs, from the fold manifest; else the official valid graphs) under each
setting, and the mean of the costs over :data:`AVERAGED` seeded subsets of 64 (averaging over
context subsets), and writes ``benchmarks/attention_context.json``::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.context \\
        --model-dir W/models/gnn/layout-xla-random/seed0/fold0 --features W/features
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

from models import metrics  # noqa: E402
from models.gnn.data import load_graphs  # noqa: E402
from models.gnn.infer import InferenceOptions, TensorCache, load_trained_dir, predict_costs  # noqa: E402
from models.gnn.model import RankerGNN  # noqa: E402
from features.processed import ProcessedGraph  # noqa: E402
from tpurank.atomic import write_json  # noqa: E402
from tpurank.collections import Collection, get_collection  # noqa: E402
from benchmarks.render.artifacts import bench_metadata  # noqa: E402

CONTEXTS = (0, 1024, 256, 64)  # 0 = all configs
AVERAGED = 4  # seeded 64-config contexts whose costs are averaged (the "64x4" row)


def unseen_graphs(model_dir: Path, features: Path, coll: Collection) -> list[ProcessedGraph]:
    """Labelled graphs the model never trained on: a fold model's held-out graphs (its
    collection's ``folds.json``), else the official valid graphs."""
    manifest = model_dir.parent / "folds.json"
    if not model_dir.name.startswith("fold") or not manifest.is_file():
        return load_graphs(features, coll, "valid")
    seen = set(json.loads(manifest.read_text())["seen"][model_dir.name[4:]])
    return [g for split in ("train", "valid") for g in load_graphs(features, coll, split)
            if f"{split}/{g.stem}" not in seen]


def averaged_costs(model: RankerGNN, g: ProcessedGraph, batch: int, cache: TensorCache,
                   options: InferenceOptions) -> np.ndarray:
    """The mean of the costs of :data:`AVERAGED` seeded contexts of 64 configs each."""
    return np.mean([predict_costs(model, g, batch, cache=cache, options=dataclasses.replace(
        options, context=64, seed=options.seed + k)) for k in range(AVERAGED)], axis=0)


def score_contexts(model_dir: Path, features: Path | None) -> list[dict]:
    model, saved = load_trained_dir(model_dir)
    fold = model_dir.name.startswith("fold")
    features = features or model_dir.parents[3 + fold] / "features"
    coll = get_collection(model_dir.parents[fold].name.replace("-", ":"))  # <slug>/seed<k>[/fold<k>]
    graphs = [g for g in unseen_graphs(model_dir, features, coll)
              if g.target is not None and g.num_configs >= 2]
    cache = TensorCache(torch.device("cpu"))
    truth = {g.stem: np.asarray(g.target, dtype=np.float64) for g in graphs}
    rows, full = [], {}
    for context in (*CONTEXTS, f"64x{AVERAGED}"):
        options = dataclasses.replace(model.inference_options, context=context)
        start = time.process_time()
        predict = averaged_costs if isinstance(context, str) else predict_costs
        preds = {g.stem: predict(model, g, saved.predict_batch, cache=cache, options=options)
                 for g in graphs}
        seconds = time.process_time() - start
        full = full or preds
        score = metrics.score_collection(coll, preds, truth)["score"]
        drift = max(float(np.max(np.abs(preds[s] - full[s]))) for s in preds)
        name = str(model_dir.relative_to(model_dir.parents[4 + fold]))  # WORK/models/gnn/...
        rows.append({"collection": coll.name, "model": name,
                     "graphs": len(graphs), "configs": int(sum(g.num_configs for g in graphs)),
                     "context": context or "all", "score": score, "cpu_seconds": seconds,
                     "max_cost_change_vs_all": drift,
                     "cost_sd_all": float(np.mean([np.std(v) for v in full.values()]))})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", action="append", required=True,
                    help="a trained model directory (repeat for several collections)")
    ap.add_argument("--features", default="", help="the features directory of its graphs (default: "
                    "the model's WORK/features)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "attention_context.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    features = Path(args.features) if args.features else None
    rows = [r for d in args.model_dir for r in score_contexts(Path(d), features)]
    write_json(args.out, {**bench_metadata("OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.context "
                                           + " ".join(argv if argv is not None else sys.argv[1:])),
                          "rows": rows})


if __name__ == "__main__":
    main()
