"""A trained LightGBM ranker: the booster (LightGBM text file) plus what is needed to score.

Saved as ``<dir>/model.txt`` (plain LightGBM text model, loadable by any LightGBM) and
``<dir>/model.json`` (mode, feature names, scoring settings).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import lightgbm as lgb
import numpy as np
import polars as pl
from tqdm.auto import tqdm

from features.atomic import atomic_path, write_json
from models.lgbm.data import (ROW, assemble_costs, feature_columns, graph_runs, iter_batches,
                              read_keys)
from models.lgbm.pairwise import choose_refs, pairwise_scores

MODEL_FILE = "model.txt"
META_FILE = "model.json"


@dataclass
class ModelInfo:
    mode: str  # lambdarank | rank_xendcg | pairwise
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

    def save(self, out_dir: str | os.PathLike) -> Path:
        out_dir = Path(out_dir)
        with atomic_path(out_dir / MODEL_FILE, suffix=".txt") as tmp:
            self.booster.save_model(str(tmp), num_iteration=self.info.best_iteration or None)
        write_json(out_dir / META_FILE, asdict(self.info))
        return out_dir / MODEL_FILE

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

    def score_rows(self, X: np.ndarray) -> np.ndarray:
        """Pointwise ranking score (higher = faster); not for pairwise models."""
        if self.is_pairwise:
            raise ValueError("pairwise models score a graph's rows against reference configs")
        return np.asarray(self.margin(X), np.float64)

    def score_graph(self, X: np.ndarray, X_refs: np.ndarray | None = None) -> np.ndarray:
        """Scores (higher = faster) of one graph's rows; pairwise mode needs ``X_refs``."""
        if not self.is_pairwise:
            return self.score_rows(X)
        if X_refs is None:
            raise ValueError("pairwise scoring needs reference configs")
        return pairwise_scores(self.margin, X, X_refs)

    def predict_file(self, path: str | os.PathLike, batch_rows: int = 65536,
                     progress: bool = True) -> dict[str, np.ndarray]:
        """Costs (lower = faster) for every config of every graph of a tabular file.

        Streams the file in batches, so memory holds one batch of features at a time (plus,
        for pairwise models, ``pair_refs`` reference rows per graph).
        """
        path = Path(path)
        names = self.info.feature_names
        missing = sorted(set(names) - set(feature_columns(path)))
        if missing:
            raise ValueError(f"{path}: {len(missing)} feature column(s) the model was trained on are "
                             f"missing, e.g. {missing[:3]}; rebuild features with the same settings")
        refs = self._reference_rows(path) if self.is_pairwise else {}
        graphs, configs, costs = [], [], []
        bar = tqdm(desc=f"lgbm predict {path.parent.parent.name}/{path.stem}", unit="row",
                   leave=False, **({} if progress else {"disable": True}))
        for graph, config, X in iter_batches(path, names, batch_rows):
            if self.is_pairwise:
                score = np.empty(len(graph), np.float64)
                uniq, inv = np.unique(graph, return_inverse=True)
                for stem, rows in zip(uniq, graph_runs(inv.astype(np.int64))):
                    score[rows] = self.score_graph(X[rows], refs[str(stem)])
            else:
                score = self.score_rows(X)
            graphs.append(graph)
            configs.append(config)
            costs.append(-score)
            bar.update(len(graph))
        bar.close()
        if not graphs:
            return {}
        return assemble_costs(path, np.concatenate(graphs), np.concatenate(configs),
                              np.concatenate(costs))

    def _reference_rows(self, path: Path) -> dict[str, np.ndarray]:
        """``pair_refs`` seeded random rows of each graph of the file (pairwise scoring)."""
        keys = read_keys(path)
        rng = np.random.default_rng(self.info.seed + 7919)
        graph = keys["graph"].to_numpy().astype(str)
        _, inv = np.unique(graph, return_inverse=True)
        rows = keys[ROW].to_numpy().astype(np.int64)
        runs = graph_runs(inv.astype(np.int64))
        chosen = (np.concatenate([rows[run[choose_refs(len(run), self.info.pair_refs, rng)]]
                                  for run in runs]) if runs else np.zeros(0, np.int64))
        df = (pl.scan_parquet(path).with_row_index(ROW)
              .filter(pl.col(ROW).is_in(pl.Series(np.sort(chosen), dtype=pl.UInt32).implode()))
              .select(["graph", *self.info.feature_names]).collect(engine="streaming"))
        g = df["graph"].to_numpy().astype(str)
        X = df.select(self.info.feature_names).to_numpy().astype(np.float32)
        return {str(s): X[g == s] for s in np.unique(g)}
