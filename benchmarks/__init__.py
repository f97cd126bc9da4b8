"""The lab beside the product: benchmark scripts, their artifacts and the docs-table generator.

Each ``benchmarks/NAME.py`` is run from the repository root as ``python -m benchmarks.NAME``
(``--help`` lists its options); it imports the product packages (``tpurank``, ``features``,
``models``, ``ensemble``) and never the other way round (``tests/test_layers.py``). The figures it
records go to ``benchmarks/*.json``, each carrying the commit, date, machine and command
(:func:`benchmarks.render.artifacts.bench_metadata`); ``make docs`` (``python -m benchmarks.render
render``) writes the tables of ``BENCHMARKS.md``, ``README.md`` and ``docs/*.md`` from them.

``make bench`` (``python -m benchmarks``) runs the quick set of :mod:`benchmarks.__main__`;
:mod:`benchmarks.synthetic` writes the synthetic inputs the benchmarks and the tests share.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
