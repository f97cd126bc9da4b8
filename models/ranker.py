"""What the pipeline needs of a ranker: :class:`Ranker` (a model package's ``RANKER``: the
planner's time model, its runs' reports, its scoring of the real TPU records), and
:class:`RankerConfig`, the options every ranker's stage config names alike. The orchestration
names no model."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tpurank.collections import Collection
from tpurank.config import StageConfig, parse_config


@dataclass
class RankerConfig(StageConfig):
    """The stage contract every ranker's config shares (same names, same places)."""

    MODEL: ClassVar[str] = ""  # the registry name

    collection: str = ""  # singular alias of --collections (wins when given) [run]
    features: str = ""  # feature directory; default WORK/features [run]
    tag: str = ""  # optional run name: model "<name>-<tag>", kept apart from the default one: WORK/models/<name>-<tag>/, WORK/preds/<name>-<tag>@seed<k>/ [run]

    def features_dir(self) -> Path:
        return Path(self.features) if self.features else Path(self.work) / "features"

    @property
    def model_name(self) -> str:  # <name>[-<tag>]
        return self.MODEL + (f"-{self.tag}" if self.tag else "")

    def collection_dir(self, collection: Collection) -> Path:
        """``WORK/models/<name>[-tag]/<slug>``: one ``seed<k>`` sub-directory per trained seed."""
        return Path(self.work) / "models" / self.model_name / collection.slug

    def model_dir(self, collection: Collection) -> Path:
        return self.collection_dir(collection) / f"seed{self.seed}"

    def preds_dir(self) -> Path:
        return Path(self.work) / "preds"

    def run_name(self) -> str:
        """Prediction run ``<name>[-tag]@seed<k>`` (:func:`models.predictions.run_name`)."""
        from models.predictions import run_name

        return run_name(self.model_name, self.seed)


class Ranker:
    """One model as the pipeline sees it; a model package subclasses it as its ``RANKER``."""

    name: str = ""  # its registry name
    title: str = ""  # its name in messages ("no trained <title> under ...")
    config: str = ""  # "module:Class" of its stage config (a RankerConfig)

    # -- the planner's time model (ensemble.run): models with ``capped`` train first, together at
    # most ensemble.plan.FIRST_SHARE of the training time; the one model without takes what they leave, and
    # splits it into seeds of at least ensemble.plan.MIN_SEED_SHARE of its preset's --time-budget each
    capped: bool = True
    overrun: float = 0.05  # share of a train stage's seconds kept back from its --time-budget
    predict_cost: tuple[float, float] = (3.0, 10.0)  # predict stage: a s + b s per million configs
    probed: bool = False  # predict time measured instead: see probe_options

    report, score_key = "", "score"  # a run's report file (under its model_dir) and its validation score
    marker: str = ""  # what a trained model directory holds (ensemble.real finds them by it)

    def parse(self, argv: list[str]) -> RankerConfig:
        """Its stage config from a stage's options (as the stage parses them)."""
        module, name = self.config.split(":")
        return parse_config(getattr(importlib.import_module(module), name), argv)

    def probe_options(self, configs: int) -> dict[str, Any]:
        """Train options of a probe (``probed``): an untrained model scores ``configs`` configs of
        each linked valid graph and its ``report`` times that (``final_eval_seconds``)."""
        raise NotImplementedError

    def runs(self, work: str | Path, folds: bool = False) -> list[dict[str, Any]]:
        """The ``report`` of every whole run under its models, then (``folds``) of every fold model."""
        paths = sorted((Path(work) / "models" / self.name).rglob(self.report or "-"))
        whole = [p for p in paths if not any(part.startswith("fold") and part[4:].isdigit() for part in p.parts)]
        return [json.loads(p.read_text()) for p in whole + ([p for p in paths if p not in whole] if folds else [])]

    def real_costs(self, dirs: list[Path], records: Any, device: str) -> tuple[list[dict], str]:
        """Costs per real record (stem -> costs) of each trained model directory of one seed (its
        folds), and a note; ``records`` (:class:`ensemble.real.Records`) gives the records
        featurized: ``processed(features_dir)``, ``tabular()``."""
        raise NotImplementedError
