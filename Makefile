# eqarena — the two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")
VENV := .venv

.PHONY: demo test test-fast test-unit check bench setup setup-test clean

# Tests run in parallel processes (pytest-xdist), each with its own Prefect API; the tests sharing a
# module-scoped fixture stay in one process (tests/conftest.py). One process more than the cores (at
# most 4): many tests wait on subprocesses, servers and rate limits.
WORKERS := $(shell python3 -c "import os; print(min(4, (os.cpu_count() or 1) + 1))")
PARALLEL := -n $(WORKERS) --dist loadgroup

$(UV):
	python3 -m pip install --user --quiet uv

# The main job needs only the project's own dependencies; --inexact keeps the test tools if a
# `make test` installed them before. Bytecode is compiled at install (--compile-bytecode, and
# compileall for eqarena itself): a command then starts without compiling thousands of modules,
# seconds on every run where Python may not write its caches (PYTHONDONTWRITEBYTECODE).
$(VENV)/.synced-main: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --no-default-groups --inexact --compile-bytecode
	$(VENV)/bin/python -m compileall -q eqarena
	touch $@

# The tests add the dev group (pytest, Gambit, cvxpy, ...), the local-LLM group (a small GGUF model) and
# the check group (ruff, mypy).
$(VENV)/.synced-test: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --group dev --group local-llm --group check --compile-bytecode
	$(VENV)/bin/python -m compileall -q eqarena
	touch $@

setup: $(VENV)/.synced-main
setup-test: $(VENV)/.synced-test

## demo: ingest the bundled data, rate it and write the HTML report
demo: setup
	$(UV) run --frozen --no-sync eqarena run

## test: the whole test suite (what CI runs)
test: setup-test
	$(UV) run --frozen --no-sync pytest $(PARALLEL)

## test-fast: unit and solver tests, no Prefect API, no subprocesses, no long statistical checks
test-fast: setup-test
	$(UV) run --frozen --no-sync pytest $(PARALLEL) -m "not integration and not slow"

## test-unit: the unit tests alone (marker unit: seconds each, no Prefect API, no server, small games only)
test-unit: setup-test
	$(UV) run --frozen --no-sync pytest $(PARALLEL) -m "unit and not integration and not slow"

## check: lint and format (ruff), and types (mypy: no error beyond those in mypy-baseline.txt)
check: setup-test
	$(UV) run --frozen --no-sync ruff check eqarena tests bench
	$(UV) run --frozen --no-sync ruff format --check eqarena tests bench
	$(UV) run --frozen --no-sync mypy | $(UV) run --frozen --no-sync mypy-baseline filter --baseline-path mypy-baseline.txt

bench: setup-test
	$(UV) run --frozen --no-sync python bench/solvers.py

clean:
	rm -rf $(VENV) out eqarena.duckdb
