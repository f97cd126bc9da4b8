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
# # TpuGraphs at a glance
#
# Graph sizes, opcodes, configs per graph, how much the runtime of a graph depends on its
# config (default vs random search), and what k-hop pruning keeps. Everything streams from the
# npz files (`features.eda`): a full Kaggle download is summarised without loading a
# `node_config_feat` (set `MAX_PER_GROUP` to look at a subset faster).
#
# Data: `DATA` when given, else `/kaggle/input/predict-ai-model-runtime` on Kaggle, else the
# generated sample (`SAMPLE_DIR`, created on first use).

# %% tags=["parameters"]
DATA = None  # data root (Kaggle layout); None: Kaggle input, else the generated sample
SAMPLE_DIR = "../data/sample-tiny"  # where the sample is generated when no data is found
SAMPLE_SCALE = "tiny"  # tiny | small
COLLECTIONS = "all"  # e.g. "layout:xla:random,tile:xla"
MAX_PER_GROUP = None  # at most this many graphs per collection/split (None: all)
PRUNE_HOPS = (1, 2, 3)  # neighbourhood sizes whose pruning effect is shown
PRUNE_MAX_PER_GROUP = 20  # layout graphs per collection for the pruning plot
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
from features import eda
from ensemble.pipeline import find_data

root = find_data(DATA, sample_dir=SAMPLE_DIR, scale=SAMPLE_SCALE)
print("data:", root)

# %% [markdown]
# ## Graphs per collection and split

# %%
stats = eda.graph_stats(root, COLLECTIONS, max_per_group=MAX_PER_GROUP)
eda.collection_summary(stats)

# %% [markdown]
# ## Graph sizes
# nlp graphs are smaller than xla ones; tile graphs are single fused kernels.

# %%
eda.plot_graph_sizes(stats)

# %% [markdown]
# ## Opcodes (train split)
# Red: the share of configurable nodes (layout collections).

# %%
opcodes = eda.opcode_counts(root, COLLECTIONS, max_per_group=MAX_PER_GROUP)
eda.plot_opcode_histogram(opcodes)

# %% [markdown]
# ## Configs per graph

# %%
eda.plot_configs_per_graph(stats)

# %% [markdown]
# ## Runtime spread per collection
# `max / min` runtime per graph: the *random* searches spread wide, the *default* ones cluster
# tightly around the compiler's choice, which makes them much harder to rank.

# %%
eda.plot_runtime_spread(stats)

# %% [markdown]
# ## Pruning effect
# Nodes kept when only the configurable nodes and their k-hop neighbourhood are kept.

# %%
pruned = eda.pruning_effect(root, PRUNE_HOPS, COLLECTIONS, max_per_group=PRUNE_MAX_PER_GROUP)
eda.plot_pruning(pruned)

# %%
eda.pruning_summary(pruned)
