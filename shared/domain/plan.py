"""The planner's output: absolute decisions, each with a reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from shared.domain.model import PodMemory
from shared.domain.provisioning import ConditionUpdate, RequestAnswer


class Outcome(StrEnum):
    EXISTING = "existing"  # fits free room of a registered node (maybe after an uncordon)
    IN_FLIGHT = "in-flight"  # fits a node that is booting
    SCALE_UP = "scale-up"  # needs a new node; the group's desired grows
    UNHELPED = "unhelped"  # nothing this scaler can do; the reason says why


class ReasonCode(StrEnum):
    """Machine-readable reason of a pod outcome (Events and metrics key on it)."""

    PLACED = "Placed"
    NO_MATCHING_GROUP = "NoMatchingGroup"
    TOO_LARGE = "LargerThanAnyNode"
    AT_MAX = "GroupsAtMaxSize"
    BACKOFF = "GroupsInBackoff"
    GANG_DOES_NOT_FIT = "GangDoesNotFit"
    BELOW_PRIORITY_CUTOFF = "BelowPriorityCutoff"
    TOO_YOUNG = "WaitingForScheduler"
    GROUP_UNAVAILABLE = "GroupUnavailable"
    NOMINATED = "NominatedForPreemption"  # the scheduler is preempting pods for it on a node
    DAEMONSET_OVERHEAD = "DaemonSetsTakeTheRoom"  # fits the group's shape, not what DaemonSets leave
    SCHEDULER_REJECTED = "SchedulerRejected"  # capacity bought for it was refused by the scheduler
    UNVERIFIABLE = "CannotVerifyPlacement"  # DRA claims, missing PVCs: the planner cannot check
    FILTERED = "NoNodeFits"  # the scheduler's filters reject every node of every group


@dataclass(frozen=True, slots=True)
class GroupDecision:
    name: str
    asg_name: str
    current_desired: int
    desired: int
    min_size: int
    max_size: int
    reason: str
    new_nodes: int = 0  # nodes bought by this plan (before terminations)
    enter_backoff: bool = False  # instances failed to register in time
    # A weighted group's desired capacity as AWS counts it (WeightedCapacity units, vCPUs or MiB):
    # what the plan sets (AsgState.units_for) and what it is now; None for a group counted in nodes.
    desired_units: int | None = None
    current_desired_units: int | None = None

    @property
    def changed(self) -> bool:
        return self.desired != self.current_desired


@dataclass(frozen=True, slots=True)
class NodeAction:
    node: str
    group: str
    reason: str


@dataclass(frozen=True, slots=True)
class NodeMark:
    """Put on (or lift) the scaler's attrition taint `key:effect` (empty value) on `node`.

    A mark steers new pods away so the node empties as its jobs finish (shared.planner.attrition);
    it never evicts anything.
    """

    node: str
    group: str
    reason: str
    key: str
    effect: str  # PreferNoSchedule or NoSchedule


@dataclass(frozen=True, slots=True)
class Migration:
    """Empty `node` by evicting its checkpointing pods so idle scale-down can take it
    (shared.planner.migration). `pods`: every pod evicted, gang members on other nodes included;
    GPU-seconds lost (work since the pods' last checkpoints plus restarts) and saved (the node's
    GPUs for as long as its jobs were expected to keep it)."""

    node: str
    group: str
    pods: tuple[str, ...]
    lost_gpu_seconds: float
    saved_gpu_seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class HealthEvidence:
    """What a repair termination was planned on, as the Node object showed it: the conditions judged
    unhealthy (type, status) and whether accelerators were missing from allocatable. Re-checked on
    the fresh read before the termination (`safety.termination_blocker`): a node that shows none of
    it any more recovered in between and is not replaced. Signals read elsewhere (the ASG's health
    status, EC2 status checks) are not on the Node and are not re-checked."""

    conditions: tuple[tuple[str, str], ...] = ()
    lost_devices: bool = False

    def __bool__(self) -> bool:
        return bool(self.conditions) or self.lost_devices


@dataclass(frozen=True, slots=True)
class Termination:
    node: str | None
    instance_id: str
    group: str
    reason: str
    decrement: bool = True  # False: the group replaces the instance
    cause: str = ""  # "": idle scale-down or a launch that failed; "repair" or "rotation"
    evidence: HealthEvidence = HealthEvidence()  # repair: what must still show on the fresh read


class RepairAction(StrEnum):
    REPLACE = "replace"  # idle and past its toleration: terminated, the group launches another
    CORDON = "cordon"  # busy and past its toleration: cordoned and tainted, replaced once empty
    WAIT = "wait"  # within its toleration, protected, or the ASG replaces it: its room is not counted
    PAUSED = "paused"  # too much of its group is unhealthy at once: nothing terminated (alarm)
    UNCORDON = "uncordon"  # recovered: the scaler lifts its own health cordon
    IGNORED = "ignored"  # bad input: no action on the node this run


@dataclass(frozen=True, slots=True)
class RepairDecision:
    """What the plan does about one unhealthy (or recovered) node."""

    node: str
    group: str
    instance_id: str
    condition: str  # the signals, e.g. "AcceleratedHardwareReady=False, GPUsLost"
    action: RepairAction
    reason: str


class RotationCause(StrEnum):
    DRIFT = "drift"
    LIFETIME = "lifetime"
    MAINTENANCE = "maintenance"
    REBALANCE = "rebalance"
    INTERRUPTION = "interruption"


@dataclass(frozen=True, slots=True)
class RotationDecision:
    """A node due for rotation: marked so no new pods land (busy), or replaced (empty)."""

    node: str
    group: str
    cause: RotationCause
    action: str  # mark | replace | wait
    reason: str


@dataclass(frozen=True, slots=True)
class PodOutcome:
    pod: str
    outcome: Outcome
    group: str | None
    reason: str
    code: ReasonCode = ReasonCode.PLACED
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class ModelError:
    """A fit the planner counted that the scheduler refuted: room on `node` it had its chance to use."""

    pod: str
    node: str
    since: datetime
    message: str  # the scheduler's own message, when it gave one


@dataclass(frozen=True, slots=True)
class Plan:
    groups: tuple[GroupDecision, ...]
    cordon: tuple[NodeAction, ...] = ()
    uncordon: tuple[NodeAction, ...] = ()
    terminate: tuple[Termination, ...] = ()
    pods: tuple[PodOutcome, ...] = ()
    idle_since: Mapping[str, datetime] = field(default_factory=dict)  # new idle-since per node
    instances_first_seen: Mapping[str, datetime] = field(default_factory=dict)  # unregistered instances
    pod_memory: Mapping[str, PodMemory] = field(default_factory=dict)  # new memory per pending pod
    model_errors: tuple[ModelError, ...] = ()
    provisioning_requests: tuple[RequestAnswer, ...] = ()  # one answer per ProvisioningRequest, by name
    provisioning_updates: tuple[ConditionUpdate, ...] = ()  # status writes: only what changes
    mark: tuple[NodeMark, ...] = ()  # attrition taints to put on, by node
    unmark: tuple[NodeMark, ...] = ()  # attrition taints to lift, by node
    delete_nodes: tuple[NodeAction, ...] = ()  # Node objects of instances that are gone (leftovers.py)
    repair: tuple[RepairDecision, ...] = ()  # unhealthy and recovered nodes, by node
    rotate: tuple[RotationDecision, ...] = ()  # nodes due for rotation, by node
    repair_paused: tuple[str, ...] = ()  # groups with too many unhealthy nodes to repair (alarm)
    migrate: tuple[Migration, ...] = ()  # nodes emptied by moving jobs that checkpoint, by node

    def group(self, name: str) -> GroupDecision:
        """The decision for one group by name."""
        for decision in self.groups:
            if decision.name == name:
                return decision
        raise KeyError(name)
