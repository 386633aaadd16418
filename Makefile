# Lethe research harness. Everything a fresh machine needs is installed from here.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1
, := ,

.PHONY: install data reproduce test bench summary clean-results

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip resolves a CUDA build of several GB
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

DATASETS ?= locomo,lethebench,techqa,ultradomain_cs,ultradomain_mix
METHODS ?= window,bm25,vector

data: install
	$(PY) -m experiments.build_data $(subst $(,), ,$(DATASETS))

# Build data, run the baselines on every dataset (resumable: finished jobs are skipped),
# fill the dataset cards' difficulty tables, print results.
reproduce: data
	$(PY) -m experiments.run -m dataset=$(DATASETS) method=$(METHODS) run.progress=$${LETHE_PROGRESS:-true}
	$(PY) -m experiments.difficulty $(subst $(,), ,$(DATASETS)) run.progress=false
	$(PY) -m experiments.summary

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) -m experiments.bench

summary: install
	$(PY) -m experiments.summary
