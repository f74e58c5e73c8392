# One entry point per job. `make test` and `make demo` set up .venv themselves on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The light install of `make demo` and `make plan-example`: the package and the local run (moto, plot).
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test demo plan-example lint typecheck unit native bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

# dev includes demo: one dev install satisfies both stamps.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

# checkov pins its own boto3 (==1.35.x, ours is ~=1.44): it lives in a virtualenv of its own and
# runs as a CLI on the synthesized template (tests/infra/test_scanners.py).
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV): | $(BIN)/python
	$(PY) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet checkov==3.3.30

# The planner and the replay compiled by mypyc for the local tools (shared/local/native.py): built
# unless the build on disk is current (the same sources, and the modules they import, interpreter
# and mypy: the build decides, so a deleted module counts too); the sources run until it is
# (shared/native_guard.py).
native: $(STAMP)
	$(BIN)/python -m shared.local.native

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy shared functions

# Twice: on the compiled planner (what the CLI and the replay run), then on its sources (what Lambda
# runs, and where the tests that patch planner functions run).
unit: $(STAMP) $(CHECKOV) native
	$(BIN)/lint-imports
	BACKLOG_SCALER_COMPILED_PASS=1 $(BIN)/pytest -n 2
	BACKLOG_SCALER_PURE=1 $(BIN)/pytest -n 2

test: lint typecheck unit

# The local run: moto + the fake Kubernetes API server + the real handlers, in accelerated time.
demo: $(DEMO_STAMP)
	$(BIN)/python -m shared.local.demo $(DEMO_ARGS)

# The decision engine alone, on the example kubectl/aws dumps in examples/.
plan-example: $(DEMO_STAMP)
	$(BIN)/backlog-scaler plan --pods examples/pods.json --nodes examples/nodes.json --objects examples/objects.json \
		--asgs examples/asgs.json --config examples/config.yaml --state examples/state.json \
		--now 2026-12-02T12:00:00Z

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py
	$(BIN)/python bench/list_bench.py
	$(BIN)/python bench/latency_bench.py
	$(BIN)/python bench/scale_bench.py
	$(if $(TRACE),$(BIN)/python bench/sim_bench.py --trace $(TRACE) --scenario one-group,@echo "sim_bench: skipped (give TRACE=path/to/philly.csv)")
	$(if $(TRACE),$(BIN)/python bench/placement_bound.py $(TRACE),@echo "placement_bound: skipped (give TRACE=path/to/philly.csv)")

clean:
	rm -rf $(VENV) cdk.out .mypy_cache .ruff_cache build shared/_native.json
	find shared -name "*.so" -delete; rm -f *__mypyc.*.so
