"""Node health signals, read each run (pure): what says a node is broken, since when, for how long
it is tolerated.

Signals, each with its toleration (`policy.repair`):
- `Ready` False or Unknown (the kubelet stopped reporting, or reports itself unhealthy):
  `ready_toleration_seconds`, counted from the condition's lastTransitionTime.
- The EKS node monitoring agent's conditions = False (EKS user guide, "Detect node health issues";
  Karpenter's node repair watches the same set): `AcceleratedHardwareReady`, `toleration_seconds`
  (10 minutes); `NetworkingReady`, `StorageReady`, `KernelReady`, `ContainerRuntimeReady`,
  `system_toleration_seconds` (30 minutes), as Karpenter's default repair policies. Unknown is the
  agent not having judged yet, no signal.
- Conditions the operator lists (`extra_conditions`, e.g. node-problem-detector's or a DCGM
  exporter's `GpuXidError=True`): their own toleration, else `toleration_seconds`.
- GPUs lost: `status.capacity` of nvidia.com/gpu or aws.amazon.com/neuron above `status.allocatable`
  (the device plugin withdraws unhealthy devices from allocatable, kubelet's devicemanager): counted
  from when the scaler first saw it.
- The ASG's `HealthStatus: Unhealthy`: the group itself replaces the instance (EC2 Auto Scaling
  health checks), so the scaler only stops counting its room and waits.
- EC2 status checks `impaired` (DescribeInstanceStatus): from the failed check's ImpairedSince, else
  first seen.

Signals without a transition time are timed from their first sighting, kept in the stored
first-seen map under `health_clock_key` (no new store schema). Bad input (a condition status that is
not True/False/Unknown, a transition time in the future, GPUs in allocatable but no capacity) is a
reason, and the node gets no repair action this run; other nodes are not affected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from shared.config import RepairConfig
from shared.domain.model import AsgInstance, InstanceStatus, Node, NodeCondition
from shared.domain.plan import HealthEvidence
from shared.domain.resources import ACCELERATORS
from shared.planner.memo import identity_memo

# The EKS node monitoring agent's conditions (False: the subsystem is broken).
ACCELERATED_HARDWARE = "AcceleratedHardwareReady"
MONITORING_AGENT_CONDITIONS = (
    ACCELERATED_HARDWARE,
    "NetworkingReady",
    "StorageReady",
    "KernelReady",
    "ContainerRuntimeReady",
)
CONDITION_STATUSES = frozenset({"True", "False", "Unknown"})
HEALTH_CLOCK_PREFIX = "health:"

GPUS_LOST = "GPUsLost"
ASG_UNHEALTHY = "AsgUnhealthy"
INSTANCE_IMPAIRED = "InstanceStatusImpaired"


def health_clock_key(instance_or_node: str, signal: str) -> str:
    """Key of a signal's first sighting in the stored first-seen map."""
    return f"{HEALTH_CLOCK_PREFIX}{instance_or_node}:{signal}"


@dataclass(frozen=True, slots=True)
class Signal:
    """One reason a node is unhealthy: `condition` as shown in the plan, since when, tolerated how long."""

    condition: str
    since: datetime
    toleration: int
    detail: str
    clock: str = ""  # the first-seen key when `since` is a first sighting (stored each run)
    asg_replaces: bool = False  # the ASG already replaces the instance: the scaler waits

    def due(self, now: datetime) -> bool:
        return (now - self.since).total_seconds() >= self.toleration


@dataclass(frozen=True, slots=True)
class Health:
    """What one run reads of one node's health."""

    signals: tuple[Signal, ...] = ()
    bad_input: str = ""  # set: no repair action on this node this run

    @property
    def unhealthy(self) -> bool:
        return bool(self.signals) and not self.bad_input

    def due(self, now: datetime) -> tuple[Signal, ...]:
        return tuple(s for s in self.signals if s.due(now))


def _toleration(condition: NodeCondition, policy: RepairConfig) -> int | None:
    """The toleration of a condition in its unhealthy status (None: not a repair signal)."""
    if condition.type == "Ready" and condition.status in ("False", "Unknown"):
        return policy.ready_toleration_seconds
    if condition.type in MONITORING_AGENT_CONDITIONS and condition.status == "False":
        # Accelerated hardware at 10 minutes, the node's other systems at 30 (Karpenter's defaults)
        if condition.type == ACCELERATED_HARDWARE:
            return policy.toleration_seconds
        return policy.system_toleration_seconds
    for extra in policy.extra_conditions:
        if extra.type == condition.type and extra.status == condition.status:
            return (
                extra.toleration_seconds
                if extra.toleration_seconds is not None
                else policy.toleration_seconds
            )
    return None


HEALTHY = Health()


def _watched(condition: NodeCondition, policy: RepairConfig) -> bool:
    return (
        condition.type == "Ready"
        or condition.type in MONITORING_AGENT_CONDITIONS
        or any(extra.type == condition.type for extra in policy.extra_conditions)
    )


class _Reader:
    """Collects one node's signals, timing those without a transition time from first sight."""

    __slots__ = ("first_seen", "key", "now", "signals")

    def __init__(self, key: str, first_seen: Mapping[str, datetime], now: datetime) -> None:
        self.key, self.first_seen, self.now = key, first_seen, now
        self.signals: list[Signal] = []

    def first_sight(self, condition: str, toleration: int, detail: str, **extra: bool) -> None:
        clock = health_clock_key(self.key, condition)
        since = min(self.first_seen.get(clock, self.now), self.now)
        self.signals.append(Signal(condition, since, toleration, detail, clock, **extra))


def _conditions(node: Node, policy: RepairConfig, reader: _Reader, booting: bool) -> str:
    """Condition signals of one node; returns the bad input found ("" when none)."""
    for condition in sorted(node.conditions, key=lambda c: c.type):
        if not _watched(condition, policy) or (booting and condition.type == "Ready"):
            continue
        if condition.status not in CONDITION_STATUSES:
            return f"condition {condition.type} has status {condition.status!r}, not True, False or Unknown"
        toleration = _toleration(condition, policy)
        if toleration is None:
            continue
        name = signal_name(condition)
        detail = f"{name}{f' ({condition.reason})' if condition.reason else ''}"
        if condition.changed_at is None:
            reader.first_sight(name, toleration, detail)
        elif condition.changed_at > reader.now:
            return f"condition {condition.type} changed at {condition.changed_at.isoformat()}, in the future"
        else:
            reader.signals.append(Signal(name, condition.changed_at, toleration, detail))
    return ""


_CAPACITY_MISSING = {
    name: f"status.capacity is missing: cannot tell whether {name} devices were lost" for name in ACCELERATORS
}
# The verdict on a node with accelerators and no status.capacity, built once per accelerator: it
# depends on nothing else, and such nodes are asked about in every run.
_CANNOT_TELL = {name: Health((), reason) for name, reason in _CAPACITY_MISSING.items()}


def _capacity_missing(node: Node) -> str:
    """Bad input: a node with accelerators and no status.capacity ("" when it has none, or capacity)."""
    if node.capacity is None:
        for name in ACCELERATORS:
            if node.allocatable.get(name):
                return name
    return ""


def _gpus_lost(node: Node, policy: RepairConfig, reader: _Reader) -> str:
    """A device plugin that dropped devices: capacity above allocatable (bad input: no capacity)."""
    if node.capacity is None:
        missing = _capacity_missing(node)
        return _CAPACITY_MISSING[missing] if missing else ""
    for name, lost in node.lost_devices.items:
        capacity = node.capacity.get(name)
        detail = f"{lost} of {capacity} {name} not allocatable (device plugin dropped them)"
        reader.first_sight(GPUS_LOST, policy.toleration_seconds, detail)
    return ""


def _instance(
    instance: AsgInstance | None, status: InstanceStatus | None, policy: RepairConfig, reader: _Reader
) -> str:
    """The ASG's and EC2's view of the node's instance."""
    if instance is not None and instance.health_status == "Unhealthy":
        reader.first_sight(ASG_UNHEALTHY, 0, "the Auto Scaling group marks it Unhealthy", asg_replaces=True)
    if status is None or not status.impaired:
        return ""
    detail = f"EC2 status checks impaired (system {status.system_status}, instance {status.instance_status})"
    if status.impaired_since is None:
        reader.first_sight(INSTANCE_IMPAIRED, policy.toleration_seconds, detail)
    elif status.impaired_since > reader.now:
        return f"EC2 status check impaired since {status.impaired_since.isoformat()}, in the future"
    else:
        reader.signals.append(
            Signal(INSTANCE_IMPAIRED, status.impaired_since, policy.toleration_seconds, detail)
        )
    return ""


def signal_name(condition: NodeCondition) -> str:
    """How a condition signal is named in the plan (`repair[].condition`): `Type=Status`."""
    return f"{condition.type}={condition.status}"


def evidence(node: Node, signals: tuple[Signal, ...]) -> HealthEvidence:
    """What of `signals` shows on the Node object itself, for the re-check before a repair
    termination (`safety.recovered`)."""
    names = {s.condition for s in signals}
    conditions = tuple(sorted((c.type, c.status) for c in node.conditions if signal_name(c) in names))
    return HealthEvidence(conditions, GPUS_LOST in names)


# The watch list without operator conditions: what `_settled` judges by (the tolerations do not matter).
_DEFAULT_WATCH = RepairConfig()


def _settled(node: Node) -> bool:
    """The Node object itself shows nothing under the default watch list, whatever the clock: no
    watched condition in an unhealthy or invalid status (`_watched`, `_toleration`), capacity present
    where accelerators are, no device lost."""
    for condition in node.conditions:
        if _watched(condition, _DEFAULT_WATCH) and (
            condition.status not in CONDITION_STATUSES or _toleration(condition, _DEFAULT_WATCH) is not None
        ):
            return False
    return not _capacity_missing(node) and not node.lost_devices.items


# Asked of every node of every run; the simulator and a warm Lambda hand over the same frozen Node
# objects while they do not change (shared.planner.memo).
_calm = identity_memo(_settled)


def node_health(
    node: Node,
    instance: AsgInstance | None,
    status: InstanceStatus | None,
    policy: RepairConfig,
    first_seen: Mapping[str, datetime],
    now: datetime,
    *,
    born_after: datetime | None = None,
) -> Health:
    """Every health signal of one node this run (see the module docstring).

    A booting node (created after `born_after`: younger than the provisioning deadline) is not judged
    by its Ready condition: it is capacity on its way, and a node never Ready by the deadline is a
    launch that failed (scale-down replaces it and backs the group off), not a broken machine.
    """
    if (
        not policy.extra_conditions
        and _calm(node)
        and (instance is None or instance.health_status != "Unhealthy")
        and (status is None or not status.impaired)
    ):
        return HEALTHY  # most nodes of most runs: nothing below could find a signal or bad input
    if not node.conditions:
        missing = _capacity_missing(node)  # the first bad input found, as below, without a reader
        if missing:
            return _CANNOT_TELL[missing]
    # Told apart only here, past the settled nodes (most of them), which are healthy whatever their age.
    booting = born_after is not None and node.created_at is not None and node.created_at > born_after
    reader = _Reader(node.instance_id or node.name, first_seen, now)
    bad = _conditions(node, policy, reader, booting) if node.conditions else ""
    bad = bad or _gpus_lost(node, policy, reader) or _instance(instance, status, policy, reader)
    if bad:
        return Health((), bad)
    signals = reader.signals
    if not signals:  # most nodes of most runs: the same empty tuple, no sort
        return HEALTHY
    return Health(tuple(sorted(signals, key=lambda s: s.condition)))
