# Two commands for a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dev,dask,plot,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/hidden-rate demo

test: lint typecheck pytest docs

lint: $(STAMP)
	$(PY) -m ruff check polars_hidden_rate tests benchmarks
	$(PY) -m ruff format --check polars_hidden_rate tests benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# pytest exits 5 when it collects no test; that fails the target like any other error.
pytest: $(STAMP)
	$(PY) -m pytest

# The docs site, built strictly: a broken link or a bad docstring fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The benchmark peers live in the `bench` extra. Options go through BENCH_ARGS, e.g.
# make bench BENCH_ARGS="--sizes 1e4,1e5 --dims 2,5,20"   (see docs/performance.md)
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m benchmarks.bench_counts $(BENCH_ARGS)

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
