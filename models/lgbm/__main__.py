"""``python -m models.lgbm train|predict [--option value ...]``.

    python -m models.lgbm train   --data D --work W --preset quick --seed 0 [--collections tile:xla]
                                  [--folds K (0 = train/valid split)] [--time-budget SECONDS]
    python -m models.lgbm predict --data D --work W --preset quick --seed 0

train resumes: collections (and folds) whose done.json matches the settings are kept; predict
reuses every prediction file already written by the same model (train writes valid, and with
--folds K also oof, test-fold<k> and test).
"""

from __future__ import annotations

import sys

from tpurank.cli import dispatch
from tpurank.config import parse_config
from models.lgbm.config import LgbmConfig


def train_main(argv: list[str]) -> int:
    from models.lgbm.train import train_all

    train_all(parse_config(LgbmConfig, argv, prog="python -m models.lgbm train"))
    return 0


def predict_main(argv: list[str]) -> int:
    from models.lgbm.train import predict_all

    predict_all(parse_config(LgbmConfig, argv, prog="python -m models.lgbm predict"))
    return 0


COMMANDS = {
    "train": ("models.lgbm.__main__:train_main", "train per collection (and fold), resumable"),
    "predict": ("models.lgbm.__main__:predict_main", "write valid+test predictions (with --folds "
                                                      "also oof and test-fold<k>)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("models.lgbm", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
