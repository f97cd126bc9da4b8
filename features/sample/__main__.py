"""``python -m features.sample --out DIR --scale tiny|small``."""

import sys

from features.sample.writer import main

if __name__ == "__main__":
    sys.exit(main())
