"""Gangs and capacity requests: PodGroups, ProvisioningRequests, their PodTemplates and conditions.

The wire names follow the upstream APIs: cluster-autoscaler's ProvisioningRequest
(`autoscaling.x-k8s.io/v1`, apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go and
provisioningrequest/conditions/conditions.go), the coscheduling plugin's PodGroup
(`scheduling.x-k8s.io/v1alpha1`), Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`) and Kueue's
plain-pod groups (`kueue.x-k8s.io/pod-group-name` + `kueue.x-k8s.io/pod-group-total-count`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from shared.domain.keys import namespaced_key
from shared.domain.model import Pod

# The group, autoscaling.x-k8s.io, is shared.constants.PROVISIONING_API_GROUP: the webhook reads it
# without loading this module.
PROVISIONING_API_VERSION = "v1"
# cluster-autoscaler served v1beta1 before v1 (same schema); a cluster with an older CRD has only it.
PROVISIONING_API_VERSIONS = (PROVISIONING_API_VERSION, "v1beta1")
COSCHEDULING_API_GROUP = "scheduling.x-k8s.io"
COSCHEDULING_API_VERSION = "v1alpha1"
VOLCANO_API_GROUP = "scheduling.volcano.sh"
VOLCANO_API_VERSION = "v1beta1"

CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
SUPPORTED_CLASSES = frozenset({CHECK_CAPACITY_CLASS, BEST_EFFORT_ATOMIC_CLASS})

# A pod consuming a request names it here; Kueue sets both keys, cluster-autoscaler reads either
# (provisioningrequest/pods and the Kueue provisioning admission check's podSetUpdates).
ANNOTATION_CONSUME_REQUEST = "autoscaling.x-k8s.io/consume-provisioning-request"
ANNOTATION_CONSUME_REQUEST_LEGACY = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"

LABEL_KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
ANNOTATION_KUEUE_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ANNOTATION_VOLCANO_GROUP = "scheduling.k8s.io/group-name"
LABEL_COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"

# Condition types cluster-autoscaler sets (types.go).
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"

# Condition reasons, cluster-autoscaler's where it has one (conditions.go).
REASON_ACCEPTED = "Accepted"
REASON_CAPACITY_FOUND = "CapacityIsFound"
REASON_CAPACITY_NOT_FOUND = "CapacityIsNotFound"
REASON_CAPACITY_PROVISIONED = "CapacityIsProvisioned"
REASON_BOOKING_EXPIRED = "CapacityReservationTimeExpired"
REASON_CAPACITY_CONSUMED = "CapacityIsConsumed"  # ours: every pod of the request arrived
REASON_EXPIRED = "Expired"
REASON_FAILED_TO_CREATE_PODS = "FailedToCreatePods"

_NO_STRINGS: Mapping[str, str] = MappingProxyType({})


class PodGroupKind(StrEnum):
    COSCHEDULING = "coscheduling"  # scheduling.x-k8s.io/v1alpha1
    VOLCANO = "volcano"  # scheduling.volcano.sh/v1beta1


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A PodGroup of the coscheduling plugin or of Volcano: how many members must run together."""

    namespace: str
    name: str
    kind: PodGroupKind
    min_member: int
    # Volcano's status.succeeded: its members that finished, which count toward the gang (a live read
    # lists active pods only, so they are known from here).
    succeeded: int = 0

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """A core/v1 PodTemplate, its template parsed as a pending pod would be."""

    namespace: str
    name: str
    pod: Pod

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodSet:
    """`spec.podSets[]`: `count` pods shaped as the PodTemplate `template` of the same namespace."""

    template: str
    count: int


@dataclass(frozen=True, slots=True)
class Condition:
    """A metav1.Condition as it is stored in `status.conditions`."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    last_transition_time: datetime | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    def same_as(self, other: Condition) -> bool:
        """Equal in all but lastTransitionTime (what an idempotent writer compares)."""
        return (self.type, self.status, self.reason, self.message, self.observed_generation) == (
            other.type,
            other.status,
            other.reason,
            other.message,
            other.observed_generation,
        )


@dataclass(frozen=True, slots=True)
class ProvisioningRequest:
    """An autoscaling.x-k8s.io/v1 ProvisioningRequest."""

    namespace: str
    name: str
    class_name: str
    pod_sets: tuple[PodSet, ...]
    uid: str = ""
    generation: int = 0
    created_at: datetime | None = None
    parameters: Mapping[str, str] = field(default_factory=lambda: _NO_STRINGS)
    conditions: tuple[Condition, ...] = ()
    version: str = PROVISIONING_API_VERSION  # the API version it was read from (and is written to)

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if set."""
        for condition in self.conditions:
            if condition.type == type_:
                return condition
        return None

    def is_true(self, type_: str) -> bool:
        found = self.condition(type_)
        return found is not None and found.is_true

    @property
    def pod_count(self) -> int:
        return sum(s.count for s in self.pod_sets)


def consumed_request(pod: Pod) -> str | None:
    """The `namespace/name` of the ProvisioningRequest a pod consumes, if it names one."""
    name = pod.annotations.get(ANNOTATION_CONSUME_REQUEST) or pod.annotations.get(
        ANNOTATION_CONSUME_REQUEST_LEGACY
    )
    return namespaced_key(pod.namespace, name) if name else None


class RequestOutcome(StrEnum):
    PROVISIONED = "provisioned"  # answered Provisioned=True this run
    NOT_PROVISIONED = "not-provisioned"  # Provisioned=False: tried again next run
    FAILED = "failed"  # Failed=True: never retried
    BOOKED = "booked"  # provisioned earlier: its capacity is held until its pods arrive


@dataclass(frozen=True, slots=True)
class RequestAnswer:
    """The planner's answer to one ProvisioningRequest, for the plan output and the reports."""

    request: str  # namespace/name
    class_name: str
    outcome: RequestOutcome
    group: str | None
    nodes: int  # nodes of `group` the request's pods take (new, booting or registered)
    reason: str


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    """A status write: set `conditions` (the whole list) on a ProvisioningRequest.

    `generation` and `uid` are those the planner read: the writer sends the uid as a precondition so
    a request deleted and re-created under the same name is not answered with the old one's verdict.
    """

    namespace: str
    name: str
    uid: str
    conditions: tuple[Condition, ...]
    summary: str  # what changed, for the action log
    version: str = PROVISIONING_API_VERSION  # the API version the request was read from

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)
