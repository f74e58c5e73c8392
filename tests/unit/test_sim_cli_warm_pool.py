"""`backlog-scaler simulate --warm-pool GROUP=N`: the group's ASG keeps N warm instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.local.cli import main

ROOT = Path(__file__).resolve().parents[2]
BASELINE = str(ROOT / "examples" / "sim-config.yaml")
TWO_JOBS = str(ROOT / "tests" / "fixtures" / "traces" / "two_whole_node_jobs.csv")


def _waits(tmp_path: Path, *extra: str) -> dict[str, float]:
    args = ["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(tmp_path), "--no-plot"]
    assert main([*args, *extra]) == 0
    return dict(json.loads((tmp_path / "report.json").read_text())["wait_seconds"])


def test_a_warm_instance_makes_one_of_two_launches_register_sooner(tmp_path: Path) -> None:
    # Given two whole-node jobs at once and a 300 s cold boot
    # When replayed without a warm pool, Then both wait the full boot
    cold = _waits(tmp_path / "cold")
    assert cold["max"] == cold["mean"] == 300
    # When v100 keeps one warm instance that registers in 45 s
    warm = _waits(tmp_path / "warm", "--warm-pool", "v100=1", "--warm-boot-seconds", "45")
    # Then one job waits 45 s and the other the cold boot
    assert (warm["mean"], warm["max"]) == ((45 + 300) / 2, 300)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--warm-pool", "v100"], "--warm-pool: expected GROUP=N"),
        (["--warm-pool", "v100=-1"], "--warm-pool: expected GROUP=N"),
        (["--warm-pool", "h100=2"], "warm pools of unknown group(s): h100"),
    ],
)
def test_bad_warm_pools_exit_2(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, *extra]) == 2
    assert message in capsys.readouterr().err
