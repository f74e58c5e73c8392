"""Value objects of the imperative shell: leases, scaling failures, drain intents, events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Lease:
    """The single-writer lease of a cluster; `fencing_token` grows with every acquisition."""

    cluster: str
    owner: str
    expires_at: datetime
    fencing_token: int


class FailureKind(StrEnum):
    INSUFFICIENT_CAPACITY = "InsufficientInstanceCapacity"
    INSTANCE_LIMIT = "InstanceLimitExceeded"  # instance or vCPU quota
    SPOT_CAPACITY = "SpotCapacity"
    OTHER = "Other"


@dataclass(frozen=True, slots=True)
class ScalingFailure:
    """A failed Auto Scaling activity (or an "EC2 Instance Launch Unsuccessful" event)."""

    asg_name: str
    activity_id: str
    at: datetime
    kind: FailureKind
    message: str = ""

    @property
    def is_capacity(self) -> bool:
        """Failures that backing off and spilling to another group can help with."""
        return self.kind is not FailureKind.OTHER


@dataclass(frozen=True, slots=True)
class DrainIntent:
    """A forced scale-down in progress, stored so later reconcile runs finish it."""

    group: str
    nodes: tuple[str, ...]  # nodes chosen to drain and terminate
    requested_at: datetime
    expires_at: datetime  # give up (leave cordoned, report) after this
    grace_seconds: int = 300  # evictions go through PDBs until this much time has passed
    force: bool = False  # after the grace, delete pods even when PDBs block
    requested_by: str = ""


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What a Kubernetes Event is about."""

    kind: str  # Pod | Node
    name: str
    namespace: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    target: ObjectRef
    reason: str
    message: str
    type: EventType = EventType.NORMAL
