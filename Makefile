# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml | sha1sum | cut -c1-10)
APP_STAMP := $(VENV)/.installed-app-$(HASH)
DEV_STAMP := $(VENV)/.installed-dev-$(HASH)
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
WORKSPACE ?= workspace
PORT ?= 8501
# Extra `faillab demo` options for `make run` (a test builds a small demo with them).
DEMO_ARGS ?=

.PHONY: run test install install-dev browser postgres lint docs bench demo clean

# `make run` installs only what the app needs; `make test` adds the developer tools on top.
$(APP_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	@rm -f $(VENV)/.installed-app-*
	@touch $@

$(DEV_STAMP): $(APP_STAMP)
	$(PIP) -e '.[dev]'
	@rm -f $(VENV)/.installed-dev-*
	@touch $@

install: $(APP_STAMP)

install-dev: $(DEV_STAMP)

## make run: set up, build the demo workspace when absent (with offline heuristic pre-labels, so
## Annotate shows them), serve http://localhost:$(PORT)
run: install
	@if $(BIN)/faillab demo --workspace $(WORKSPACE) --if-missing --json $(DEMO_ARGS) | grep -q '"skipped": true'; \
	then echo "workspace $(WORKSPACE) already has trajectories; leaving it as it is"; \
	else echo "demo workspace $(WORKSPACE) built; pre-labelling its failures offline (heuristic)"; \
	  $(BIN)/faillab prelabel --workspace $(WORKSPACE) --labeler heuristic --json; fi
	$(BIN)/faillab serve --workspace $(WORKSPACE) --port $(PORT)

## make test: set up everything the tests need (chromium, PostgreSQL) and run the whole suite,
## spread over TEST_WORKERS processes (pytest-xdist; TEST_WORKERS=0 runs it in one)
TEST_WORKERS ?= 2
test: install-dev browser postgres
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

browser:
	@bash scripts/ensure_chromium.sh

postgres:
	@bash scripts/ensure_postgres.sh

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## make docs: regenerate the generated reference files (docs/cli.md, docs/settings.md,
## data/trajectory.schema.json); a test fails when they are stale
docs: install
	$(BIN)/python -m faillab.cli.reference_docs

demo: install
	$(BIN)/faillab demo --workspace $(WORKSPACE)

BENCH_WS ?= /tmp/faillab-bench-ws

bench: install-dev
	$(BIN)/python bench/bench_import.py --keep $(BENCH_WS)
	$(BIN)/python bench/bench_viewer.py --workspace $(BENCH_WS)
	$(BIN)/python bench/bench_stats.py
	$(BIN)/python bench/bench_prelabel.py
	$(BIN)/python bench/bench_trace_import.py --n 2000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
