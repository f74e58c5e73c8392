# One entry point per job. `make test` and `make demo` set up .venv themselves on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck unit bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy shared functions

unit: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2

test: lint typecheck unit

demo: $(STAMP)
	$(BIN)/backlog-scaler plan --pods examples/pods.json --nodes examples/nodes.json \
		--asgs examples/asgs.json --config examples/config.yaml --state examples/state.json \
		--now 2026-12-02T12:00:00Z

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) cdk.out .mypy_cache .ruff_cache
