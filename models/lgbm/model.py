"""A trained LightGBM ranker: the booster (LightGBM text file) plus what is needed to score, and
its gain feature importance (CSV, JSON and a bar plot).

Saved as ``<dir>/model.txt`` (plain LightGBM text model, loadable by any LightGBM) and
``<dir>/model.json`` (mode, feature names, scoring settings).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import lightgbm as lgb
import numpy as np
from tqdm.auto import tqdm

from tpurank.atomic import atomic_path, write_json, write_text
from models.lgbm.data import (Keys, assemble_costs, by_config, feature_columns, graph_runs,
                              iter_slices, read_keys, read_rows, subset_keys)
from models.lgbm.pairwise import pairwise_scores

MODEL_FILE = "model.txt"
META_FILE = "model.json"
TOP_PLOTTED = 30  # features in the importance plot


@dataclass
class ModelInfo:
    mode: str  # lambdarank | pairwise
    feature_names: list[str]
    collection: str
    seed: int = 0
    pair_refs: int = 32
    best_iteration: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class RankerModel:
    booster: lgb.Booster
    info: ModelInfo

    @property
    def is_pairwise(self) -> bool:
        return self.info.mode == "pairwise"

    def save(self, out_dir: str | os.PathLike) -> None:
        out_dir = Path(out_dir)
        with atomic_path(out_dir / MODEL_FILE, suffix=".txt") as tmp:
            self.booster.save_model(str(tmp), num_iteration=self.info.best_iteration or None)
        write_json(out_dir / META_FILE, asdict(self.info))

    @classmethod
    def load(cls, model_dir: str | os.PathLike) -> "RankerModel":
        model_dir = Path(model_dir)
        model_file, meta_file = model_dir / MODEL_FILE, model_dir / META_FILE
        for p in (model_file, meta_file):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: no trained LightGBM model (run `python -m models.lgbm train`)")
        info = ModelInfo(**json.loads(meta_file.read_text()))
        return cls(booster=lgb.Booster(model_file=str(model_file)), info=info)

    def margin(self, X: np.ndarray) -> np.ndarray:
        return self.booster.predict(X, raw_score=True, num_threads=0)

    def score_graph(self, X: np.ndarray, X_refs: np.ndarray | None = None) -> np.ndarray:
        """Scores (higher = faster) of rows; a pairwise model scores one graph's rows against its
        reference rows ``X_refs``."""
        if self.is_pairwise:
            return pairwise_scores(self.margin, X, X_refs)
        return np.asarray(self.margin(X), np.float64)

    def predict_file(self, path: str | os.PathLike, batch_rows: int = 65536,
                     progress: bool = True, graphs: set[str] | None = None,
                     complete: bool = True) -> dict[str, np.ndarray]:
        """Costs (lower = faster) for every config of every graph (or of ``graphs``) of a file.

        Streams the file in row slices, so memory holds the key columns, one slice of features
        and one score per row (plus, for pairwise models, ``pair_refs`` rows per graph); slices
        holding none of ``graphs`` are not read. ``complete=False`` (train files, whose rows may
        be deduplicated) returns each graph's costs in ascending config order of the rows present
        instead of requiring every config 0..c-1.
        """
        path = Path(path)
        names = self.info.feature_names
        missing = sorted(set(names) - set(feature_columns(path)))
        if missing:
            raise ValueError(f"{path}: {len(missing)} feature column(s) the model was trained on are "
                             f"missing, e.g. {missing[:3]}; rebuild features with the same settings")
        keys, mask = subset_keys(read_keys(path), graphs)
        row_of = np.flatnonzero(mask)  # file row of each kept row
        refs = self._reference_rows(path, keys, row_of) if self.is_pairwise else {}
        score = np.zeros(len(keys), np.float64)
        bar = tqdm(total=len(keys), desc=f"lgbm predict {path.parent.parent.name}/{path.stem}",
                   unit="row", leave=False, disable=not progress)
        for offset, df in iter_slices(path, names, batch_rows,
                                      wanted=None if graphs is None else mask):
            X = np.ascontiguousarray(df.to_numpy().astype(np.float32, copy=False))
            if graphs is not None:  # keep the batch's rows of the wanted graphs
                X = X[mask[offset:offset + len(X)]]
                offset = int(np.searchsorted(row_of, offset))
            batch = score[offset:offset + len(X)]  # a view: filled in place
            if self.is_pairwise:
                uniq, inv = np.unique(keys.code[offset:offset + len(X)], return_inverse=True)
                for code, run in zip(uniq, graph_runs(inv.astype(np.int64))):
                    batch[run] = self.score_graph(X[run], refs[int(code)])
            else:
                batch[:] = self.score_graph(X)
            bar.update(len(X))
        bar.close()
        if not complete:
            return {g: cost for g, (_, cost) in by_config(keys, -score).items()}
        return assemble_costs(path, keys, -score)

    def _reference_rows(self, path: Path, keys: Keys, row_of: np.ndarray) -> dict[int, np.ndarray]:
        """``pair_refs`` seeded random rows of each graph (by graph code) for pairwise scoring.

        ``row_of`` maps the rows of ``keys`` to file rows (``keys`` may be a subset of graphs).
        Each graph's references are seeded by its name, so they do not depend on which other
        graphs are predicted with it.
        """
        chosen = []
        for name, run in zip(keys.graphs, graph_runs(keys.code)):
            rng = np.random.default_rng([self.info.seed + 7919, zlib.crc32(name.encode())])
            refs = rng.choice(len(run), size=min(len(run), self.info.pair_refs), replace=False)
            chosen.append(row_of[run[np.sort(refs)]])
        flat = np.concatenate(chosen) if chosen else np.zeros(0, np.int64)
        order = np.argsort(flat, kind="stable")
        X = np.empty((len(flat), len(self.info.feature_names)), np.float32)
        X[order] = read_rows(path, flat[order], self.info.feature_names)
        bounds = np.cumsum([0] + [len(c) for c in chosen])
        return {code: X[bounds[code]:bounds[code + 1]] for code in range(len(chosen))}



def gain_importance(model: RankerModel) -> list[dict]:
    """Total gain (and split count) per *original* feature, sorted descending, with its share of
    the total gain; a pairwise model's ``diff__f`` and ``mean__f`` are summed into ``f``. Names
    come from the model info (the booster may hold sanitised names)."""
    names = model.info.feature_names
    gains = model.booster.feature_importance(importance_type="gain")
    splits = model.booster.feature_importance(importance_type="split")
    if len(gains) != len(names) * (2 if model.is_pairwise else 1):
        raise ValueError(f"model has {len(gains)} features but its info lists {len(names)}")
    gains = gains.reshape(-1, len(names)).sum(axis=0)  # pair matrix = [diff, mean] of the columns
    splits = splits.reshape(-1, len(names)).sum(axis=0)
    grand = sum(gains.tolist()) or 1.0
    rows = [{"feature": f, "gain": float(g), "share": float(g) / grand, "splits": int(n)}
            for f, g, n in zip(names, gains, splits)]
    return sorted(rows, key=lambda r: (-r["gain"], r["feature"]))


def save_importance(model: RankerModel, out_dir: str | os.PathLike, title: str = "") -> list[dict]:
    """Write ``importance.csv``, ``importance.json`` and ``importance.png``; returns the rows."""
    out_dir = Path(out_dir)
    rows = gain_importance(model)
    lines = ["feature,gain,share,splits"] + [
        f"{r['feature']},{r['gain']:.6g},{r['share']:.6f},{r['splits']}" for r in rows]
    write_text(out_dir / "importance.csv", "\n".join(lines) + "\n")
    write_json(out_dir / "importance.json", rows)
    plot_importance(rows, out_dir / "importance.png", title)
    return rows


def plot_importance(rows: list[dict], path: str | os.PathLike, title: str = "",
                    top: int = TOP_PLOTTED) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = rows[:top][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.28 * max(len(shown), 4) + 1.2))
    ax.barh(np.arange(len(shown)), [100 * r["share"] for r in shown], color="#3b75af")
    ax.set_yticks(np.arange(len(shown)), [r["feature"] for r in shown], fontsize=8)
    ax.set_xlabel("share of total gain (%)")
    ax.set_title(f"LightGBM gain importance — {title}" if title else "LightGBM gain importance")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
