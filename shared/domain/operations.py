"""Value objects of the imperative shell: leases, scaling failures, drain intents, events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

# Bounds of a drain intent, which is stored as one DynamoDB item (at most 400 KB). Kubernetes caps
# node names at 253 characters; 1,400 such names with their terms, 256 four-byte characters of
# requester and the other attributes come to about 384 KB (tests/unit/test_force_scale_down.py
# stores that worst case).
MAX_NODE_NAME_LENGTH = 253
MAX_GROUP_NAME_LENGTH = 128
MAX_REQUESTED_BY_LENGTH = 256
MAX_INTENT_NODES = 1_400
# A forced scale-down drains at most this many nodes of a group at once (with the drain in progress),
# which leaves the intent room for spot interruption holds up to MAX_INTENT_NODES.
MAX_DRAIN_NODES = 1_000
# The requester of a hold-only intent: a Spot or reservation interruption warning cordons the node
# and buys room for its pods ahead, and evicts nothing (EC2 reclaims the node).
INTERRUPTION_REQUESTER = "spot-interruption"


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
class NodeDrain:
    """How one node of a drain is drained: as the request that put it in the drain asked, whatever
    requests joined the drain later (one may not shorten another's grace, nor force its deletions)."""

    hold_only: bool = False  # an interruption warning's hold: cordoned, nothing evicted
    delete_after: datetime | None = None  # forced: pods PDBs keep are deleted from then on; None: never


@dataclass(frozen=True, slots=True)
class DrainIntent:
    """A forced scale-down in progress, stored so later reconcile runs finish it.

    The intent's own times, grace, force and requester are those of the request that started it;
    `terms` holds each node's own (a node without an entry is drained by the intent's).
    """

    group: str
    nodes: tuple[str, ...]  # nodes chosen to drain and terminate
    requested_at: datetime
    expires_at: datetime  # give up (leave cordoned, report) after this
    grace_seconds: int = 300  # evictions go through PDBs until this much time has passed
    force: bool = False  # after the grace, delete pods even when PDBs block
    requested_by: str = ""
    revision: int = 0  # the stored version this was read at (0: not stored); writes are conditional on it
    terms: Mapping[str, NodeDrain] = field(default_factory=dict)  # node -> its own terms

    def terms_of(self, node: str) -> NodeDrain:
        """How `node` is drained: its own terms, else the intent's."""
        found = self.terms.get(node)
        return found if found is not None else self._own_terms()

    def _own_terms(self) -> NodeDrain:
        return NodeDrain(
            hold_only=self.requested_by == INTERRUPTION_REQUESTER,
            delete_after=self.requested_at + timedelta(seconds=self.grace_seconds) if self.force else None,
        )

    def with_terms(self, terms: Mapping[str, NodeDrain]) -> DrainIntent:
        """This intent with its nodes' own terms; those equal to the intent's are left out, so that
        equal drains are equal intents however they were built (merged, or read back)."""
        own, nodes = self._own_terms(), set(self.nodes)
        return replace(self, terms={n: t for n, t in terms.items() if n in nodes and t != own})

    @property
    def held(self) -> tuple[str, ...]:
        """Nodes only held for an interruption warning (cordoned, nothing evicted)."""
        return tuple(n for n in self.nodes if self.terms_of(n).hold_only)

    @property
    def oversize(self) -> str | None:
        """Why this intent must not be stored (None: it fits one item), judged at each write, not at
        a read: an intent a previous version stored with more nodes (1,500, without terms) still
        loads and finishes, and a merge past the bound is refused where it would be written."""
        if len(self.nodes) > MAX_INTENT_NODES:
            return f"{len(self.nodes)} nodes, at most {MAX_INTENT_NODES} fit in one stored item"
        return None

    def __post_init__(self) -> None:
        # The stored item must fit DynamoDB's 400 KB: a bigger intent is a bug upstream, not data.
        if len(self.group) > MAX_GROUP_NAME_LENGTH:
            raise ValueError(f"drain intent: group name longer than {MAX_GROUP_NAME_LENGTH} characters")
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
