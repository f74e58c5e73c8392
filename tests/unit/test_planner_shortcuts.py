"""The planner's shortcuts decide what the full reading decides, on every plan of a replay.

Places that answer most nodes of most runs without the full work (they are what makes the replay
fast, issue 25): a settled node is HEALTHY without reading its signals (`health._calm`); rotation
judges only marked nodes when nothing else can make one due (`rotation._may_be_due`); scale-up
without a backlog counts booting nodes and launches as spare without building bins
(`scale_up._without_backlog`); with a backlog of plain pods, a registered node without room for any
of them joins neither the room nor the simulation (`scale_up.least_request`); attrition ranks the
marked candidates, or the others, only when their order can change which are marked or lifted
(`attrition._Prefix.order_matters`). Each is checked
against the full reading on every snapshot of a
replay of the Philly slice with GPU faults injected (nodes go unhealthy, are cordoned, replaced,
recover), under both example configs (one keeping headroom nodes, which counts the spare booting
nodes and launches): the two plans must be equal, field by field.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.config import ScalerConfig, parse_config
from shared.domain.model import Snapshot
from shared.domain.plan import Plan
from shared.local.sim.engine import Replay, SimOptions
from shared.local.sim.trace import load_trace
from shared.planner import plan
from tests.native import needs_sources

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "traces" / "philly_4000.csv"
JOBS = 250

attrition = importlib.import_module("shared.planner.attrition")
health = importlib.import_module("shared.planner.health")
rotation = importlib.import_module("shared.planner.rotation")
scale_up = importlib.import_module("shared.planner.scale_up")


def _config(path: str, headroom: int) -> ScalerConfig:
    """An example config, its groups keeping `headroom` spare nodes (what counts booting ones)."""
    document = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    for group in document["node_groups"]:
        group["headroom_nodes"] = headroom
    return parse_config(document)


@needs_sources
@pytest.mark.parametrize(
    ("config_path", "headroom", "options"),
    [
        (
            "examples/sim-config.yaml",
            2,
            SimOptions(gpu_failures_per_gpu_day=0.05, fault_seed=7, gpu_delay_seconds=120),
        ),
        ("examples/sim-config-pools.yaml", 0, SimOptions(right_size=True, gpu_failures_per_gpu_day=0.05)),
    ],
)
def test_every_plan_of_a_replay_is_the_full_readings_plan(
    config_path: str, headroom: int, options: SimOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = load_trace(TRACE, "philly")
    trace = replace(trace, jobs=trace.jobs[:JOBS])
    seen = {"plans": 0, "unhealthy": 0, "backlog": 0, "idle": 0, "least": 0, "unranked": 0}

    least_request = scale_up.least_request

    def counted(units: Any, ctx: Any) -> Any:
        least = least_request(units, ctx)
        seen["least"] += least is not None
        return least

    monkeypatch.setattr(scale_up, "least_request", counted)

    order_matters = attrition._Prefix.order_matters

    def ranks(prefix: Any, found: Any, marked: bool) -> bool:
        matters = order_matters(prefix, found, marked)
        seen["unranked"] += bool(found) and not matters
        return matters

    monkeypatch.setattr(attrition._Prefix, "order_matters", ranks)

    def both(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Plan:
        fast = plan(snapshot, config, now)
        with monkeypatch.context() as full_reading:
            full_reading.setattr(health, "_calm", lambda node: False)
            full_reading.setattr(rotation, "_may_be_due", lambda *args: True)
            full_reading.setattr(
                scale_up,
                "_without_backlog",
                lambda ctx, result, booting: scale_up._place(ctx, result, [], booting, frozenset()),
            )
            full_reading.setattr(scale_up, "least_request", lambda units, ctx: None)
            full_reading.setattr(attrition._Prefix, "order_matters", lambda prefix, found, marked: True)
            full = plan(snapshot, config, now)
        assert fast == full, f"the plans at {now.isoformat()} differ"
        seen["plans"] += 1
        seen["unhealthy"] += bool(fast.repair)
        pending = any(not p.node_name for p in snapshot.pods)
        seen["backlog" if pending else "idle"] += 1
        return fast

    result = Replay(trace, _config(config_path, headroom), options, planner=both).run()

    assert result.started == JOBS
    # The comparison covered what the shortcuts skip and what they do not.
    assert all(seen.values()), seen
