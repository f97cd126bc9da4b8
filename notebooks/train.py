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
# # Train: features → models (GNN, LightGBM)
#
# Runs the pipeline stages for the chosen collections with a chosen preset, exactly as
# `make run` does (each stage is its CLI entry point, called in-process by `ensemble.pipeline`).
# Trained artifacts land in `WORK/models` and `WORK/features`; `make kaggle-bundle WORK=...`
# packs them into the Kaggle weights dataset.
#
# Data: `DATA` when given, else `/kaggle/input/predict-ai-model-runtime` on Kaggle, else the
# generated sample (`SAMPLE_DIR`, created on first use).
#
# `BUDGET` (seconds) plans the whole run to that time, as `make run BUDGET=...`: validate and the
# features are measured, the plan and its ETA are printed, the models train and predict within it
# (the GNN's time split into seeds of the preset's training time each, up to three), and the
# last cell blends and writes the report with planned vs actual times. `"auto"`: 8 h on Kaggle
# (a session lasts 9–12 h), none elsewhere (each stage's own time limits).

# %% tags=["parameters"]
DATA = None  # data root (Kaggle layout); None: Kaggle input, else the generated sample
SAMPLE_DIR = "../data/sample-tiny"
SAMPLE_SCALE = "tiny"  # tiny | small
WORK = None  # None: /kaggle/working/work on Kaggle, else work/notebook
PRESET = "quick"  # quick | full
BUDGET = "auto"  # seconds for the whole run (planned); "auto": 8 h on Kaggle, else none (0)
SEED = 0
COLLECTIONS = "all"  # e.g. "layout:xla:random,tile:xla"
MODELS = "gnn,lgbm"  # models to train (tpurank/registry.py)
OVERRIDES = {}  # per stage, e.g. {"gnn-train": {"steps": 40}, "lgbm-train": {"num_boost_round": 50}}
CODE_DIR = "/kaggle/input/tpurank-code"  # on Kaggle: the tpurank wheel (bundle dataset)
WHEELS_DIR = "/kaggle/input/tpurank-wheels"  # on Kaggle: wheels the image lacks
INSTALL = "auto"  # True | False | "auto" (offline install when WHEELS_DIR exists)

# %%
import importlib
import os
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

run = pipeline.Run(data=str(pipeline.find_data(DATA, SAMPLE_DIR, SAMPLE_SCALE)),
                   work=str(pipeline.default_work(WORK, f"notebook-{PRESET}")), preset=PRESET,
                   seed=SEED, collections=COLLECTIONS, models=MODELS, overrides=OVERRIDES,
                   budget=pipeline.notebook_budget(BUDGET))
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
# ## Training curves (GNN train loss and validation score)

# %%
pipeline.plot_training_curves(run.work)

# %% [markdown]
# ## Validation score per collection and model

# %%
import polars as pl

pl.DataFrame(pipeline.validation_table(run.work))

# %% [markdown]
# ## With a budget: blend, check and the report (planned vs actual seconds per stage)

# %%
if run.budget:
    print(pipeline.submit(run))
