"""Generated numbers in the docs: every results/benchmark table is written from a committed artifact.

A Markdown file marks a generated section with ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``;
``python -m benchmarks.render render`` (``make docs``) rewrites every marked section of ``README.md``,
``BENCHMARKS.md`` and ``docs/*.md`` from the artifact of that name, and ``--check`` only reports
sections that differ (what ``tests/test_docs.py`` asserts). Nothing between the markers is ever
edited by hand.

Artifacts (JSON, committed):

* ``results/NAME.json`` — scores: ``capture`` writes one from the ``report.json`` of
  ``python -m ensemble report`` (one run), ``capture-seeds`` from one report per seed
  (``results/seeds.json``, written by ``make results``, feeds the README tables), ``capture-real``
  from the ``real_eval.json`` of ``python -m ensemble real`` (``results/real.json``);
* ``benchmarks/NAME.json`` — written by a benchmark command. The contract: top-level ``git_sha``,
  ``created`` (or ``date``), ``machine``, ``command`` (also accepted under ``meta``;
  :func:`benchmarks.render.artifacts.bench_metadata` makes all four), and the figures as ``rows``
  (or ``cases``: a list of objects, one level of nesting is flattened; ``columns`` orders them),
  ``tables`` (``{title: {"columns": [...], "rows": [...]}}``) and/or top-level objects of figures
  (e.g. ``summary``: name -> value, one table each); an optional ``notes`` string is printed under them.

A missing artifact renders as "not measured at this commit", never as an old number. The git SHA
an artifact carries must be an ancestor of HEAD (``git merge-base --is-ancestor``; a ``-dirty``
SHA counts as its base commit): numbers measured on code that is not in the history are stale.

Modules, by concern: :mod:`~benchmarks.render.artifacts` (reading artifacts, their provenance),
:mod:`~benchmarks.render.tables` (Markdown tables; benchmark artifacts),
:mod:`~benchmarks.render.scores` (the score tables of ``results/*.json``),
:mod:`~benchmarks.render.render` (the marked sections of the docs),
:mod:`~benchmarks.render.capture` (artifacts from run reports) and the CLI (``__main__``).
"""
