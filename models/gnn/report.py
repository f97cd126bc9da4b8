"""Validation report plots: per-graph scores (bar plot) and training curves (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tpurank.atomic import atomic_path  # noqa: E402


def _save(fig: plt.Figure, path: Path) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_report(report: dict[str, Any], out_dir: Path) -> None:
    """Write ``valid_scores.png`` (per-graph score) and ``curves.png`` (loss / valid vs step)."""
    per_graph = report.get("per_graph", {})
    if per_graph:
        stems = list(per_graph)
        fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * len(stems) + 2), 3.5))
        ax.bar(range(len(stems)), [per_graph[s] for s in stems], color="tab:blue")
        ax.axhline(report["score"], color="tab:red", lw=1, label=f"mean {report['score']:.3f}")
        ax.set_xticks(range(len(stems)))
        ax.set_xticklabels(stems, rotation=90, fontsize=7)
        metric = "top-5 score" if report["collection"].startswith("tile") else "Kendall τ"
        ax.set_ylabel(metric)
        ax.set_title(f"GNN validation {metric} per graph — {report['collection']}")
        ax.legend(loc="lower right")
        _save(fig, out_dir / "valid_scores.png")
    history = report.get("history", [])
    if history:
        steps = [h["step"] for h in history]
        fig, ax1 = plt.subplots(figsize=(6, 3.5))
        ax1.plot(steps, [h["loss"] for h in history], color="tab:orange", label="train loss")
        ax1.set_xlabel("step")
        ax1.set_ylabel("train loss", color="tab:orange")
        ax2 = ax1.twinx()
        ax2.plot(steps, [h["valid"] for h in history], color="tab:blue", marker="o", label="valid")
        ax2.set_ylabel("validation score", color="tab:blue")
        ax1.set_title(f"GNN training — {report['collection']}")
        _save(fig, out_dir / "curves.png")
