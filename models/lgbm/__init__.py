"""LightGBM ranker on per-config tabular features (``python -m models.lgbm train|predict``).

Modes: ``lambdarank`` (default), ``rank_xendcg`` and ``pairwise`` (binary classifier on feature
differences of sampled same-graph config pairs). See :mod:`models.lgbm.train`.
"""

from models.lgbm.config import LgbmConfig
from models.lgbm.model import RankerModel

__all__ = ["LgbmConfig", "RankerModel"]
