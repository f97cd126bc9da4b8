# tpurank — every entry point. `make run` and `make test` set everything up themselves.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PRESET ?= quick
SCALE ?= small
SEED ?= 0
KAGGLE_DATA := /kaggle/input/predict-ai-model-runtime

# On Kaggle (or with NO_VENV=1) use the interpreter as it is; elsewhere a local virtualenv.
ifneq ($(or $(NO_VENV),$(wildcard /kaggle/working)),)
  PY := $(PYTHON)
  STAMP :=
else
  PY := $(VENV)/bin/python
  STAMP := $(VENV)/.installed
endif

# Data root: DATA=..., else the Kaggle input when present, else the generated sample.
SAMPLE := data/sample-$(SCALE)
ifeq ($(DATA),)
  ifneq ($(wildcard $(KAGGLE_DATA)/npz_all),)
    DATA := $(KAGGLE_DATA)
  else
    DATA := $(SAMPLE)
    NEED_SAMPLE := $(SAMPLE)/.complete
  endif
endif
WORK ?= work/$(notdir $(abspath $(DATA)))-$(PRESET)
SUBMISSION ?= submissions/submission.csv
COMMON := --data $(DATA) --work $(WORK) --preset $(PRESET) --seed $(SEED)
# what the blend is fitted on: auto = the models' out-of-fold predictions (it stops, naming the
# model, when one lacks them); valid = the official valid split (e.g. MODELS=baseline)
PROTOCOL ?= auto

# The model registry (tpurank/registry.py, read with the plain interpreter: it needs no package):
# name:module:stages per model. `make run` trains and predicts every model named in MODELS, and
# predicts with every training-free one (the report's floor).
REGISTRY := $(shell $(PYTHON) -m tpurank.registry make)
comma := ,
field = $(word $(2),$(subst :, ,$(1)))
MODELS ?= $(shell $(PYTHON) -m tpurank.registry default-models)
RUN_MODELS := $(foreach e,$(REGISTRY),$(if $(or $(filter $(call field,$(e),1),$(subst $(comma), ,$(MODELS))),$(if $(findstring train,$(call field,$(e),3)),,x)),$(e)))
define model_stages
	$(foreach s,$(subst $(comma), ,$(call field,$(1),3)),$(call stage,$(call field,$(1),1)-$(s)) $(PY) -m $(call field,$(1),2) $(s) $(COMMON)
)
endef

.PHONY: help setup sample run results features gnn lgbm blend test test-slow bench bench-scale docs notebooks kaggle-bundle kaggle-push kaggle-rehearsal clean

help:
	@echo "make run    [DATA=root] [PRESET=quick|full] [SUBMISSION=csv]  whole pipeline -> submission"
	@echo "            [BUDGET=seconds] [PLAN_ARGS=...]                  the run planned to a time budget"
	@echo "            [MODELS=gnn,lgbm] [PROTOCOL=auto|valid]           what the blend uses and is fitted on"
	@echo "make test                                                     fast test suite (make test-slow: the rest)"
	@echo "make sample [SCALE=tiny|small|kaggle] [SAMPLE_ARGS=...]                generated data"
	@echo "make results [SEEDS='0 1 2']                                  make run per seed -> README tables"
	@echo "make docs                                                     rewrite every generated table"
	@echo "make kaggle-bundle [WEIGHTS=1] | kaggle-push [PUSH=1] | kaggle-rehearsal  the Kaggle route (docs/kaggle.md)"
	@echo "make test-slow | bench | bench-scale | notebooks | clean (clean deletes work/: trained models too)"

setup: $(STAMP)

# The packages the Kaggle image ships are installed at the versions it is assumed to have
# (kaggle/image_packages.txt, as pip constraints): the tests run on what the notebooks will meet.
IMAGE_PACKAGES := kaggle/image_packages.txt
$(VENV)/.installed: setup.cfg pyproject.toml $(IMAGE_PACKAGES)
	@$(PYTHON) -c 'import sys; v = sys.version.split()[0]; sys.exit(None if sys.version_info >= (3, 11) else f"tpurank needs Python >= 3.11 (the numpy and scipy pins of kaggle/image_packages.txt), not {v}: make setup PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip -c $(IMAGE_PACKAGES)
	# torch first; pip takes it from its configured index and find-links. On Linux PyPI's torch
	# is the CUDA build (GBs): for the CPU build alone pass TORCH_INDEX=https://download.pytorch.org/whl/cpu
	$(VENV)/bin/python -m pip install -q torch -c $(IMAGE_PACKAGES) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(VENV)/bin/python -m pip install -q -e '.[dev]' -c $(IMAGE_PACKAGES)
	touch $@

sample: $(STAMP) $(SAMPLE)/.complete

data/sample-%/.complete: | $(STAMP)
	$(PY) -m features.sample --out data/sample-$* --scale $* --seed $(SEED) $(SAMPLE_ARGS)

# MON=1: every stage of `make run` under tpurank.monitor: wall time, peak RSS and open files per
# stage appended to $(WORK)/stages.jsonl (MON="other command" to use another wrapper)
MONITOR := $(if $(filter 1,$(MON)),$(PY) -m tpurank.monitor --log $(WORK)/stages.jsonl,$(MON))
stage = $(if $(MONITOR),$(MONITOR) --stage $(1) --)

# BUDGET=S: the whole run planned to take S seconds (python -m ensemble run, docs/cli.md "A run
# planned to a time budget"): validate, features and a GNN probe measured first, predictions
# estimated from the measured speed, the rest to the models' training; the plan and its ETA printed,
# planned vs actual per stage in the report. PLAN_ARGS: more planner options, e.g. "--max-seeds 2".
# MON=1 records the stages as without a budget.
ifneq ($(BUDGET),)
run: $(STAMP) $(NEED_SAMPLE)
	$(PY) -m ensemble run --budget $(BUDGET) $(COMMON) --models $(MODELS) --protocol $(PROTOCOL) --submission $(SUBMISSION) $(if $(filter 1,$(MON)),--monitor-log $(WORK)/stages.jsonl) $(PLAN_ARGS)
else
run: $(STAMP) $(NEED_SAMPLE)
	$(call stage,validate) $(PY) -m features validate --data $(DATA) --skip-bad --report $(WORK)/validate_report.json
	$(call stage,features) $(PY) -m features build $(COMMON) --skip-bad-report $(WORK)/validate_report.json
	$(foreach e,$(RUN_MODELS),$(call model_stages,$(e)))
	$(call stage,blend) $(PY) -m ensemble blend $(COMMON) --models $(MODELS) --protocol $(PROTOCOL) --submission $(SUBMISSION)
	$(call stage,check) $(PY) -m ensemble check $(SUBMISSION) --data $(DATA)
	$(call stage,report) $(PY) -m ensemble report $(COMMON) --models $(MODELS) --submission $(SUBMISSION)
	$(call stage,score) $(PY) -m ensemble score $(SUBMISSION) --data $(DATA)
	$(call stage,real) $(PY) -m ensemble real --work $(WORK) --models $(MODELS) --skip-missing
endif

test: $(STAMP)
	@start=$$(date +%s); $(PY) -m pytest -m "not slow" -q -p no:cacheprovider; rc=$$?; \
	  echo "make test: $$(( $$(date +%s) - start )) s"; exit $$rc

test-slow: $(STAMP)
	@start=$$(date +%s); $(PY) -m pytest -m slow -q -p no:cacheprovider; rc=$$?; \
	  echo "make test-slow: $$(( $$(date +%s) - start )) s"; exit $$rc

# the quick benchmark set (benchmarks/__main__.py): a few minutes, no data needed; prints its figures
# and writes them to BENCH_OUT (benchmarks/quick.json is the committed one: then make docs)
BENCH_OUT ?= work/bench/quick.json
bench: $(STAMP)
	$(PY) -m benchmarks --out $(BENCH_OUT)

# kaggle-shaped data (features.sample.kaggle) -> generate / validate / build (RUN=1: the whole make run):
# time, RSS, fds, WORK size per stage; BENCH_ARGS e.g. "--data data/sample-kaggle --keep"
bench-scale: $(STAMP)
	$(PY) -m benchmarks.scale $(if $(GRAPH_FRACTION),--graph-fraction $(GRAPH_FRACTION)) $(if $(CONFIG_FRACTION),--config-fraction $(CONFIG_FRACTION)) $(if $(filter 1,$(RUN)),--run) $(BENCH_ARGS)

# the README results: `make run` once per seed (own WORK and submission folder each), then
# results/seeds.json (mean ± sd over seeds) and every generated table
SEEDS ?= 0 1 2
results: $(STAMP) $(NEED_SAMPLE)
	for s in $(SEEDS); do $(MAKE) run DATA=$(DATA) PRESET=$(PRESET) SEED=$$s WORK=$(WORK)-seed$$s \
	  SUBMISSION=submissions/seed$$s/submission.csv || exit 1; done
	$(PY) -m benchmarks.render capture-seeds $(foreach s,$(SEEDS),submissions/seed$(s)) \
	  --command "make results DATA=$(DATA) PRESET=$(PRESET) SEEDS='$(SEEDS)'" --out results/seeds.json
	$(PY) -m benchmarks.render render

# every marked results/benchmarks section of README.md, BENCHMARKS.md and docs/ from results/*.json,
# benchmarks/*.json (the generator: benchmarks/render)
docs: $(STAMP)
	$(PY) -m benchmarks.render render

# notebooks/*.py (jupytext percent format) -> notebooks/*.ipynb, cells unexecuted
notebooks: $(STAMP)
	$(PY) -m jupytext --to ipynb notebooks/eda.py notebooks/train.py notebooks/inference.py

# kaggle/build/{tpurank-code,tpurank-wheels,tpurank-train,tpurank-inference}: no trained model needed
# (the train kernel trains on Kaggle); WEIGHTS=1 also packs $(WORK)'s trained models as the
# tpurank-weights dataset (training elsewhere). Ids use KAGGLE_USERNAME; BUNDLE_ARGS e.g.
# "--extra PKG" or "--kaggle-python 3.12"
kaggle-bundle: $(STAMP)
	$(PY) kaggle/bundle.py $(if $(filter 1,$(WEIGHTS)),--weights-from $(WORK)) $(BUNDLE_ARGS)

# dry run: prints the Kaggle CLI commands; PUSH=1 runs them, each step once what it needs is
# ready; PUSH_ARGS e.g. "--create" (first upload), "--steps inference,submit", "--wait 36000"
kaggle-push: $(STAMP)
	$(PY) kaggle/push.py $(if $(filter 1,$(PUSH)),--execute,--dry-run) $(PUSH_ARGS)

# the whole Kaggle route offline (kaggle/rehearsal.py): a fresh bundle, the train kernel then the
# inference kernel in a sandbox standing in for /kaggle, both submissions checked; about 4 min
REHEARSAL_BUDGET ?= 120
kaggle-rehearsal: $(STAMP)
	$(PY) kaggle/rehearsal.py --budget $(REHEARSAL_BUDGET) $(REHEARSAL_ARGS)

clean:
	rm -rf work data/sample-* submissions/*.csv kaggle/build
