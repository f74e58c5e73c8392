"""With tracing off (the default deployment), the handlers never load the X-Ray SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = (
    "import sys, functions.reconcile.handler as h; "
    "print('aws_xray_sdk' in sys.modules, type(h.tracer).__name__)"
)


@pytest.mark.parametrize(("disabled", "expected"), [("true", "False _NoTracer"), ("false", "True Tracer")])
def test_x_ray_sdk_is_loaded_only_when_tracing(disabled: str, expected: str) -> None:
    # Given a fresh interpreter with POWERTOOLS_TRACE_DISABLED as the CDK app sets it
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POWERTOOLS_TRACE_DISABLED": disabled}
    # When the reconcile handler is imported
    out = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    # Then the X-Ray SDK (and the Powertools Tracer) are there only with tracing on
    assert out.stdout.strip() == expected
