# Two commands do everything: `make reproduce` (the main job) and `make test` (the test suite).
# Both create or refresh the local virtual environment .venv from pyproject.toml first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# A read-only dataset mirror beside the checkout (as in CI) is used when FLKIT_DATA is not set.
FLKIT_DATA   ?= $(shell test -d ../shared/data && cd ../shared/data && pwd)
FLKIT_MIRROR ?= $(shell test -d ../shared/data && cd ../shared/data && pwd)
export FLKIT_DATA FLKIT_MIRROR
PRESET ?= cpu
JOBS   ?= 1

.PHONY: venv test test-fast lint reproduce smoke bench clean-runs strip help

help:
	@echo "make reproduce   run every notebook at preset '$(PRESET)' and write runs/report/report.md + .html"
	@echo "make test        unit tests + every notebook at preset 'smoke' (nbval) + a reproduce check"
	@echo "make test-fast   unit tests only"
	@echo "make lint        ruff check and ruff format --check (notebooks included)"
	@echo "make bench       engine benchmarks and the whole-round profile (writes benchmarks/results/*.json)"

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,notebooks]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (flkit)" >/dev/null
	touch $(STAMP)

test: $(STAMP)
	FLKIT_PRESET=smoke FLKIT_RUNS_DIR=$(CURDIR)/runs/test $(PY) -m pytest -q tests notebooks --nbval-lax --nbval-current-env --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -q tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

reproduce: $(STAMP)
	$(PY) -m flkit reproduce --preset $(PRESET) --jobs $(JOBS) --out runs/report

# The whole-round breakdown of benchmarks/RESULTS.md (issue 16): one thread per process, as measured
# on the shared 2-core machine; BENCH_THREADS=2 for an idle one.
BENCH_THREADS ?= 1
bench: $(STAMP)
	FLKIT_THREADS=$(BENCH_THREADS) $(PY) benchmarks/profile_round.py --batch-size 10 --rounds 3
	FLKIT_THREADS=$(BENCH_THREADS) $(PY) benchmarks/profile_round.py --batch-size 50 --rounds 3
	$(PY) benchmarks/bench_engine.py --threads $(BENCH_THREADS)

strip: $(STAMP)
	$(PY) tools/strip_notebooks.py

clean-runs:
	rm -rf runs
