"""The train notebook on a CUDA machine: ``PRESET=full`` (the train kernel's Kaggle default), a
short ``BUDGET``, both GNN archs — the device the stages chose, mixed precision, the GNN's steps
per second and the out-of-fold scores, written to ``OUT/gpu_check.json``.

    python -m benchmarks.gpu_check --out DIR [--budget 150] [--scale small] [--archs factorized,copy]

The notebook (``notebooks/train.py``, jupytext percent format) runs as a script with its
parameters cell followed by the injected values, in a folder standing in for ``/kaggle``
(``TPURANK_KAGGLE_ROOT``), so it takes its Kaggle defaults: the full preset, the planned run,
a checked submission and the slimmed WORK. Needs no Jupyter.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "train.py"


def notebook_source(params: dict[str, Any]) -> str:
    """The train notebook as one script, ``params`` assigned right after its parameters cell."""
    cells = NOTEBOOK.read_text().split("\n# %%")
    index = next(i for i, c in enumerate(cells) if c.startswith(' tags=["parameters"]'))
    cells.insert(index + 1, "\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items()) + "\n")
    return "\n# %%".join(cells)


def gnn_speed(work: Path) -> dict[str, Any]:
    """Steps, seconds and configs per second over the GNN's fold models, per collection."""
    out: dict[str, Any] = {}
    for report in sorted((work / "models" / "gnn").rglob("fold*/report.json")):
        r = json.loads(report.read_text())
        row = out.setdefault(r["collection"], {"steps": 0, "seconds": 0.0, "configs": 0.0, "models": 0})
        row["steps"] += r["last_step"]
        row["seconds"] += r["train_seconds"]
        row["configs"] += r["train_configs_per_s"] * r["train_seconds"]
        row["models"] += 1
    for row in out.values():
        row["steps_per_s"] = row["steps"] / row["seconds"] if row["seconds"] else None
        row["configs_per_s"] = row.pop("configs") / row["seconds"] if row["seconds"] else None
    return out


def oof_scores(work: Path) -> dict[str, Any]:
    """The blend stage's out-of-fold score per collection and model, and the final mean."""
    summary = json.loads((work / "blend" / "summary.json").read_text())
    per = {}
    for coll, v in summary["collections"].items():
        oof = v.get("oof", {})
        per[coll] = {m: s.get("mean") for m, s in oof.get("models", {}).items()}
        per[coll]["blend"] = oof.get("blend", {}).get("scores", {}).get("mean")
    return {"per_collection": per, "final": summary.get("oof_final")}


NOTES = ("One train-notebook run per arch on the generated small sample, with the notebook's Kaggle "
         "defaults (preset full, the run planned to BUDGET): what the GNN's share of that budget "
         "bought — steps summed over the fold models of a collection and their rate, which includes "
         "each model's first, slower steps — and the out-of-fold scores of that short training. "
         "A check of the CUDA and mixed-precision path, not a quality comparison of the archs.")


def tables(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The artifact's tables: each run, then its GNN speed and OOF scores per collection."""
    per_run = [{"arch": r["arch"], "device": ",".join(r["devices"]), "amp": r["amp"],
                "preset": ",".join(map(str, r["preset"])), "wall s": r["wall_s"],
                "submission checked": r["submission"] and r["rc"] == 0} for r in runs]
    per_coll = [{"arch": r["arch"], "collection": coll, "fold models": g["models"], "steps": g["steps"],
                 "steps/s": g["steps_per_s"], "configs/s": g["configs_per_s"],
                 **{f"oof {m}": v for m, v in r["oof"]["per_collection"].get(coll, {}).items()}}
                for r in runs if r["rc"] == 0 for coll, g in r["gnn"].items()]
    return {"Runs": {"rows": per_run}, "GNN training and out-of-fold scores": {"rows": per_coll}}


def run_arch(arch: str, data: Path, root: Path, budget: float) -> dict[str, Any]:
    kaggle = root / f"kaggle-{arch}"
    (kaggle / "input").mkdir(parents=True, exist_ok=True)
    (kaggle / "working").mkdir(exist_ok=True)
    link = kaggle / "input" / "predict-ai-model-runtime"
    if not link.exists():
        link.symlink_to(data)
    script = kaggle / "train_notebook.py"
    script.write_text(notebook_source({"BUDGET": budget, "OVERRIDES": {"gnn-train": {"arch": arch}}}))
    env = dict(os.environ, TPURANK_KAGGLE_ROOT=str(kaggle), MPLBACKEND="Agg")
    t0 = time.monotonic()
    # run under another name than __main__: the feature stage's worker processes re-import __main__
    run = f"import runpy; runpy.run_path({str(script)!r}, run_name='train_notebook')"
    proc = subprocess.run([sys.executable, "-c", run], cwd=kaggle / "working", env=env,
                          capture_output=True, text=True)
    seconds = time.monotonic() - t0
    (root / f"log-{arch}.txt").write_text(proc.stdout + proc.stderr)
    result: dict[str, Any] = {"arch": arch, "rc": proc.returncode, "wall_s": round(seconds, 1),
                              "tail": (proc.stdout + proc.stderr)[-1500:]}
    work = kaggle / "working" / "work"
    configs = [json.loads(p.read_text()) for p in (work / "models" / "gnn").rglob("fold*/config.json")]
    result["devices"] = sorted({c.get("device", "?") for c in configs})
    result["amp"] = sorted({c.get("amp") for c in configs}, key=str)
    result["preset"] = sorted({c["config"].get("preset") for c in configs})
    result["submission"] = (kaggle / "working" / "submission.csv").is_file()
    if proc.returncode == 0:
        result.update(gnn=gnn_speed(work), oof=oof_scores(work))
    return result


def device_metadata(script: str, argv: list[str] | None) -> dict[str, str]:
    """An artifact's provenance on a lent device: it gets a copy of the working tree, so
    ``GIT_SHA`` names the commit it holds; the machine names the GPU."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    sha = os.environ.get("GIT_SHA") or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                      text=True, cwd=REPO).stdout.strip()
    return {"command": f"python -m benchmarks.{script} " + " ".join(argv or sys.argv[1:]),
            "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "git_sha": sha,
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, {gpu}",
            "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json and the logs")
    p.add_argument("--root", type=Path, default=Path("/tmp/gpu-check"), help="scratch folder")
    p.add_argument("--budget", type=float, default=150.0, help="the notebook's BUDGET per arch, seconds")
    p.add_argument("--scale", default="small", help="generated sample scale (features.sample)")
    p.add_argument("--archs", default="factorized,copy", help="GNN archs, one notebook run each")
    args = p.parse_args(argv)
    from features.sample import generate_dataset

    data = args.root / f"sample-{args.scale}"
    if not (data / ".complete").is_file():
        generate_dataset(data, scale=args.scale, seed=0)
    report: dict[str, Any] = {**device_metadata("gpu_check", argv), "notes": NOTES, "raw": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for arch in args.archs.split(","):
        report["raw"].append(run_arch(arch, data, args.root, args.budget))
        report["tables"] = tables(report["raw"])
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps({k: v for k, v in report["raw"][-1].items() if k != "tail"}, indent=1))
    return 0 if all(r["rc"] == 0 for r in report["raw"]) else 1


if __name__ == "__main__":
    sys.exit(main())
