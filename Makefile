# Two commands for a fresh clone: `make demo` and `make test`. `make test-floor` runs the suite
# again at the oldest dependencies pyproject.toml allows (see CONTRIBUTING.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-floor lint typecheck pytest docs bench peers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dev,dask,plot,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/hidden-rate demo

test: lint typecheck pytest docs

# ruff, and the layering of CONTRIBUTING.md as a contract ([tool.importlinter] in pyproject.toml).
lint: $(STAMP)
	$(PY) -m ruff check polars_hidden_rate tests benchmarks tools
	$(PY) -m ruff format --check polars_hidden_rate tests benchmarks tools
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(PY) -m mypy

# pytest exits 5 when it collects no test; that fails the target like any other error.
# `make test` runs everything, each Hypothesis property at its full example count (profile
# `ci`); `make test-fast` skips the slow tests and runs a tenth of the examples (`dev`).
pytest: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest

test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=dev $(PY) -m pytest -m "not slow"

# The docs site, built strictly: a broken link, a bad docstring, a raw Sphinx role or an asset
# from another host fails the build (tools/docs_site.py, the hook). Not --quiet: it drops the
# warnings before strict mode counts them, so nothing failed. MathJax and the search shim come
# from npm, where their authors publish them, pinned with their hashes in
# tools/site_assets/package-lock.json; the site serves them. tools/docs_figures.py first writes
# the demo's plots, k table and privacy report into docs/generated/ (not committed: this venv
# has matplotlib, so they are remade).
SITE_ASSETS := tools/site_assets/node_modules/.package-lock.json

$(SITE_ASSETS): tools/site_assets/package.json tools/site_assets/package-lock.json
	npm ci --prefix tools/site_assets --no-audit --no-fund --silent

docs: $(STAMP) $(SITE_ASSETS)
	$(PY) tools/docs_figures.py > /dev/null
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The suite at the floors: a second venv with each runtime dependency pinned `==` to its `>=`
# floor in pyproject.toml (tools/floors.py derives the pins, so they cannot drift) and the test
# extras at their newest releases that install beside those pins. pytest only: the lint, type
# and docs tools need not run on old releases. The venv is rebuilt whole when pyproject.toml
# changes, so nothing newer lingers in it. `timeout` turns a hang (a deadlock in an old
# release) into a failure rather than a stalled CI run; the whole suite takes about 12
# minutes here, so the bound leaves room for a loaded machine.
FLOOR_VENV ?= .venv-floor
FLOOR_PY := $(FLOOR_VENV)/bin/python
FLOOR_STAMP := $(FLOOR_VENV)/.installed
FLOOR_TIMEOUT ?= 1800

$(FLOOR_STAMP): pyproject.toml tools/floors.py
	rm -rf $(FLOOR_VENV)
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_PY) -m pip install --quiet --upgrade pip
	$(PYTHON) tools/floors.py > $(FLOOR_VENV)/constraints.txt
	$(FLOOR_PY) -m pip install --quiet -c $(FLOOR_VENV)/constraints.txt -e ".[test,dask,plot]"
	$(FLOOR_PY) tools/floors.py --check
	touch $(FLOOR_STAMP)

test-floor: $(FLOOR_STAMP)
	$(FLOOR_PY) tools/floors.py --check
	HYPOTHESIS_PROFILE=ci timeout $(FLOOR_TIMEOUT) $(FLOOR_PY) -m pytest -p no:cacheprovider

# The benchmark peers live in the `bench` extra. Options go through BENCH_ARGS, e.g.
# make bench BENCH_ARGS="--sizes 1e4,1e5 --dims 2,5,20"   (see docs/performance.md)
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m benchmarks.bench_counts $(BENCH_ARGS)

# The peers as oracles: anonymeter and SDMetrics in a venv of their own (their pins of numpy
# and pandas conflict with the package's, so never in .venv, nor in `make test`'s install).
# tests/measures/test_linkability.py and tests/measures/test_baseline.py run them through it by
# subprocess (tests/peer_oracle.py) and skip, saying why, while it is absent (fail with
# PEERS_REQUIRED=1, as .ci/run runs them after `make peers`); PEERS_PYTHON names another.
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP):
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet anonymeter==1.1.0 sdmetrics==0.32.0
	touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

clean:
	rm -rf $(VENV) $(FLOOR_VENV) $(PEERS_VENV) site docs/generated tools/site_assets/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
