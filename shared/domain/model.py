"""Frozen value objects the planner reasons about: pods, nodes, Auto Scaling groups, state, snapshot.

They carry exactly what the planning rules read, already normalised (quantities in base units,
times as aware datetimes). Parsing from the real wire formats lives in `shared.formats`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING

from shared.domain.constraints import NO_CONSTRAINTS, PodConstraints
from shared.domain.dra import NO_DRA, DraObjects
from shared.domain.keys import namespaced_key
from shared.domain.labels import LabelSelector, Requirement
from shared.domain.resources import ACCELERATORS, EMPTY, Resources
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass

if TYPE_CHECKING:  # shared.domain.provisioning imports Pod from here
    from shared.domain.provisioning import PodGroup, PodTemplate, ProvisioningRequest

__all__ = ["Requirement"]  # re-exported: node affinity is part of a pod's scheduling

ANNOTATION_CORDONED_AT = "backlog-scaler/cordoned-at"
ANNOTATION_SCALE_DOWN_DISABLED = "backlog-scaler/scale-down-disabled"
ANNOTATION_CA_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
TERMINAL_PHASES = ("Succeeded", "Failed")  # a pod in one of these phases runs nothing any more

# v1.DefaultTerminationGracePeriodSeconds, and cluster-autoscaler's PodLongTerminatingExtraThreshold
# (utils/drain/drain.go): a pod this far past deletionTimestamp + its grace is treated as deleted.
DEFAULT_TERMINATION_GRACE_SECONDS = 30
LONG_TERMINATING_MARGIN = timedelta(seconds=30)

_NO_STRINGS: Mapping[str, str] = MappingProxyType({})


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect


def carries_taint(taints: tuple[Taint, ...], key: str) -> bool:
    """Whether any of `taints` has `key` (the scaler's marks: asked of every node of every run, so a
    plain loop rather than any() over a generator)."""
    for taint in taints:  # noqa: SIM110 - see the docstring
        if taint.key == key:
            return True
    return False


# apimachinery's content.IsDecimalInteger: canonical form only ("0", "-5", "12"; not "007", "+1", "-0").
_DECIMAL_INTEGER = re.compile(r"0|-?[1-9][0-9]*")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _compares(operator: str, wanted: str, have: str) -> bool:
    """Lt / Gt: whether the taint's value `have` is below / above the toleration's `wanted`, both
    int64 in canonical decimal form; otherwise no match (k8s.io/api core/v1 compareNumericValues)."""
    if not (_DECIMAL_INTEGER.fullmatch(wanted) and _DECIMAL_INTEGER.fullmatch(have)):
        return False
    want, got = int(wanted), int(have)
    if not (_INT64_MIN <= want <= _INT64_MAX and _INT64_MIN <= got <= _INT64_MAX):
        return False
    return got < want if operator == "Lt" else got > want if operator == "Gt" else False


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; empty key with Exists tolerates everything; empty effect matches all."""

    key: str = ""
    # Equal | Exists | Lt | Gt (TaintTolerationComparisonOperators, Kubernetes 1.35: the API server
    # admits Lt and Gt only with its gate on, so a pod carrying one comes from a cluster that has it)
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates `taint` (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        operator = self.operator
        if operator == "Exists":
            return True
        if operator == "Equal":
            return self.value == taint.value
        return _compares(operator, self.value, taint.value)


@dataclass(frozen=True, slots=True)
class Scheduling:
    """What a pod demands of a node besides room: selector, required affinity, tolerations.

    Hashable, so the planner evaluates each distinct constraint set once per node shape.
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()  # ORed terms of ANDed requirements
    tolerations: tuple[Toleration, ...] = ()

    def selects(self, labels: Mapping[str, str]) -> bool:
        """nodeSelector and required node affinity hold for `labels`."""
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        if not self.affinity_terms:
            return True
        return any(all(req.holds(labels) for req in term) for term in self.affinity_terms)

    def untolerated(self, taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
        """NoSchedule/NoExecute taints none of the tolerations tolerate."""
        return tuple(
            taint
            for taint in taints
            if taint.effect != TaintEffect.PREFER_NO_SCHEDULE
            and not any(tol.tolerates(taint) for tol in self.tolerations)
        )

    def admits(self, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> bool:
        """Selector/affinity hold and every hard taint is tolerated."""
        return self.selects(labels) and not self.untolerated(taints)


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    requests: Resources = EMPTY
    phase: str = "Pending"
    node_name: str | None = None
    scheduling: Scheduling = field(default_factory=Scheduling)
    labels: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    annotations: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    owner_kind: str | None = None
    priority: int = 0
    created_at: datetime | None = None
    unschedulable: bool = False  # PodScheduled=False, reason=Unschedulable
    uid: str = ""
    owner_name: str | None = None  # the controlling owner's name (a DaemonSet's, a Job's)
    constraints: PodConstraints = NO_CONSTRAINTS  # inter-pod, port, volume and DRA constraints
    nominated_node: str | None = None  # status.nominatedNodeName: preemption is under way there
    scheduler_message: str = ""  # PodScheduled condition message: the scheduler's own words
    deleted_at: datetime | None = None  # metadata.deletionTimestamp: the pod is terminating
    termination_grace_seconds: int = DEFAULT_TERMINATION_GRACE_SECONDS  # spec.terminationGracePeriodSeconds
    # DRA: status.resourceClaimStatuses, (pod claim name, ResourceClaim generated from its template)
    resource_claim_statuses: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)

    @property
    def is_daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def is_mirror(self) -> bool:
        return ANNOTATION_MIRROR in self.annotations

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def is_pending_unschedulable(self) -> bool:
        """In the backlog: Pending, unbound, marked Unschedulable by the scheduler, and not being
        deleted (a terminating pod will never be scheduled; its owner's replacement is the backlog)."""
        return (
            self.phase == "Pending"
            and not self.node_name
            and self.unschedulable
            and not self.is_daemonset
            and self.deleted_at is None
        )

    def is_long_terminating(self, now: datetime) -> bool:
        """Deleted, and still here more than LONG_TERMINATING_MARGIN past its grace period (a hung
        GPU driver, a kubelet that lost its node): cluster-autoscaler's IsPodLongTerminating
        (cluster-autoscaler/utils/drain/drain.go), which then treats the pod as deleted. Like it,
        the grace is added to deletionTimestamp, which already includes it: conservative."""
        if self.deleted_at is None:
            return False
        return (
            self.deleted_at + timedelta(seconds=self.termination_grace_seconds) + LONG_TERMINATING_MARGIN
            < now
        )

    def keeps_node_busy(self, priority_cutoff: int | None, now: datetime) -> bool:
        """A pod that makes its node busy: live, neither a DaemonSet nor a mirror pod, not
        "expendable" (priority below the cutoff; cluster-autoscaler's expendable-pods-priority-cutoff),
        and not stuck terminating (`is_long_terminating`).

        The one home of this rule: the planner, the re-validation, the drains and the fakes call it.
        """
        # The fields read directly rather than through is_terminal, is_daemonset and is_mirror: the
        # planner asks this of every pod in every run, and the property calls were most of its cost.
        return (
            self.phase not in TERMINAL_PHASES
            and self.owner_kind != "DaemonSet"
            and ANNOTATION_MIRROR not in self.annotations
            and (priority_cutoff is None or self.priority >= priority_cutoff)
            and (self.deleted_at is None or not self.is_long_terminating(now))  # most pods: no call
        )

    @property
    def do_not_disrupt(self) -> bool:
        return self.annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"


@dataclass(frozen=True, slots=True)
class NodeCondition:
    """One entry of a Node's status.conditions, as written (status is checked by the planner: a
    value other than True, False or Unknown is bad input, never a guess)."""

    type: str
    status: str
    changed_at: datetime | None = None  # lastTransitionTime
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    instance_id: str | None = None
    allocatable: Resources = EMPTY
    labels: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    annotations: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    ready_changed_at: datetime | None = None
    created_at: datetime | None = None
    resource_version: str = ""
    deleting: bool = False  # metadata.deletionTimestamp is set: the Node object is going away
    conditions: tuple[NodeCondition, ...] = ()  # every status.conditions entry (Ready included)
    capacity: Resources | None = None  # status.capacity (None: the field is absent)

    @property
    def cordoned_at(self) -> datetime | None:
        """When the scaler cordoned this node, from its annotation (None if not ours or unparsable)."""
        raw = self.annotations.get(ANNOTATION_CORDONED_AT)
        if not raw:
            return None
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None

    @property
    def cordoned_by_scaler(self) -> bool:
        return self.unschedulable and ANNOTATION_CORDONED_AT in self.annotations

    @property
    def scale_down_disabled(self) -> bool:
        # Most nodes carry no annotation: one test instead of two lookups, for every node of every run.
        return bool(self.annotations) and (
            self.annotations.get(ANNOTATION_SCALE_DOWN_DISABLED) == "true"
            or self.annotations.get(ANNOTATION_CA_SCALE_DOWN_DISABLED) == "true"
        )

    @property
    def do_not_disrupt(self) -> bool:
        """Karpenter's node-level `karpenter.sh/do-not-disrupt: "true"` (the same key as the pod's)."""
        return bool(self.annotations) and self.annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"

    @property
    def lost_devices(self) -> Resources:
        """Accelerator devices the device plugin withdrew: `status.capacity` above `status.allocatable`
        (kubelet's devicemanager advertises only healthy devices as allocatable; extended resources
        get no kubelet reservation, so a healthy node has the two equal). EMPTY when none were, or
        when capacity is absent."""
        capacity, allocatable = self.capacity, self.allocatable
        if capacity is None or capacity is allocatable:
            return EMPTY
        lost = [
            (name, capacity.get(name) - allocatable.get(name))
            for name in ACCELERATORS
            if capacity.get(name) > allocatable.get(name)
        ]
        return Resources.of(lost) if lost else EMPTY  # read of every node every run: no new object


# Instance lifecycle states (Auto Scaling user guide, "Amazon EC2 Auto Scaling instance lifecycle").
# Coming and running instances count toward desired capacity; Standby, leaving and warm-pool
# instances do not (a warm-pool instance joins the group only when a scale-out takes it, and then
# it is Pending again), so they are neither capacity on its way nor free room.
COMING_LIFECYCLE_STATES = frozenset({"Pending", "Pending:Wait", "Pending:Proceed"})
LIVE_LIFECYCLE_STATES = COMING_LIFECYCLE_STATES | {"InService"}

# Auto Scaling process names (SuspendProcesses): Launch suspended, the group adds no instance;
# Terminate suspended, it removes none.
PROCESS_LAUNCH = "Launch"
PROCESS_TERMINATE = "Terminate"


@dataclass(frozen=True, slots=True)
class LaunchTemplateRef:
    """A launch template and version as DescribeAutoScalingGroups shows it (`$Latest`, `$Default` or
    a number); resolved to a number through DescribeLaunchTemplates (`LaunchTemplateVersions`)."""

    template_id: str
    version: str = "$Default"
    name: str = ""


@dataclass(frozen=True, slots=True)
class LaunchTemplateVersions:
    """One launch template's current version numbers (DescribeLaunchTemplates)."""

    template_id: str
    name: str
    default_version: int
    latest_version: int


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """An EC2 scheduled event of an instance (DescribeInstanceStatus `Events`)."""

    code: str  # instance-reboot | system-reboot | system-maintenance | instance-retirement | instance-stop
    description: str = ""
    not_before: datetime | None = None
    not_after: datetime | None = None

    @property
    def is_done(self) -> bool:
        """EC2 keeps completed and canceled events a while, their description prefixed so."""
        return self.description.startswith(("[Completed]", "[Canceled]"))


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """One instance of DescribeInstanceStatus (`--include-all-instances`): status checks and events."""

    instance_id: str
    availability_zone: str = ""
    state: str = "running"
    system_status: str = "ok"  # ok | impaired | initializing | insufficient-data | not-applicable
    instance_status: str = "ok"
    impaired_since: datetime | None = None  # the earliest ImpairedSince of a failed check's details
    events: tuple[ScheduledEvent, ...] = ()

    @property
    def impaired(self) -> bool:
        return "impaired" in (self.system_status, self.instance_status)


@dataclass(frozen=True, slots=True)
class AsgInstance:
    instance_id: str
    lifecycle_state: str = "InService"
    health_status: str = "Healthy"
    availability_zone: str = ""
    instance_type: str = ""
    weighted_capacity: int | None = None  # units it counts for in a weighted group (None: unweighted)
    protected_from_scale_in: bool = False  # ProtectedFromScaleIn (see safety.scale_in_protection)
    # What it was launched from: a launch template (id, version number) or a launch configuration.
    launch_template: LaunchTemplateRef | None = None
    launch_configuration: str = ""

    @property
    def is_live(self) -> bool:
        """Running or on its way up (not terminating, detaching, in standby or in a warm pool)."""
        return self.lifecycle_state in LIVE_LIFECYCLE_STATES

    @property
    def is_coming(self) -> bool:
        """Launched and not in service yet (a launch lifecycle hook may hold it in Pending:Wait)."""
        return self.lifecycle_state in COMING_LIFECYCLE_STATES


@dataclass(frozen=True, slots=True)
class CapacityUnits:
    """How a group whose desired capacity is not one per instance counts (MixedInstancesPolicy
    WeightedCapacity, or DesiredCapacityType vcpu / memory-mib): the group's sizes as AWS reports
    them, in units, and the units one node of the group's template stands for.

    A group launches until the units of its InService and Pending instances reach the desired
    capacity, so it may overshoot by less than one instance's weight (Auto Scaling user guide,
    "Configure instance weighting").
    """

    desired: int
    min_size: int
    max_size: int
    per_node: int  # units of one template node: the weight of the group's smallest type (0: unknown)
    capacity_type: str = "units"  # DesiredCapacityType: units | vcpu | memory-mib


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One EC2 capacity reservation (DescribeCapacityReservations): an On-Demand Capacity
    Reservation, or a Capacity Block for ML (ReservationType capacity-block)."""

    reservation_id: str
    instance_type: str
    availability_zone: str
    total: int
    available: int
    state: str  # active | scheduled | expired | ...
    reservation_type: str = "default"  # default | capacity-block
    start: datetime | None = None
    end: datetime | None = None  # None: EndDateType unlimited
    match_criteria: str = "open"  # open | targeted

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"


@dataclass(frozen=True, slots=True)
class AsgState:
    """One Auto Scaling group as AWS reports it."""

    name: str
    min_size: int
    max_size: int
    desired: int
    instances: tuple[AsgInstance, ...] = ()
    tags: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    region: str = ""
    availability_zones: tuple[str, ...] = ()
    # MixedInstancesPolicy.InstancesDistribution: with no on-demand base and 0 % above it, every
    # instance the group launches is Spot (None: no mixed-instances policy, all on-demand).
    spot_only: bool | None = None
    # What AWS launches: the MixedInstancesPolicy overrides' instance types (empty: the launch
    # template's single type, which DescribeAutoScalingGroups does not show), their weights, and
    # the group's sizes in units when it counts capacity in units (None: one unit per instance;
    # then min_size, max_size and desired above are the raw values).
    instance_types: tuple[str, ...] = ()
    type_weights: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    units: CapacityUnits | None = None
    suspended_processes: frozenset[str] = frozenset()
    subnet_ids: tuple[str, ...] = ()  # VPCZoneIdentifier
    warm_pool_size: int | None = None  # instances in the warm pool (None: no warm pool configured)
    # CapacityReservationSpecification of the group (preference "" when the group sets none).
    reservation_preference: str = ""
    reservation_ids: tuple[str, ...] = ()
    # Filled by the fleet adapter: shapes of the group's instance types and the reservations the
    # group launches into, with their free instances.
    type_shapes: Mapping[str, InstanceType] = field(default_factory=lambda: MappingProxyType({}))
    reservations: tuple[CapacityReservation, ...] = ()
    new_instances_protected: bool = False  # NewInstancesProtectedFromScaleIn: the group's default
    # What the group launches new instances from now (drift is an instance launched from another).
    launch_template: LaunchTemplateRef | None = None
    launch_configuration: str = ""
    # MixedInstancesPolicy overrides with a launch template of their own (LaunchTemplateOverrides.
    # LaunchTemplateSpecification): the instances of that type launch from it, not from the group's.
    type_templates: Mapping[str, LaunchTemplateRef] = field(default_factory=lambda: MappingProxyType({}))
    # Derived once at construction: the planner reads them for every node of every run.
    live_instances: tuple[AsgInstance, ...] = field(init=False, repr=False, compare=False)
    protected_instance_ids: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "live_instances", tuple(i for i in self.instances if i.is_live))
        protected = frozenset(i.instance_id for i in self.instances if i.protected_from_scale_in)
        object.__setattr__(self, "protected_instance_ids", protected)

    @property
    def launch_suspended(self) -> bool:
        return PROCESS_LAUNCH in self.suspended_processes

    @property
    def terminate_suspended(self) -> bool:
        return PROCESS_TERMINATE in self.suspended_processes

    def after_terminations(self, instance_ids: frozenset[str], decrements: int) -> AsgState:
        """The group as AWS reports it once `instance_ids` are terminated, `decrements` of them with
        ShouldDecrementDesiredCapacity."""
        if not instance_ids and not decrements:
            return self  # what most groups of most runs ask: the same group (frozen, so shared)
        kept = tuple(i for i in self.instances if i.instance_id not in instance_ids)
        return replace(self, desired=self.desired - decrements, instances=kept)

    def instance_units(self, instance: AsgInstance) -> int:
        """Units one instance counts for (1 in a group without weights)."""
        if self.units is None:
            return 1
        if instance.weighted_capacity is not None:
            return instance.weighted_capacity
        return self.type_weights.get(instance.instance_type) or self.units.per_node or 1

    def units_for(self, nodes: int) -> int:
        """The desired capacity, in the group's own units, that makes the group `nodes` nodes.

        The one home of the nodes -> units rule (the fleet adapter calls it when it sets desired):
        the units of the live instances, plus one template node's units per node beyond them;
        below the live count, the units of the heaviest instances kept. Clamped to [min, max].
        """
        if self.units is None:
            return nodes
        live = sorted((self.instance_units(i) for i in self.live_instances), reverse=True)
        if nodes >= len(live):
            units = sum(live) + (nodes - len(live)) * max(self.units.per_node, 1)
        else:
            units = sum(live[:nodes])
        return max(self.units.min_size, min(units, self.units.max_size))


def nodes_for_units(units: int, live_units: list[int], per_node: int, *, round_up: bool = True) -> int:
    """How many nodes a group of weighted instances has at `units` of capacity (units -> nodes).

    The live instances are kept heaviest first while they are needed; units beyond them are new
    template nodes of `per_node` units each: rounded up for desired and min (AWS launches until the
    units are reached), down for max (a plan never asks for more units than the maximum).
    """
    total = sum(live_units)
    if units >= total:
        extra = units - total
        step = max(per_node, 1)
        return len(live_units) + (-(-extra // step) if round_up else extra // step)
    kept = count = 0
    for weight in sorted(live_units, reverse=True):
        if kept >= units:
            break
        kept += weight
        count += 1
    return count


@dataclass(frozen=True, slots=True)
class GroupState:
    """What the scaler remembers about a group between runs."""

    backoff_until: datetime | None = None
    last_scale_up: datetime | None = None
    last_scale_down: datetime | None = None  # last time the scaler terminated a node of the group
    migrated_at: tuple[datetime, ...] = ()  # when the scaler emptied nodes by migration (the last hour)
    # Jobs (a pod's owner, else the pod) moved by migration: how often, and when last
    # (checkpoint.remember_moves).
    moved_jobs: Mapping[str, tuple[int, datetime]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodMemory:
    """What the scaler remembers of one pending pod, to treat the scheduler as the ground truth.

    `counted_on`/`counted_since`: the registered node the planner has counted the pod on, and since
    when, without interruption. `distrusted`: nodes whose fit the scheduler refuted (it had its chance
    and did not bind). `bought`: group -> when the scaler first grew it for this pod. `refused`:
    group -> until when no capacity is bought there for this pod (the scheduler rejected the pod on
    capacity bought for it). `uid` tells a pod re-created under the same name from the old one.

    `recalled` and `counted` build the memory of the next run field by field (every pending pod of
    every run passes both; dataclasses.replace walked the fields each time): a new field goes there too.
    """

    uid: str = ""
    counted_on: str = ""
    counted_since: datetime | None = None
    distrusted: tuple[str, ...] = ()
    bought: Mapping[str, datetime] = field(default_factory=dict)
    refused: Mapping[str, datetime] = field(default_factory=dict)

    def recalled(
        self,
        uid: str,
        counted_on: str,
        counted_since: datetime | None,
        distrusted: tuple[str, ...],
        refused: Mapping[str, datetime],
    ) -> PodMemory:
        """This memory with the scheduler's verdicts of this run applied (ground_truth.recall)."""
        return PodMemory(uid, counted_on, counted_since, distrusted, self.bought, refused)

    def counted(
        self, counted_on: str, counted_since: datetime | None, bought: Mapping[str, datetime]
    ) -> PodMemory:
        """This memory with where this run counts the pod and what it bought (ground_truth.remember)."""
        return PodMemory(self.uid, counted_on, counted_since, self.distrusted, bought, self.refused)


@dataclass(frozen=True, slots=True)
class NodeState:
    idle_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScalerState:
    """Stored state the planner reads: idle-since per node, backoff per group, first sight per instance."""

    nodes: Mapping[str, NodeState] = field(default_factory=dict)
    groups: Mapping[str, GroupState] = field(default_factory=dict)
    instances_first_seen: Mapping[str, datetime] = field(default_factory=dict)
    pods: Mapping[str, PodMemory] = field(default_factory=dict)  # by pod key (namespace/name)


@dataclass(frozen=True, slots=True)
class DaemonSet:
    """A DaemonSet, as the pod it would put on every node its template admits."""

    namespace: str
    name: str
    pod: Pod  # the pod template, parsed like a pod (requests, scheduling, constraints)
    images: tuple[str, ...] = ()  # its containers' images: which device plugin it is

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A policy/v1 PodDisruptionBudget, as the Eviction API judges it (how its pods are drawn on:
    `shared.domain.safety.draws_on`)."""

    namespace: str
    name: str
    # spec.selector, over the pods of the budget's own namespace: None (null or missing) selects no
    # pod, the empty LabelSelector ({}) every pod of the namespace (policy/v1).
    selector: LabelSelector | None
    disruptions_allowed: int  # status.disruptionsAllowed: the evictions it allows now, one used by each

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class InstanceType:
    """What EC2 says of one instance type: raw capacity (before any kubelet reservation)."""

    name: str
    capacity: Resources  # cpu (millicores), memory (bytes), pods (ENI formula), accelerators
    architecture: str = "amd64"  # as the kubernetes.io/arch label spells it
    # What a node has only when software on it makes it so: EFA interfaces (advertised by the EFA
    # device plugin) and NVMe instance store (ephemeral storage only where the AMI mounts it).
    efa_interfaces: int = 0  # NetworkInfo.EfaInfo.MaximumEfaInterfaces; 0 without EFA
    nvme_instance_store_gb: int = 0  # InstanceStorageInfo.TotalSizeInGB of NVMe instance store


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one planning run reads: the whole picture, gathered before deciding."""

    pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]
    asgs: Mapping[str, AsgState]  # by ASG name
    state: ScalerState = field(default_factory=ScalerState)
    instance_types: Mapping[str, InstanceType] = field(default_factory=dict)  # by name
    daemonsets: tuple[DaemonSet, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    pvs: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    pod_groups: tuple[PodGroup, ...] = ()  # coscheduling and Volcano PodGroups (gang sizes)
    provisioning_requests: tuple[ProvisioningRequest, ...] = ()
    pod_templates: tuple[PodTemplate, ...] = ()  # those the provisioning requests reference
    dra: DraObjects = field(default_factory=lambda: NO_DRA)  # resource.k8s.io/v1 (DRA)
    # EC2 status checks and scheduled events by instance id (None: not read this run, so no EC2
    # signal is judged); launch templates' current versions by id (drift of `$Latest`/`$Default`).
    instance_statuses: Mapping[str, InstanceStatus] | None = None
    launch_templates: Mapping[str, LaunchTemplateVersions] = field(default_factory=dict)
    interrupted: frozenset[str] = frozenset()  # nodes under a Spot interruption warning (held cordoned)
