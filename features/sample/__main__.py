"""``python -m features.sample --out DIR --scale tiny|small``."""

from features.sample.writer import main

if __name__ == "__main__":
    raise SystemExit(main())
