# Two commands for a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dev,dask]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m polars_hidden_rate.demo

test: lint typecheck pytest

lint: $(STAMP)
	$(PY) -m ruff check polars_hidden_rate tests benchmarks
	$(PY) -m ruff format --check polars_hidden_rate tests benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# pytest exits 5 when it collects no test; that fails the target like any other error.
pytest: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
