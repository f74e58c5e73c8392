"""The replay's figures on a real trace slice, pinned: a speed-up of the simulator or the planner must
leave every figure of the report as it was (issue 25).

The slice is the first 4,000 rows of the Philly trace (tests/fixtures/traces/README.md), replayed
with the shipped example configs: one group (least-allocated scoring, attrition on) and the right-sized
pools. The pinned reports are tests/fixtures/sim/*.json; the figures that measure the replay itself
(wall time, jobs per second, planner runs and skipped reconciles) are not figures of the outcome and
are left out. Regenerate a pinned report only for a change that is meant to change the outcome:
`python -m tests.unit.test_sim_regression` rewrites them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shared.config import load_config
from shared.local.sim.engine import Replay, SimOptions
from shared.local.sim.report import build_report
from shared.local.sim.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "traces" / "philly_4000.csv"
PINNED = ROOT / "tests" / "fixtures" / "sim"
CASES = {
    "one_group": ("examples/sim-config.yaml", SimOptions()),
    "pools": ("examples/sim-config-pools.yaml", SimOptions(right_size=True)),
}
# How the replay ran, not what it found.
VOLATILE = ("wall_seconds", "jobs_per_second", "planner_runs", "reconciles_skipped")


def replay_report(case: str, **options: Any) -> dict[str, Any]:
    config_path, base = CASES[case]
    config = load_config(ROOT / config_path)
    trace = load_trace(TRACE, "philly")
    sim_options = replace(base, **options)
    result = Replay(trace, config, sim_options, config_name=config_path).run()
    report = build_report(result)
    for key in VOLATILE:
        report["simulation"].pop(key)
    return report


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_report_of_the_philly_slice_is_the_pinned_one(case: str) -> None:
    # Given the pinned report of the slice under the example config
    pinned = json.loads((PINNED / f"philly_4000_{case}.json").read_text(encoding="utf-8"))

    # When the slice is replayed
    report = replay_report(case)

    # Then every figure is the same, to the last digit
    assert report == pinned


if __name__ == "__main__":  # pragma: no cover - regenerates the pinned reports
    for name in CASES:
        document = replay_report(name)
        path = PINNED / f"philly_4000_{name}.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path}")
