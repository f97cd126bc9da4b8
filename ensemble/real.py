"""``python -m ensemble real --work W``: score the trained models of ``W`` (and its blend) on the
only real TPU measurements we hold (``data/real-tpu/``: 15 tile kernels, one layout record), next
to random rankings and the training-free heuristic; the records are featurized with the trained
build's settings and normalisation stats. What it scores and how: docs/ensemble.md, "Real TPU
records". 7 of the 15 kernels have <= 5 usable configs (any ranking scores 1.0 on them), so the
mean over the 8 kernels with more is reported too.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection, get_collection
from models.metrics import TILE_TOP_K, kendall_tau, tile_score

#: the repository's data/ (data/README.md): real-tpu/ holds the records
REAL_DATA = Path(__file__).resolve().parent.parent / "data"
TILE_FILE = "op_tuning_data.pb"
LAYOUT_FILE = "module_tuning_data_layout.pb"
TILE = "tile:xla"
LAYOUT_COLLECTIONS = ("layout:xla:default", "layout:xla:random")
SPLIT = "valid"


@dataclass
class RealGraph:
    """One real record: its npz path and the runtimes to rank (tile: runtime/normalizer)."""

    stem: str
    path: Path
    target: np.ndarray
    is_tile: bool


@dataclass
class Scores:
    """Scores of one method: ``per_graph`` and summaries, or ``missing`` with the reason."""

    method: str
    collection: str
    per_graph: dict[str, float] = field(default_factory=dict)
    spread: float | None = None  # std over random draws / seeds
    note: str = ""
    missing: str = ""
    costs: dict[int, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)  # seed -> graph -> cost

    def summary(self, graphs: Sequence[RealGraph]) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "collection": self.collection,
                               "note": self.note}
        if self.missing:
            return dict(out, missing=self.missing)
        vals = [self.per_graph[g.stem] for g in graphs]
        out.update(score=float(np.mean(vals)), n=len(vals), per_graph=self.per_graph)
        if graphs and graphs[0].is_tile:
            hard = [self.per_graph[g.stem] for g in graphs if len(g.target) > TILE_TOP_K]
            out.update(score_gt5=float(np.mean(hard)) if hard else None, n_gt5=len(hard))
        if self.spread is not None:
            out["spread"] = self.spread
        return out


# ---------------------------------------------------------------- data

def prepare(records: Path, out_root: Path) -> tuple[list[RealGraph], list[RealGraph]]:
    """Convert the real records of ``records/real-tpu`` into ``out_root`` (Kaggle layout) and
    read their targets: (tile graphs, layout graphs)."""
    from features.hlo import convert_file
    from features.io import load_npz

    for name in (TILE_FILE, LAYOUT_FILE):
        if not (records / "real-tpu" / name).is_file():
            raise FileNotFoundError(f"{records / 'real-tpu' / name}: real TPU record not found "
                                    "(pass --records DIR)")
    tile, layout = [], []
    for c in convert_file(records / "real-tpu" / TILE_FILE, out_root, split=SPLIT,
                          tile_collection=TILE):
        g = load_npz(c.path)
        tile.append(RealGraph(c.module, c.path, g.target(), True))
    for coll in LAYOUT_COLLECTIONS:  # one copy per collection, so each collection's models see it
        for c in convert_file(records / "real-tpu" / LAYOUT_FILE, out_root, split=SPLIT,
                              layout_collection=coll):
            if coll == LAYOUT_COLLECTIONS[0]:
                layout.append(RealGraph(c.module, c.path, load_npz(c.path).target(), False))
    return tile, layout


def graph_score(g: RealGraph, cost: np.ndarray) -> float:
    return tile_score(cost, g.target) if g.is_tile else kendall_tau(cost, g.target)


# ---------------------------------------------------------------- reference methods

def random_scores(graphs: Sequence[RealGraph], collection: str, draws: int, seed: int) -> Scores:
    """Expected score of a uniformly random ranking (mean over ``draws`` seeded permutations)."""
    rng = np.random.default_rng(seed)
    per_draw = np.array([[graph_score(g, rng.permutation(len(g.target)).astype(np.float64))
                          for g in graphs] for _ in range(draws)])
    per_graph = {g.stem: float(per_draw[:, i].mean()) for i, g in enumerate(graphs)}
    return Scores("random", collection, per_graph, spread=float(per_draw.mean(axis=1).std()),
                  note=f"mean of {draws} random rankings (spread = std of the collection mean)")


def heuristic_scores(graphs: Sequence[RealGraph], collection: str) -> Scores:
    from features.heuristic import graph_costs

    per_graph = {g.stem: graph_score(g, graph_costs(g.path, g.is_tile)) for g in graphs}
    return Scores("heuristic", collection, per_graph, note="models.baseline (training-free)")


# ---------------------------------------------------------------- trained models

def trained_models(base: Path, marker: str) -> dict[int, list[Path]]:
    """``{seed: model directories}`` of the models trained under ``base`` (one collection of one
    model): ``seed<k>/fold<j>/`` for a cross-validated run (``--folds K``, the presets' default),
    else ``seed<k>/`` itself; a directory counts when it holds ``marker`` (the saved model)."""
    found: dict[int, list[Path]] = {}
    for seed_dir in sorted(base.glob("seed*")):
        if not seed_dir.name[4:].isdigit():
            continue
        folds = sorted((p for p in seed_dir.glob("fold*") if p.name[4:].isdigit() and (p / marker).is_file()),
                       key=lambda p: int(p.name[4:]))
        dirs = folds or ([seed_dir] if (seed_dir / marker).is_file() else [])
        if dirs:
            found[int(seed_dir.name[4:])] = dirs
    return found


@dataclass
class Records:
    """The real records of one collection as a ranker reads them (:meth:`Ranker.real_costs`):
    processed graphs (the ``valid`` split: every config, in source order) and tabular rows, made
    once per feature folder with its build settings and normalisation stats."""

    graphs: Sequence[RealGraph]
    coll: Collection
    work: Path
    made: dict = field(default_factory=dict)  # feature folder -> (stem -> processed graph, tabular frame)

    def _made(self, features: Path | None) -> tuple[dict[str, Any], Any]:
        import polars as pl

        from features import tabular as tab
        from features.buildconfig import BuildConfig
        from features.io import load_npz
        from features.processed import load_norm
        from features.stages import process_graph
        from tpurank.config import load_run_config

        fdir = Path(features or self.work / "features")
        if fdir in self.made:
            return self.made[fdir]
        build_json = fdir / self.coll.slug / "build.json"
        if not build_json.is_file():
            raise FileNotFoundError(f"{build_json}: no feature build for {self.coll.name}")
        build_cfg, norm = load_run_config(BuildConfig, build_json), load_norm(fdir, self.coll)
        processed, frames = {}, []
        for g in self.graphs:
            parts: list[tuple[np.ndarray, np.ndarray]] = []
            pg = processed[g.stem] = process_graph(load_npz(g.path), self.coll, SPLIT, g.stem, norm, build_cfg,
                                                   None, tabular_sink=lambda idx, feats: parts.append((idx, feats)))
            idx, feats = (np.concatenate(p) for p in zip(*parts))
            frames.append(tab.make_frame(g.stem, idx, pg.target, feats, pg.meta["tabular_feature_names"]))
        self.made[fdir] = processed, pl.concat(frames, how="vertical")
        return self.made[fdir]

    def processed(self, features: Path | None = None) -> dict[str, Any]:
        """stem -> processed graph, featurized as ``features`` (default ``WORK/features``) says."""
        return self._made(features)[0]

    def tabular(self) -> Path:
        """The records' tabular rows (``WORK/features``' build) as a parquet file."""
        from features import tabular as tab

        path = self.work / "real" / "features" / self.coll.slug / f"{SPLIT}.parquet"
        tab.write_parquet(self._made(None)[1], path)
        return path


def model_scores(model: str, work: Path, graphs: Sequence[RealGraph], coll: Collection, label: str,
                 device: str) -> Scores:
    """Scores of registered model ``model``'s trained models of ``coll`` (its ranker's
    :meth:`~models.ranker.Ranker.real_costs` per seed, its folds averaged), or the gap, said."""
    from models.predictions import average_folds
    from tpurank.registry import get_model

    ranker = get_model(model).ranker
    base = work / "models" / model / coll.slug
    trained = trained_models(base, ranker.marker)
    if not trained:
        return Scores(model, label, missing=f"no trained {ranker.title} under {base}")
    records = Records(graphs, coll, work)
    per_seed: dict[int, dict[str, np.ndarray]] = {}
    notes = []
    for seed, dirs in trained.items():
        costs, note = ranker.real_costs(dirs, records, device)
        # the fold models averaged as for the test split (per-graph z-scores)
        per_seed[seed] = costs[0] if len(costs) == 1 else average_folds(costs)
        flat = sum(int(np.ptp(per_seed[seed][g.stem]) == 0) for g in graphs)
        units = f"{len(dirs)} fold models averaged" if len(dirs) > 1 else "one model"
        notes.append(f"seed {seed}: " + ", ".join(
            [*([note] if note else []), units, *([f"constant on {flat} graph(s)"] if flat else [])]))
    # each seed's fold ensemble scored; per graph the mean over seeds
    scored = {seed: {g.stem: graph_score(g, costs[g.stem]) for g in graphs}
              for seed, costs in per_seed.items()}
    per_graph = {g.stem: float(np.mean([s[g.stem] for s in scored.values()])) for g in graphs}
    means = [float(np.mean(list(s.values()))) for s in scored.values()]
    spread = float(np.std(means)) if len(means) > 1 else None
    each = f" (per seed {', '.join(f'{m:.4f}' for m in means)})" if len(means) > 1 else ""
    return Scores(model, label, per_graph, spread=spread,
                  note=f"{coll.name} models, seeds {sorted(per_seed)}: " + "; ".join(notes) + each,
                  costs=per_seed)


#: what a scorer may raise for a missing or incompatible model (reported as a gap, not a crash)
SCORER_ERRORS = (FileNotFoundError, ImportError, ValueError, KeyError, RuntimeError)


def _guarded(fn: Callable[[], list[Scores]], method: str, label: str) -> list[Scores]:
    """Run a scorer; a missing/incompatible model becomes a reported gap, not a crash."""
    try:
        return fn()
    except SCORER_ERRORS as exc:
        first = " ".join(str(exc).split())[:300]  # one line: e.g. a checkpoint/code mismatch
        return [Scores(method, label, missing=f"{type(exc).__name__}: {first}")]


# ---------------------------------------------------------------- the blend

def blend_scores(work: Path, graphs: Sequence[RealGraph], coll: Collection, label: str,
                 models: Mapping[str, Scores]) -> list[Scores]:
    """What the run's blend stage would submit for the real records: its models' costs on them
    (each model's seeds normalised and averaged as the blend reads test predictions,
    :func:`models.predictions.average_runs`) combined with the weights and, on tile, the top-5
    portfolio it fitted out of fold (``WORK/blend/summary.json``; nothing refitted). On tile with
    a portfolio also the weighted ``average`` alone, to show what the hedge changes."""
    from ensemble.hedge import blend_or_portfolio
    from ensemble.weights import BLEND_MODEL
    from models.predictions import average_runs

    path = work / "blend" / "summary.json"
    if not path.is_file():
        return [Scores(BLEND_MODEL, label,
                       missing=f"no blend summary {path} (run python -m ensemble blend first)")]
    summary = json.loads(path.read_text())
    fitted = summary.get("collections", {}).get(coll.name)
    if not fitted or "weights" not in fitted:
        return [Scores(BLEND_MODEL, label, missing=f"{path}: no blend weights for {coll.name}")]
    names = list(summary["models"])
    lacking = [m for m in names if m not in models or not models[m].costs]
    if lacking:
        return [Scores(BLEND_MODEL, label, missing=f"no real-record costs of blended model(s) {lacking}")]
    stems = [g.stem for g in graphs]
    normed = [average_runs(list(models[m].costs.values()), summary["norm"]) for m in names]
    weights = [float(fitted["weights"][m]) for m in names]
    slots = fitted.get("portfolio", {}).get("slots") if coll.is_tile else None
    described = ", ".join(f"{m} {w:.2f}" for m, w in zip(names, weights))
    ways = [(BLEND_MODEL, slots, f"the run's blend: weights {described}"
             + (f"; tile top 5: slots {slots} of {[*names, 'average']}" if slots else ""))]
    if slots:
        ways.append(("average", None, f"the weighted average alone: weights {described}"))
    out = []
    for method, counts, note in ways:
        costs = blend_or_portfolio(normed, weights, stems, counts)
        out.append(Scores(method, label, {g.stem: graph_score(g, costs[g.stem]) for g in graphs}, note=note))
    return out


# ---------------------------------------------------------------- report

def trained_model_names(models: Sequence[str] | None = None) -> list[str]:
    """The registry's models with a train stage (of ``models`` when given; ``<model>@seed0`` -> <model>)."""
    from tpurank.registry import MODELS, base_name

    wanted = None if models is None else {base_name(m) for m in models}
    return [m.name for m in MODELS if m.trains and (wanted is None or m.name in wanted)]


def evaluate(work: str | Path, records: str | Path = REAL_DATA, models: Sequence[str] | None = None,
             draws: int = 1000, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    """Score every method on the real records — random, the heuristic, and each trained model of
    the registry (of ``models`` when given); writes ``W/reports/real/real_eval.json``."""
    from ensemble.weights import BLEND_MODEL

    work, records = Path(work), Path(records)
    names = trained_model_names(models)
    tile, layout = prepare(records, work / "real" / "data")
    results: list[tuple[Scores, list[RealGraph]]] = []
    for graphs, label, colls in ((tile, TILE, (TILE,)), (layout, "layout:real", LAYOUT_COLLECTIONS)):
        results.append((random_scores(graphs, label, draws, seed), graphs))
        results += [(s, graphs) for s in _guarded(lambda: [heuristic_scores(graphs, label)], "heuristic", label)]
        for name in colls:
            coll = get_collection(name)
            tag = label if len(colls) == 1 else f"{label} <- {name}"
            scored = {m: _guarded(lambda: [model_scores(m, work, graphs, coll, tag, device)], m, tag)[0]
                      for m in names}
            results += [(s, graphs) for s in scored.values()]
            results += [(s, graphs) for s in _guarded(
                lambda: blend_scores(work, graphs, coll, tag, scored), BLEND_MODEL, tag)]
    from tpurank.config import run_metadata

    report = {"work": str(work), "records": str(records), "metadata": run_metadata(),
              "tile_kernels": {g.stem: len(g.target) for g in tile},
              "layout_configs": {g.stem: len(g.target) for g in layout},
              "results": [s.summary(g) for s, g in results]}
    write_json(work / "reports" / "real" / "real_eval.json", report)
    return report


def format_report(report: dict[str, Any]) -> str:
    n_kernels = len(report["tile_kernels"])
    n_gt5 = sum(v > TILE_TOP_K for v in report["tile_kernels"].values())
    lines = [f"Real TPU records: {n_kernels} tile kernels ({n_gt5} with > {TILE_TOP_K} configs), "
             f"layout configs {list(report['layout_configs'].values())}",
             f"{'collection':34s} {'method':10s} {'score':>8s} {'>5 cfg':>8s} {'spread':>7s}  note"]
    for r in report["results"]:
        if "missing" in r:
            lines.append(f"{r['collection']:34s} {r['method']:10s} {'—':>8s} {'':>8s} {'':>7s}  "
                         f"not available: {r['missing']}")
            continue
        gt5 = f"{r['score_gt5']:.4f}" if r.get("score_gt5") is not None else ""
        spread = f"{r['spread']:.4f}" if r.get("spread") is not None else ""
        lines.append(f"{r['collection']:34s} {r['method']:10s} {r['score']:8.4f} {gt5:>8s} "
                     f"{spread:>7s}  {r['note']}")
    lines.append("tile: mean top-5 score (2 - best of top-5 / best; 1 = best config in top 5); "
                 "layout: Kendall tau over all usable configs")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from tpurank.config import StageConfig, default_work

    stage = StageConfig()
    p = argparse.ArgumentParser(prog="python -m ensemble real", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="", help="the trained run's WORK (default: work/<data-name>-<preset>, "
                                              f"as every stage: {stage.work})")
    p.add_argument("--data", default=stage.data, help="the run's data root (only names the default --work)")
    p.add_argument("--preset", default=stage.preset, help="the run's preset (only names the default --work)")
    p.add_argument("--records", metavar="DIR", default=str(REAL_DATA),
                   help="folder holding real-tpu/ (default: the repository's data/)")
    p.add_argument("--models", default="", help="comma list of trained models to score (default: every "
                                                 "model of tpurank.registry with a train stage)")
    p.add_argument("--draws", type=int, default=1000, help="random rankings averaged")
    p.add_argument("--seed", type=int, default=0, help="seed of the random rankings")
    p.add_argument("--device", default="cpu", help="torch device of the models that use one")
    p.add_argument("--skip-missing", action="store_true",
                   help="exit 0 with a note when the real records are not there (an install "
                        "without the repository's data/, e.g. Kaggle)")
    args = p.parse_args(argv)
    work = args.work or default_work(args.data, args.preset)
    models = [m.strip() for m in args.models.split(",") if m.strip()] or None
    try:
        report = evaluate(work, args.records, models, args.draws, args.seed, args.device)
    except FileNotFoundError as exc:
        if args.skip_missing and not (Path(args.records) / "real-tpu").is_dir():
            print(f"ensemble real: skipped, no real TPU records ({exc})")
            return 0
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_report(report))
    print(f"-> {Path(work) / 'reports' / 'real' / 'real_eval.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
