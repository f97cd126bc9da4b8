"""Toy tabular features of the LightGBM tests: :mod:`benchmarks.synthetic` (shared with the benchmarks)."""

from benchmarks.synthetic import toy_frame, write_toy_features  # noqa: F401
