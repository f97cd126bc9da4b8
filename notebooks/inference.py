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
# # Inference: trained artifacts → predictions → blend → `submission.csv`
#
# Runs offline. On Kaggle (the inference kernel of `make kaggle-bundle`, docs/kaggle.md) tpurank
# is installed with `pip install --no-index` from the attached `tpurank-code` and `tpurank-wheels`
# datasets, and `WEIGHTS = "auto"` takes the train kernel's output or the `tpurank-weights`
# dataset, whichever is attached. Locally: set `DATA` (or let it generate the sample), `WEIGHTS`
# to a trained work dir (or `None` to use `WORK` as it is), and `INSTALL = False`.
# `TPURANK_KAGGLE_ROOT` names a folder that stands in for `/kaggle` (`make kaggle-rehearsal`).

# %% tags=["parameters"]
import os

KAGGLE = os.environ.get("TPURANK_KAGGLE_ROOT") or "/kaggle"  # stands in for /kaggle when set
DATA = None  # data root; None: KAGGLE/input/predict-ai-model-runtime, else the generated sample
SAMPLE_DIR = "../data/sample-tiny"
SAMPLE_SCALE = "tiny"
CODE_DIR = f"{KAGGLE}/input/tpurank-code"  # the tpurank wheel
WHEELS_DIR = f"{KAGGLE}/input/tpurank-wheels"  # wheels the Kaggle image lacks
WEIGHTS = "auto"  # trained artifacts; "auto": the train kernel's output or the weights dataset; None: WORK as it is
INSTALL = "auto"  # True | False | "auto" (install when WHEELS_DIR exists)
WORK = None  # None: KAGGLE/working/work on Kaggle, else work/notebook-PRESET
SUBMISSION = None  # None: KAGGLE/working/submission.csv on Kaggle, else WORK/submission.csv
PRESET = None  # None: the preset the weights were trained with (their MANIFEST.json)
SEED = 0
COLLECTIONS = "all"
MODELS = None  # models to predict with and blend; None: the default blend of tpurank/registry.py
# the blend's weights are fitted on the valid split here: inference has no train graphs, hence no
# out-of-fold predictions (the blend stops unless told so)
PROTOCOL = "valid"
# per stage; train graphs need no features here (norm stats come with the weights)
OVERRIDES = {"features": {"splits": "valid,test"}}

# %% [markdown]
# ## Offline install from the bundle (no network: `--no-index`)

# %%
import importlib
import subprocess
import sys

if INSTALL is True or (INSTALL == "auto" and os.path.isdir(WHEELS_DIR)):
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                          CODE_DIR, "--find-links", WHEELS_DIR, "tpurank"],
                         capture_output=True, text=True)
    print(pip.stdout[-3000:], pip.stderr[-3000:])
    pip.check_returncode()  # a missing package: rebuild the bundle with BUNDLE_ARGS="--extra NAME"
    importlib.invalidate_caches()

# %%
# %matplotlib inline
from ensemble import pipeline

weights = pipeline.find_weights(WEIGHTS)
preset = PRESET or pipeline.weights_preset(weights)
work = pipeline.default_work(WORK, f"notebook-{preset}")
if weights is not None:
    print("weights:", weights, "->", pipeline.install_weights(weights, work))
submission = SUBMISSION or str(work.parent / "submission.csv" if pipeline.on_kaggle()
                               else work / "submission.csv")
print("device:", pipeline.device_name())
run = pipeline.Run(data=str(pipeline.find_data(DATA, SAMPLE_DIR, SAMPLE_SCALE)), work=str(work),
                   preset=preset, seed=SEED, collections=COLLECTIONS, models=MODELS,
                   submission=submission, protocol=PROTOCOL, overrides=OVERRIDES)
run

# %% [markdown]
# ## Features of the valid and test graphs
# Normalisation statistics come from the weights (fitted on train when the models were trained).

# %%
pipeline.run_stages(run, ["validate", "features"])

# %% [markdown]
# ## Predict with every model

# %%
pipeline.predict(run)

# %% [markdown]
# ## Blend (weights fitted on the valid split: `PROTOCOL`), check, write `submission.csv`

# %%
path = pipeline.submit(run)
print(pipeline.submission_preview(path))

# %%
pipeline.plot_validation_scores(run.work)
