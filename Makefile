# Two commands do everything: `make reproduce` (the main job) and `make test` (the test suite).
# Both create or refresh the local virtual environment .venv from pyproject.toml first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# A read-only dataset mirror ($FLKIT_MIRROR, else ../shared/data beside the checkout, as in CI) is
# linked once into data/, the project's data root (`make data`), so that `flkit run`, papermill
# and JupyterLab started by hand find the same files as make. The tests also read it directly.
FLKIT_MIRROR ?= $(shell test -d ../shared/data && cd ../shared/data && pwd)
export FLKIT_MIRROR
PRESET ?= cpu
JOBS   ?= 1
# YES=1 starts `make reproduce` without the cost guard's question (asked over an hour or at paper)
YES    ?=
# The folder `make lab` opens: notebooks (the instructor's, with the answers) or student (`make
# student`'s copies without them).
LAB    ?= notebooks

.PHONY: venv data lab student test test-fast test-ui test-ray lint reproduce book smoke bench gpu-check gpu-kit clean-runs strip help

help:
	@echo "make reproduce   run every notebook at preset '$(PRESET)' and write runs/report/report.md + .html"
	@echo "                 (says the estimate and asks first when it is over an hour; YES=1 does not ask)"
	@echo "make test        unit tests + every notebook at preset 'smoke' (nbval) + a reproduce check"
	@echo "make test-fast   unit tests only"
	@echo "make data        link the dataset mirror (\$$FLKIT_MIRROR or ../shared/data) into data/"
	@echo "make lab         make data, then start JupyterLab on notebooks/ (LAB=student: on student/)"
	@echo "make student     the notebooks without answers in student/, for study: make lab LAB=student"
	@echo "make test-ui     every notebook at 'smoke' in JupyterLab in headless Chromium (needs chromium)"
	@echo "make test-ray    the Ray executor's tests, after installing the optional ray extra"
	@echo "make lint        ruff check and ruff format --check (notebooks included)"
	@echo "make book        the executed notebooks, results page and paper READMEs as a site (runs/book/_build/html)"
	@echo "make bench       engine benchmarks and the whole-round profile (writes benchmarks/results/*.json)"
	@echo "make gpu-check   the GPU check (benchmarks/gpu_check.py): notebooks, R1, inversion, packing, methods"
	@echo "make gpu-kit     what a lent GPU machine needs for the check (.gpu-kit; gpu_lease.sh runs it)"

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,notebooks,book]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (flkit)" >/dev/null
	touch $(STAMP)

# Symlinks only (nothing copied); links already there are kept. Without a mirror, data/ is left
# as it is (torchvision downloads into it when online).
data: $(STAMP)
	@if [ -n "$(FLKIT_MIRROR)" ]; then \
	  $(PY) -m flkit data link --mirror "$(FLKIT_MIRROR)" --root "$(CURDIR)/data" >/dev/null && \
	  echo "data/ links the dataset mirror $(FLKIT_MIRROR)"; \
	else echo "no dataset mirror (FLKIT_MIRROR unset, no ../shared/data): data/ used as it is"; fi

lab: data
	$(VENV)/bin/jupyter lab $(LAB)

# nbgrader's release step (answer cells emptied, hidden tests removed) into student/ (git-ignored).
student: $(STAMP)
	$(PY) -m flkit course student student

test: data
	FLKIT_PRESET=smoke FLKIT_RUNS_DIR=$(CURDIR)/runs/test $(PY) -m pytest -q tests notebooks --nbval-lax --nbval-current-env --durations=15

test-fast: data
	$(PY) -m pytest -q tests

# Shares `make test`'s run cache, so after it the notebooks load their runs instead of training.
# FLKIT_UI_SHOTS=<folder> also saves screenshots of each demo before and after its slider moves.
test-ui: data
	FLKIT_UI=1 FLKIT_RUNS_DIR=$(CURDIR)/runs/test $(PY) -m pytest -q -s tests/ui --durations=10

# Not part of `make test` or CI: about 3 min on a quiet 2-core machine (two Ray starts, a dozen
# fixture notebook runs), plus each of the six workbook notebooks at smoke on both executors,
# each training its own runs (00: about 2 min); Ray's helpers must come up within Ray's fixed
# start deadlines (15 s, 30 s), which a 2-core machine busy with another run misses; run it on a
# quiet machine.
test-ray: data
	$(PY) -m pip install -q -e ".[ray]"
	FLKIT_RUNS_DIR=$(CURDIR)/runs/test $(PY) -m pytest -q tests/test_reproduce_ray.py --durations=10

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

reproduce: data
	$(PY) -m flkit reproduce --preset $(PRESET) --jobs $(JOBS) --out runs/report $(if $(YES),--yes)

# The book (docs/book/README.md) renders the executed notebooks of BOOK_RUNS, `flkit reproduce
# --out` folders (a notebook from the first that holds it), without running anything. By default the smoke runs, made once when that folder
# has no finished run (its report.md is written last): about 4 min on 2 cores.
BOOK_SMOKE := runs/book-smoke
BOOK_RUNS  ?= $(BOOK_SMOKE)
BOOK_OUT   ?= runs/book
book: data
	@if [ "$(BOOK_RUNS)" = "$(BOOK_SMOKE)" ] && [ ! -f $(BOOK_SMOKE)/report.md ]; then \
	  $(PY) -m flkit reproduce --preset smoke --out $(BOOK_SMOKE); \
	fi
	$(PY) -m flkit.reproduce.book --runs $(BOOK_RUNS) --out $(BOOK_OUT)

# The whole-round breakdown of benchmarks/RESULTS.md (issue 16): one thread per process, as measured
# on the shared 2-core machine; BENCH_THREADS=2 for an idle one.
BENCH_THREADS ?= 1
bench: $(STAMP)
	FLKIT_THREADS=$(BENCH_THREADS) $(PY) benchmarks/profile_round.py --batch-size 10 --rounds 3
	FLKIT_THREADS=$(BENCH_THREADS) $(PY) benchmarks/profile_round.py --batch-size 50 --rounds 3
	$(PY) benchmarks/bench_engine.py --threads $(BENCH_THREADS)

# On one GPU, at most 8 minutes; GPU_CHECK_ARGS="--device cpu --tiny" checks the script itself.
GPU_CHECK_ARGS ?= --device cuda
gpu-check: data
	$(PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# What a lent GPU machine without a package index needs for the check, in .gpu-kit (ignored):
# run there with `bash benchmarks/gpu_lease.sh`.
gpu-kit: $(STAMP)
	$(PY) benchmarks/gpu_kit.py $(if $(FLKIT_MIRROR),--mirror $(FLKIT_MIRROR))

strip: $(STAMP)
	$(PY) tools/strip_notebooks.py

clean-runs:
	rm -rf runs
