"""The `backlog-scaler` console script enters through shared/local/launch.py: the CLI's modules are
imported with the collector paused, and what they built is frozen."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import gc, sys
import shared.local.launch as launch
sys.argv = ["backlog-scaler", "plan", "--help"]
try:
    launch.main()
except SystemExit as done:
    frozen = gc.get_freeze_count() > 0
    print("exit", done.code, "collector", gc.isenabled(), "frozen", frozen, file=sys.stderr)
"""


def test_the_console_script_is_the_launcher() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["backlog-scaler"] == "shared.local.launch:main"


def test_the_launcher_runs_the_command_with_the_collector_on_and_the_import_frozen() -> None:
    # Given a fresh interpreter, When the launcher runs `plan --help`
    ran = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=False)

    # Then the command ran (its help), the collector is back on, and the import's objects are frozen
    assert "--pods" in ran.stdout
    assert "exit 0 collector True frozen True" in ran.stderr
