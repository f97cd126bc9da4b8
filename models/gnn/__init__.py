"""GNN ranker (PyTorch Geometric) for the tile and layout collections.

Public API (used by ``python -m models.gnn rank``)::

    from models.gnn import load_trained, predict_costs
    model, cfg = load_trained(work, "layout:xla:random")
    cost = predict_costs(model, processed_graph, batch_size=cfg.predict_batch)  # lower = faster
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:  # lazy: importing the package does not import torch
    if name in ("load_trained", "predict_costs"):
        from models.gnn import infer

        return getattr(infer, name)
    raise AttributeError(name)


__all__ = ["load_trained", "predict_costs"]
