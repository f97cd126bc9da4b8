"""``python -m models.lgbm train|predict|compare [--option value ...]``.

    python -m models.lgbm train   --data D --work W --preset quick --seed 0 [--collections tile:xla]
                                  [--folds K (0 = train/valid split)] [--time-budget SECONDS]
    python -m models.lgbm predict --data D --work W --preset quick --seed 0
    python -m models.lgbm compare --work W --models lgbm,baseline,gnn   # validation scores

train resumes: collections (and folds) whose done.json matches the settings are kept; predict
reuses every prediction file already written by the same model (train writes valid, and with
--folds K also oof, test-fold<k> and test).
"""

from __future__ import annotations

import sys

from tpurank.config import parse_config
from models.lgbm.config import LgbmConfig

USAGE = __doc__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "compare":
        from models.lgbm.evaluate import main as compare_main
        return compare_main(rest)
    if command not in ("train", "predict"):
        print(f"unknown command {command!r}\n{USAGE}", file=sys.stderr)
        return 2
    cfg = parse_config(LgbmConfig, rest, prog=f"python -m models.lgbm {command}")
    if command == "train":
        from models.lgbm.train import train_all
        train_all(cfg)
    else:
        from models.lgbm.predict import predict_all
        predict_all(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
