"""tpurank feature pipeline: discover, load, validate, prune, featurize and cache TpuGraphs data.

Data flows one way: ``features`` -> ``models`` -> ``ensemble``. Nothing here imports a later package.
"""

