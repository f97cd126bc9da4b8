# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Train: features → models (GNN, LightGBM) → blend → `submission.csv`
#
# The pipeline stages, exactly as `make run` runs them (`ensemble.pipeline` calls each stage's
# entry point in-process); trained artifacts land in `WORK/models` and `WORK/features`.
# `BUDGET` (seconds) plans the whole run to that time, as `make run BUDGET=...`, and the last cell
# then blends and writes the report with planned vs actual times.
#
# **On Kaggle** (the train kernel of `make kaggle-bundle`, docs/kaggle.md) it installs tpurank
# offline, trains with the `full` preset planned to 8 h, writes a checked `submission.csv` and
# slims `WORK`: the kernel's output is the inference kernel's weights. Data: `DATA`, else the
# Kaggle input, else the generated sample (`SAMPLE_DIR`). `TPURANK_KAGGLE_ROOT` names a folder
# that stands in for `/kaggle` (`make kaggle-rehearsal`).

# %% tags=["parameters"]
import os

KAGGLE = os.environ.get("TPURANK_KAGGLE_ROOT") or "/kaggle"  # stands in for /kaggle when set
DATA = None  # data root (Kaggle layout); None: Kaggle input, else the generated sample
SAMPLE_DIR = "../data/sample-tiny"
SAMPLE_SCALE = "tiny"  # tiny | small
WORK = None  # None: KAGGLE/working/work on Kaggle, else work/notebook-PRESET
PRESET = "auto"  # quick | full | auto: full on Kaggle (the GPU budget), else quick
BUDGET = "auto"  # seconds for the whole run (planned); "auto": 8 h on Kaggle, else none (0)
SEED = 0
COLLECTIONS = "all"  # e.g. "layout:xla:random,tile:xla"
MODELS = None  # comma list of the models to train; None: the default blend of tpurank/registry.py
OVERRIDES = {}  # per stage, e.g. {"gnn-train": {"steps": 40}, "lgbm-train": {"num_boost_round": 50}}
CODE_DIR = f"{KAGGLE}/input/tpurank-code"  # on Kaggle: the tpurank wheel (bundle dataset)
WHEELS_DIR = f"{KAGGLE}/input/tpurank-wheels"  # on Kaggle: wheels the image lacks
INSTALL = "auto"  # True | False | "auto" (offline install when WHEELS_DIR exists)
SLIM = "auto"  # drop rebuildable caches at the end: "auto" = on Kaggle (output capped at 20 GB)

# %%
import importlib
import subprocess
import sys

if INSTALL is True or (INSTALL == "auto" and os.path.isdir(WHEELS_DIR)):  # offline: --no-index
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                          CODE_DIR, "--find-links", WHEELS_DIR, "tpurank"],
                         capture_output=True, text=True)
    print(pip.stdout[-3000:], pip.stderr[-3000:])
    pip.check_returncode()
    importlib.invalidate_caches()

# %%
# %matplotlib inline
from ensemble import pipeline

preset = pipeline.notebook_preset(PRESET)
work = pipeline.default_work(WORK, f"notebook-{preset}")
submission = work.parent / "submission.csv" if pipeline.on_kaggle() else work / "submission.csv"
run = pipeline.Run(data=str(pipeline.find_data(DATA, SAMPLE_DIR, SAMPLE_SCALE)), work=str(work),
                   preset=preset, seed=SEED, collections=COLLECTIONS, models=MODELS,
                   submission=str(submission), overrides=OVERRIDES,
                   budget=pipeline.notebook_budget(BUDGET))
print("device:", pipeline.device_name())
run

# %% [markdown]
# ## Validate the input files
# Bad files are reported and skipped by the later stages.

# %%
pipeline.run_stage(run, "validate")

# %% [markdown]
# ## Features
# Pruned graphs (GNN) and tabular rows (LightGBM); normalisation statistics come from train only.

# %%
pipeline.run_stage(run, "features")

# %% [markdown]
# ## Models
# The train stage of every model in `MODELS` (the model table is `tpurank/registry.py`): one
# model per collection (and fold); progress bars show the loss and the validation score. With a
# budget: first the plan and its ETA, then training and predictions within it.

# %%
pipeline.train(run, build_features=False)

# %% [markdown]
# ## Learning curves (held-out score against training time)

# %%
pipeline.plot_learning_curves(run.work)

# %% [markdown]
# ## Validation score per collection and model

# %%
import polars as pl

pl.DataFrame(pipeline.validation_table(run.work))

# %% [markdown]
# ## With a budget: blend, check and the report (planned vs actual seconds per stage)
# Then, on Kaggle, `WORK` is slimmed to what inference needs (models, feature statistics,
# predictions, blend, report): the kernel's output is the inference kernel's weights.

# %%
if run.budget:
    print(pipeline.submission_preview(pipeline.submit(run)))
if SLIM is True or (SLIM == "auto" and pipeline.on_kaggle()):
    print("WORK slimmed (bytes):", pipeline.slim_work(run.work))
