"""Generated TpuGraphs-like sample data in the exact Kaggle layout:
``python -m features.sample --out DIR --scale tiny|small``.

What the graphs, configs and cost model are: docs/data.md, "Sample data".
"""

from features.sample.writer import generate_dataset, main

__all__ = ["generate_dataset", "main"]
