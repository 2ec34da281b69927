# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-10)
WORKSPACE ?= workspace
PORT ?= 8501

.PHONY: run test install browser postgres lint bench demo clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

## make run: set up, build the demo workspace when absent, serve http://localhost:$(PORT)
run: install
	$(BIN)/faillab demo --workspace $(WORKSPACE) --if-missing
	$(BIN)/faillab serve --workspace $(WORKSPACE) --port $(PORT)

## make test: set up everything the tests need (chromium, PostgreSQL) and run the whole suite
test: install browser postgres
	$(BIN)/python -m pytest

browser:
	@bash scripts/ensure_chromium.sh

postgres:
	@bash scripts/ensure_postgres.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

demo: install
	$(BIN)/faillab demo --workspace $(WORKSPACE)

BENCH_WS ?= /tmp/faillab-bench-ws

bench: install
	$(BIN)/python bench/bench_import.py --keep $(BENCH_WS)
	$(BIN)/python bench/bench_viewer.py --workspace $(BENCH_WS)
	$(BIN)/python bench/bench_stats.py
	$(BIN)/python bench/bench_prelabel.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
