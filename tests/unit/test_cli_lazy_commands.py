"""`backlog-scaler plan` starts without the other commands' packages (issue 25: a plan process within
1.7 x a bare json.load): the simulator, the demo and the kubernetes client + boto3 that `status` reads
the cluster with are loaded only for their own command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("shared.local.sim.engine", "shared.local.demo.driver", "kubernetes.client", "boto3")


def _loaded_after(argv: list[str]) -> dict[str, bool]:
    code = (
        "import json, sys\n"
        "from shared.local.cli import _command_of, build_parser\n"
        f"build_parser(_command_of({argv!r}))\n"
        f"print(json.dumps({{m: m in sys.modules for m in {list(HEAVY)!r}}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(out.stdout))


def test_the_plan_command_loads_no_other_commands_package() -> None:
    # When the parser is built for `plan`
    loaded = _loaded_after(["plan", "--pods", "pods.json"])
    # Then none of the other commands' heavy modules was imported
    assert not any(loaded.values()), loaded


def test_a_command_of_another_package_loads_that_package() -> None:
    # When the parser is built for `simulate`
    loaded = _loaded_after(["simulate", "--trace", "t.csv"])
    # Then the simulator is there, and the cluster client of `status` is not
    assert loaded["shared.local.sim.engine"]
    assert not loaded["kubernetes.client"]


def test_help_and_an_unknown_command_list_every_command() -> None:
    from shared.local.cli import COMMAND_MODULES, _command_of

    # A mistyped or missing command builds the whole parser, so argparse can list every choice
    assert _command_of(["simlate"]) is None
    assert _command_of(["--help"]) is None
    assert _command_of(["--version"]) is None
    assert {_command_of([name]) for name in COMMAND_MODULES} == set(COMMAND_MODULES)
