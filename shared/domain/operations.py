"""Value objects of the imperative shell: leases, scaling failures, drain intents, events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

# Bounds of a drain intent, which is stored as one DynamoDB item (at most 400 KB). Kubernetes caps
# node names at 253 characters; 1,500 such names, 256 four-byte characters of requester and the other
# attributes come to about 383 KB (tests/unit/test_force_scale_down.py stores that worst case).
MAX_NODE_NAME_LENGTH = 253
MAX_GROUP_NAME_LENGTH = 128
MAX_REQUESTED_BY_LENGTH = 256
MAX_INTENT_NODES = 1_500
# A forced scale-down drains at most this many nodes of a group at once (with the drain in progress),
# which leaves the intent room for spot interruption holds up to MAX_INTENT_NODES.
MAX_DRAIN_NODES = 1_000


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
    revision: int = 0  # the stored version this was read at (0: not stored); writes are conditional on it

    def __post_init__(self) -> None:
        # The stored item must fit DynamoDB's 400 KB: a bigger intent is a bug upstream, not data.
        if len(self.group) > MAX_GROUP_NAME_LENGTH:
            raise ValueError(f"drain intent: group name longer than {MAX_GROUP_NAME_LENGTH} characters")
        if len(self.nodes) > MAX_INTENT_NODES:
            raise ValueError(
                f"drain intent of {self.group}: {len(self.nodes)} nodes, at most {MAX_INTENT_NODES}"
            )
        if any(len(name) > MAX_NODE_NAME_LENGTH for name in self.nodes):
            raise ValueError(f"drain intent of {self.group}: a node name longer than {MAX_NODE_NAME_LENGTH}")
        if len(self.requested_by) > MAX_REQUESTED_BY_LENGTH:
            raise ValueError(
                f"drain intent of {self.group}: requested_by longer than {MAX_REQUESTED_BY_LENGTH}"
            )


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
