"""Local entry points: the `backlog-scaler` CLI, the simulator, the local run (demo) and the fake
Kubernetes API server that the demo and the tests start.

Nothing the Lambda functions import lives here, and nothing outside this package imports it at run
time (an import-linter contract in pyproject.toml enforces it): the Lambda asset excludes exactly
this folder (cdk/bundling.py).
"""
