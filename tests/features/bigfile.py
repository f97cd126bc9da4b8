"""The synthetic graphs of the data-layer tests: :mod:`benchmarks.synthetic` (shared with the benchmarks)."""

from benchmarks.synthetic import layout_arrays, tile_arrays, write_layout_npz, write_mini_root, write_tile_npz  # noqa: F401
