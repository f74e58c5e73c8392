# One entry point per job. `make test` and `make demo` set up .venv themselves on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo plan-example lint typecheck unit bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# checkov pins its own boto3 (==1.35.x, ours is ~=1.44): it lives in a virtualenv of its own and
# runs as a CLI on the synthesized template (tests/infra/test_scanners.py).
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV): | $(BIN)/python
	$(PY) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet checkov==3.3.30

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy shared functions

unit: $(STAMP) $(CHECKOV)
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2

test: lint typecheck unit

# The local run: moto + the fake Kubernetes API server + the real handlers, in accelerated time.
demo: $(STAMP)
	$(BIN)/python -m shared.demo $(DEMO_ARGS)

# The decision engine alone, on the example kubectl/aws dumps in examples/.
plan-example: $(STAMP)
	$(BIN)/backlog-scaler plan --pods examples/pods.json --nodes examples/nodes.json --objects examples/objects.json \
		--asgs examples/asgs.json --config examples/config.yaml --state examples/state.json \
		--now 2026-12-02T12:00:00Z

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py
	$(BIN)/python bench/list_bench.py
	$(BIN)/python bench/latency_bench.py
	$(BIN)/python bench/sim_bench.py --scenario one-group

clean:
	rm -rf $(VENV) cdk.out .mypy_cache .ruff_cache
