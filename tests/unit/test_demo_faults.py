"""The demo's GPU fault: the Node as a node with a failed GPU reports itself, read by the real parser
and judged by the planner's health rules."""

from __future__ import annotations

import copy
from datetime import timedelta

from shared.config import RepairConfig
from shared.formats.kubernetes import node_from_json
from shared.local.demo.faults import FAULT_CONDITION, _fails
from shared.planner.health import GPUS_LOST, node_health
from tests.builders import NOW, node


def test_a_failed_gpu_reads_as_the_condition_and_a_device_dropped_from_allocatable() -> None:
    # Given a healthy 8-GPU Node as `kubectl get node -o json` shows it
    raw = node("n1", "i-1")
    # When its GPU fails at NOW
    broken = copy.deepcopy(raw)
    _fails(NOW)(broken)
    parsed = node_from_json(broken)
    # Then capacity keeps 8 GPUs, allocatable has 7, and AcceleratedHardwareReady is False since NOW
    assert parsed.capacity is not None and parsed.capacity.gpus == 8
    assert parsed.allocatable.gpus == 7 and parsed.lost_devices.gpus == 1
    condition = next(c for c in parsed.conditions if c.type == FAULT_CONDITION)
    assert (condition.status, condition.changed_at) == ("False", NOW)
    # and the planner's health rules see both signals, due after the toleration
    health = node_health(parsed, None, None, RepairConfig(toleration_seconds=60), {}, NOW)
    assert {s.condition for s in health.signals} == {f"{FAULT_CONDITION}=False", GPUS_LOST}
    assert not health.due(NOW + timedelta(seconds=59))
    assert health.due(NOW + timedelta(seconds=60))
    # the original Node was not touched, and the healthy one reads healthy
    assert not node_health(node_from_json(raw), None, None, RepairConfig(), {}, NOW).signals
