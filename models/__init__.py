"""tpurank models: a GNN ranker (``models.gnn``), a LightGBM ranker (``models.lgbm``), and shared
metrics, losses, prediction I/O and training utilities. Imports ``features`` only."""
