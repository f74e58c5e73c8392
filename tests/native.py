"""Whether the tests run the planner compiled by mypyc (`make native`) or its sources."""

from __future__ import annotations

import importlib

import pytest

from shared.native_guard import is_compiled

# Set by `make test` for its compiled pass: there the planner must be the compiled one.
COMPILED_PASS_VARIABLE = "BACKLOG_SCALER_COMPILED_PASS"
# The module, not the function `shared.planner.plan` that the package exports under the same name.
PLANNER_COMPILED = is_compiled(importlib.import_module("shared.planner.plan"))
# Tests that replace the planner's module functions (monkeypatch) reach only its sources: mypyc's
# compiled modules call each other directly. `make test` runs the suite twice, the second time on the
# sources (BACKLOG_SCALER_PURE=1, as Lambda runs them), where these run.
needs_sources = pytest.mark.skipif(
    PLANNER_COMPILED, reason="patches planner functions: runs in the pass on the sources (make test)"
)
