"""LightGBM ranker on per-config tabular features (``python -m models.lgbm train|predict``).

Modes: ``lambdarank`` and ``pairwise`` (binary classifier on feature differences
of sampled same-graph config pairs); per-collection defaults in :data:`models.lgbm.config.DEFAULT_MODE`.
See :mod:`models.lgbm.train` (train/valid protocol, resume, time budget) and
:mod:`models.lgbm.folds` (``--folds K`` cross-validation, out-of-fold predictions).
"""

import os

# OpenMP threads that spin while waiting are many times slower on a busy (shared or
# oversubscribed) machine: 100 lambdarank rounds took 14 s with 2 spinning threads vs 0.9 s
# passive on a 2-core VM at load 7. Must be set before LightGBM loads the OpenMP runtime; an
# explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from models.lgbm.config import LgbmConfig  # noqa: E402
from models.lgbm.model import RankerModel  # noqa: E402

__all__ = ["LgbmConfig", "RankerModel"]
