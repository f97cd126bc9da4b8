"""Configuration of the LightGBM ranker (one dataclass, presets ``quick`` and ``full``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tpurank.collections import Collection, held_collections
from models.ranker import RankerConfig

MODES = ("lambdarank", "pairwise")

# Which mode ``--mode default`` uses per collection: out of fold on both physics, two seeds each
# (benchmarks/lgbm_mode.json), pairwise beat lambdarank on every layout collection in every run
# and lambdarank beat pairwise on tile in every run.
DEFAULT_MODE: dict[str, str] = {
    "tile:xla": "lambdarank",
    "layout:xla:default": "pairwise",
    "layout:xla:random": "pairwise",
    "layout:nlp:default": "pairwise",
    "layout:nlp:random": "pairwise",
}


@dataclass
class LgbmConfig(RankerConfig):
    """LightGBM ranker on the per-config tabular features (``python -m models.lgbm train|predict``)."""

    MODEL: ClassVar[str] = "lgbm"

    mode: str = "default"  # default (the mode per collection in DEFAULT_MODE) | lambdarank | pairwise | auto (train both, keep the one with the better validation score) [measured: benchmarks/lgbm_mode.json "LightGBM's objective per collection"]

    # --- rows and groups ---
    max_train_configs_per_graph: int = 5000  # uniform random subsample per train graph (memory)
    max_valid_configs_per_graph: int = 2000  # subsample used for early stopping only

    # --- boosting ---
    num_boost_round: int = 3000  # boosting rounds at most (early stopping usually ends sooner)
    early_stopping_rounds: int = 100  # stop after this many rounds without a better validation score
    min_rounds: int = 100  # early stopping never picks an earlier iteration
    learning_rate: float = 0.05  # LightGBM learning_rate (shrinkage)
    num_leaves: int = 63  # LightGBM num_leaves per tree

    # --- pairwise mode ---
    pairs_per_graph: int = 20000  # sampled config pairs per train graph
    valid_pairs_per_graph: int = 5000  # sampled config pairs per valid graph (pairwise early stopping)
    pair_refs: int = 32  # reference configs per graph when scoring pairs back into a ranking

    # --- protocol ---
    # grouped cross-validation over the labelled graphs (train + valid, models.cv.fold_plan):
    # K >= 2 trains K fold models (out-of-fold predictions, a fold-averaged test prediction);
    # 0 = train on train, early-stop (and choose --mode auto) on valid
    folds: int = 0
    # wall-clock seconds for training all selected collections (0 = no limit): shared out in
    # proportion to their training rows with a floor (models.budget); boosting stops at
    # the best iteration so far when a collection's (fold's) share is spent
    time_budget: float = 0.0

    # --- runtime ---
    checkpoint_every: float = 60.0  # seconds between booster checkpoints: a killed fit resumes from the last one (0 = off) [run]
    threads: int = 0  # 0 = all cores [run]
    predict_batch_rows: int = 65536  # rows per predict call (memory bound) [run]
    eval_every: int = 1  # official validation metric every k iterations (early stopping)

    PRESETS = {
        "quick": {"num_boost_round": 300, "early_stopping_rounds": 30, "min_rounds": 30,
                  "learning_rate": 0.1, "num_leaves": 31, "max_train_configs_per_graph": 1000,
                  "eval_every": 5, "max_valid_configs_per_graph": 1000, "pairs_per_graph": 4000,
                  "valid_pairs_per_graph": 2000, "pair_refs": 16, "folds": 3,
                  "time_budget": 240.0},
        "full": {"num_boost_round": 5000, "early_stopping_rounds": 200, "min_rounds": 100,
                 "learning_rate": 0.03, "num_leaves": 63, "max_train_configs_per_graph": 10000,
                 "max_valid_configs_per_graph": 5000, "pairs_per_graph": 20000,
                 "valid_pairs_per_graph": 10000, "pair_refs": 32, "folds": 5,
                 # a Kaggle session (docs/competition.md §2): 1 h of LightGBM beside the GNN's
                 # 6 h and the feature build (BENCHMARKS.md, T4 projection)
                 "time_budget": 3600.0},
    }

    def selected_collections(self) -> list[Collection]:
        """``--collection``/``--collections``; ``all`` = the collections the data root holds."""
        return held_collections(self.data, self.collection or self.collections)

    def resolved_mode(self, collection: Collection) -> str:
        """The concrete mode for ``collection`` (``auto`` stays ``auto``)."""
        if self.mode == "default":
            return DEFAULT_MODE[collection.name]
        if self.mode not in MODES + ("auto",):
            raise ValueError(f"unknown --mode {self.mode!r}; expected default, auto or one of {MODES}")
        return self.mode
