"""The models of the pipeline, in one table that every place listing models reads (the
``Makefile`` through ``python3 -m tpurank.registry make``, the console script, the pipeline, the
blend, ``ensemble real``, the docs tables). A model's name is its ``--models`` name, its folders
``WORK/models/<name>/<slug>/seed<k>/`` and ``WORK/preds/<name>[@seed<k>]/<slug>/<split>.npz``.

Adding a model: one :class:`Model` row here, and a stage module with ``train``/``predict``
commands that write those files and a ``RANKER`` (:class:`models.ranker.Ranker`); the run, plan,
blend, report, notebooks and ``make run`` then pick it up (tests/ensemble/test_toy_ranker.py).

Standard library only (the ``Makefile`` runs it with the system ``python3`` before any virtual
environment exists), and no stage import: stages are named by module.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """One model of the pipeline."""

    name: str  # --models name; WORK/models/<name>/, WORK/preds/<name>[@seed<k>]/
    module: str  # stage module: python -m <module> {train,predict} (predict only without a train stage)
    help: str  # what it is, one line (the console script's help)
    trains: bool  # has a train stage (False: training-free, predict only)
    has_oof: bool  # predict writes out-of-fold predictions of the labelled graphs (cross-validated runs)
    blend: bool = False  # blended by default (make run, the notebooks: MODELS / --models unset)

    @property
    def stages(self) -> tuple[str, ...]:
        """Its sub-commands in pipeline order."""
        return ("train", "predict") if self.trains else ("predict",)

    @property
    def ranker(self):
        """Its :class:`models.ranker.Ranker`: ``RANKER`` of its stage module (imported now)."""
        return importlib.import_module(self.module).RANKER


MODELS: tuple[Model, ...] = (
    Model("gnn", "models.gnn", "train | predict | rank: the GNN ranker",
          trains=True, has_oof=True, blend=True),
    Model("lgbm", "models.lgbm", "train | predict: the LightGBM ranker",
          trains=True, has_oof=True, blend=True),
    Model("baseline", "models.baseline", "predict: the training-free heuristic",
          trains=False, has_oof=False),
)
BY_NAME: dict[str, Model] = {m.name: m for m in MODELS}


def default_models() -> str:
    """What ``make run`` and the notebooks blend unless told otherwise (``MODELS=`` / ``--models``)."""
    return ",".join(m.name for m in MODELS if m.blend)


def model_list(models: str | None) -> list[str]:
    """The names of a comma list of models (None or empty: :func:`default_models`)."""
    return [m.strip() for m in (models or default_models()).split(",") if m.strip()]


def base_name(name: str) -> str:
    """``gnn@seed0`` -> ``gnn``, ``lgbm-tag`` -> ``lgbm`` (a seeded or tagged run of a model)."""
    base = name.split("@", 1)[0]
    return base if base in BY_NAME else base.split("-", 1)[0]


def get_model(name: str) -> Model:
    """The registry row of a model name (or of a seeded/tagged run of it)."""
    try:
        return BY_NAME[base_name(name)]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise ValueError(f"unknown model {name!r}; the models are: {known} (tpurank/registry.py)") from None


def main(argv: list[str] | None = None) -> int:
    """``make``: ``name:module:stage,stage`` per model; ``default-models``: the models blended by
    default (comma list)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["make"]:
        print(" ".join(f"{m.name}:{m.module}:{','.join(m.stages)}" for m in MODELS))
    elif argv == ["default-models"]:
        print(default_models())
    else:
        print("usage: python -m tpurank.registry make|default-models   (what the Makefile reads)",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
