"""Gain feature importance of a trained ranker: CSV, JSON and a bar plot (PNG)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tpurank.atomic import atomic_path, write_json, write_text
from models.lgbm.model import RankerModel

TOP_PLOTTED = 30


def gain_importance(model: RankerModel) -> list[dict]:
    """Total gain per *original* feature, sorted descending, with its share of the total.

    For pairwise models the gains of ``diff__f`` and ``mean__f`` are summed into ``f``. Names
    come from the model info (the booster may hold sanitised names), in column order.
    """
    gains = model.booster.feature_importance(importance_type="gain")
    splits = model.booster.feature_importance(importance_type="split")
    names = list(model.info.feature_names)
    if model.is_pairwise:
        names = names * 2  # pair matrix = [diff, mean] of the original columns
    if len(names) != len(gains):
        raise ValueError(f"model has {len(gains)} features but its info lists {len(names)}")
    total_gain: dict[str, float] = {}
    total_split: dict[str, int] = {}
    for base, gain, split in zip(names, gains, splits):
        total_gain[base] = total_gain.get(base, 0.0) + float(gain)
        total_split[base] = total_split.get(base, 0) + int(split)
    grand = sum(total_gain.values()) or 1.0
    rows = [{"feature": f, "gain": g, "share": g / grand, "splits": total_split[f]}
            for f, g in total_gain.items()]
    return sorted(rows, key=lambda r: (-r["gain"], r["feature"]))


def save_importance(model: RankerModel, out_dir: str | os.PathLike, title: str = "") -> list[dict]:
    """Write ``importance.csv``, ``importance.json`` and ``importance.png``; returns the rows."""
    out_dir = Path(out_dir)
    rows = gain_importance(model)
    lines = ["feature,gain,share,splits"] + [
        f"{r['feature']},{r['gain']:.6g},{r['share']:.6f},{r['splits']}" for r in rows]
    write_text(out_dir / "importance.csv", "\n".join(lines) + "\n")
    write_json(out_dir / "importance.json", rows)
    plot_importance(rows, out_dir / "importance.png", title)
    return rows


def plot_importance(rows: list[dict], path: str | os.PathLike, title: str = "",
                    top: int = TOP_PLOTTED) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = rows[:top][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.28 * max(len(shown), 4) + 1.2))
    ax.barh(np.arange(len(shown)), [100 * r["share"] for r in shown], color="#3b75af")
    ax.set_yticks(np.arange(len(shown)), [r["feature"] for r in shown], fontsize=8)
    ax.set_xlabel("share of total gain (%)")
    ax.set_title(f"LightGBM gain importance — {title}" if title else "LightGBM gain importance")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
