"""The applier: every Kubernetes, AWS and state write of a run goes through here, and nowhere else.

It holds the run's action log (`records`: done, dry-run, skipped, blocked, failed, each with its
reason) and applies ONE error policy, decided here and only here:

    raised by the write                           outcome
    LeaseHeldError                                re-raised: the lease is lost, the run ends; no
                                                  write of this run follows
    EvictionBlockedError (429, a PDB)             BLOCKED: not now; a later run retries
    AuthError (401/403: AccessDenied on one ASG,  FAILED, isolated to that object: recorded, counted
      a NamespaceTerminating eviction),           in the ActionFailures metric, put in the report and
      ConflictError (409), NotFoundError (404),   the notification (a CloudWatch alarm fires on it);
      ActionError, ReadError, ThrottledError      every other object and group of the run proceeds,
                                                  and the next run plans the object afresh

(A conflict or a missing object right after the fresh re-read is rare; it is counted like any other
failure so that a systematic one, e.g. something rewriting every node, is seen. Missing objects that
mean success are success in the adapters: an evicted pod already gone, a deleted node already gone.)

Fencing: before each batch of Kubernetes or AWS writes (a run of writes of one kind: cordons,
terminations, evictions, pod deletions, desired-capacity changes, and the non-destructive uncordons,
unmarks, ProvisioningRequest answers and Events alike, and at least every FENCE_EVERY writes within
one) the applier confirms with the store that the lease is still ours (`LeaseGuard.confirm`, the
fencing counter), and again before a write that a destructive one makes necessary right after it
(deleting the Node of a terminated instance; that check also fences the batch's next write). A stale
run must not undo what the new owner just did (an uncordon of its fresh cordon), so a write that
gives capacity back is fenced like one that takes it. State-store writes carry the lease and the
store refuses them conditionally (the store is the fence); before those the applier only renews a
lease about to end. After a failed read (`forbid_destructive`), the run makes no destructive write at
all: each is SKIPPED with the read's error.

Dry run: each write is recorded as DRY_RUN and reported done to the caller; nothing is called.

Adding a kind of write is one method here (and an `ActionKind`): build the port call as a zero-argument
callable and hand it to `_write` with the kind, the target, the group and the reason, saying whether
it is destructive (refused after a failed read; every Kubernetes or AWS write is fenced before its
batch). `unmark` below is the smallest example:

    def unmark(self, node: str, key: str, group: str, reason: str) -> bool:
        return self._write(ActionKind.UNMARK, node, group, reason,
                           partial(self._cluster.untaint_node, node, key), destructive=False)

The method returns True when done (or, in dry run, would be attempted); the caller never catches.

Outside the policy, as reporting: the status ConfigMap (`publish_status`) is written under the lease
(and, being the scaler's own object, in a dry run too) but is not an action of the log; a failure to
write it, the lease lost included, is a warning and never an error of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from shared import constants
from shared.config import PolicyConfig
from shared.controller.lease import LeaseGuard
from shared.domain.errors import (
    ActionError,
    AuthError,
    ConflictError,
    EvictionBlockedError,
    LeaseHeldError,
    NotFoundError,
    ReadError,
    ScalerError,
    ThrottledError,
)
from shared.domain.model import AsgState, Node, Pod, Taint
from shared.domain.operations import ClusterEvent, DrainIntent, Lease
from shared.domain.provisioning import ConditionUpdate
from shared.domain.safety import Backoff, next_backoff
from shared.ports import Cluster, Fleet, StateStore
from shared.reporting import ActionKind, ActionRecord, ActionStatus, Reporter

FENCE_EVERY = 25  # a long batch confirms the lease again after this many writes
_EVENTS = "events"  # the batch of a run's Kubernetes Events (one call, no ActionKind of its own)
# One object failed; the run goes on (ActionError covers ConflictError and NotFoundError).
_ISOLATED = (AuthError, ActionError, ReadError, ThrottledError)


@dataclass(frozen=True, slots=True)
class Ports:
    """What the applier writes to."""

    cluster: Cluster
    fleet: Fleet
    state: StateStore


class Applier:
    """Performs (or, in dry run, records) every write of one run; see the module docstring."""

    def __init__(self, ports: Ports, reporter: Reporter, *, guard: LeaseGuard | None, dry_run: bool) -> None:
        self._cluster = ports.cluster
        self._fleet = ports.fleet
        self._state = ports.state
        self._reporter = reporter
        self._guard = guard
        # Without a guard only writes that need no lease may run (the AWS-events backoff).
        self.dry_run = dry_run
        self.records: list[ActionRecord] = []
        self.errors: list[str] = []  # one line per failed write (and per save that failed)
        self._read_failure = ""  # set after a failed read: no destructive write follows
        self._batch: str | None = None  # the kind of the batch of writes in progress
        self._batch_writes = 0

    # ------------------------------------------------------------------------------------ the log

    def note(
        self,
        kind: ActionKind,
        target: str,
        group: str,
        reason: str,
        status: ActionStatus = ActionStatus.DONE,
        detail: str = "",
    ) -> ActionRecord:
        """Record a decision that needs no write (a re-validation refusal, a drain finished)."""
        record = ActionRecord(kind, target, group, reason, status, detail)
        self.records.append(record)
        if status is ActionStatus.FAILED:
            self.errors.append(f"{kind} {target}: {detail}")
            self._reporter.metric(constants.METRIC_ACTION_FAILURES, 1)
        self._reporter.log_action(record)
        return record

    @property
    def changed(self) -> bool:
        return any(r.status is ActionStatus.DONE for r in self.records)

    @property
    def failures(self) -> int:
        return sum(1 for r in self.records if r.status is ActionStatus.FAILED)

    def forbid_destructive(self, error: ScalerError) -> None:
        """A read failed: nothing destructive may follow this run (the next run decides again)."""
        if not self._read_failure:
            self._read_failure = f"no destructive action after a failed read: {error}"
            self._reporter.log("error", "read failed: destructive actions stopped", error=str(error))

    def lease_lost(self, error: LeaseHeldError) -> None:
        """Another run took the lease mid-run: it owns the cluster now; the caller writes nothing more."""
        self.errors.append(f"stopped acting: the lease was lost: {type(error).__name__}: {error}")
        self._reporter.log("error", "stopped acting: the lease was lost", error=str(error))

    # ------------------------------------------------------------------------------------ policy

    def _write(
        self,
        kind: ActionKind,
        target: str,
        group: str,
        reason: str,
        write: Callable[[], object],
        *,
        destructive: bool,
        follow_up: bool = False,
        store_fenced: bool = False,
        detail: Callable[[], str] = str,
        quiet: bool = False,
    ) -> bool:
        """Apply the error policy around one write; True when done (or, in dry run, attempted).

        A `follow_up` is a write that a destructive one makes necessary right after it (the Node of a
        terminated instance): it is fenced on its own. A `store_fenced` write is a state-store write
        that carries the lease (the store refuses it once the lease is lost), so no batch check.
        `detail` says what the done write achieved (e.g. a backoff's end), read after it returned; a
        `quiet` write is recorded only when it does not succeed (bookkeeping another record tells).
        """
        if destructive and self._read_failure:
            self.note(kind, target, group, reason, ActionStatus.SKIPPED, self._read_failure)
            return False
        if self.dry_run:
            self.note(kind, target, group, reason, ActionStatus.DRY_RUN)
            return True
        self._fence(None if store_fenced else kind, follow_up=follow_up)
        try:
            write()
        except LeaseHeldError:
            raise
        except EvictionBlockedError as exc:
            self.note(kind, target, group, reason, ActionStatus.BLOCKED, str(exc))
            return False
        except _ISOLATED as exc:
            self.note(kind, target, group, reason, ActionStatus.FAILED, f"{type(exc).__name__}: {exc}")
            return False
        if not quiet:
            self.note(kind, target, group, reason, detail=detail())
        return True

    def _fence(self, batch: str | None, *, follow_up: bool = False) -> None:
        """Confirm the lease before a batch of Kubernetes or AWS writes (and every FENCE_EVERY writes)
        and before a follow-up write; keep it alive before a state-store write (`batch` None)."""
        if self._guard is None:
            if batch is not None or follow_up:
                raise AssertionError(f"{batch or 'a follow-up write'} without the lease")
            return
        if follow_up:
            # The batch's write took a while (a termination can): confirm again, and let this
            # confirmation fence the batch's next write too, so a batch costs one check per follow-up.
            self._guard.confirm()
            self._batch_writes = 0
            return
        if batch is None:
            self._guard.keep()
            return
        if batch is not self._batch or self._batch_writes >= FENCE_EVERY:
            self._guard.confirm()
            self._batch, self._batch_writes = batch, 0
        else:
            self._guard.keep()
        self._batch_writes += 1

    def _lease(self) -> Lease:
        assert self._guard is not None
        return self._guard.keep()

    # ------------------------------------------------------------------------------------ writes

    def terminate(
        self, instance_id: str, node: str | None, group: str, reason: str, *, decrement: bool, region: str
    ) -> bool:
        """Terminate one instance (decrementing desired, or letting the group replace it), then delete
        its Node object so the scheduler stops counting it at once (best effort)."""
        done = self._write(
            ActionKind.TERMINATE,
            node or instance_id,
            group,
            reason,
            partial(self._fleet.terminate_instance, instance_id, decrement=decrement, region=region),
            destructive=True,
        )
        if done and node:
            self._write(
                ActionKind.DELETE_NODE,
                node,
                group,
                "its instance was terminated",
                partial(self._cluster.delete_node, node),
                destructive=False,
                follow_up=True,
            )
        return done

    def delete_node(self, node: str, group: str, reason: str) -> bool:
        """Delete the Node object of an instance that is gone (a termination whose response was lost
        left it behind); destructive: none follows a failed read."""
        return self._write(
            ActionKind.DELETE_NODE,
            node,
            group,
            reason,
            partial(self._cluster.delete_node, node),
            destructive=True,
        )

    def set_desired(self, asg: AsgState, desired: int, group: str, reason: str) -> bool:
        """Set an absolute desired capacity (callers take it from `safety.desired_to_set`)."""
        return self._write(
            ActionKind.SET_DESIRED,
            asg.name,
            group,
            reason,
            partial(self._fleet.set_desired_capacity, asg, desired),
            destructive=True,
        )

    def cordon(self, node: Node, group: str, reason: str, at: datetime, *, retry_conflict: bool) -> bool:
        """Cordon only if the node is unchanged since read; with `retry_conflict`, re-read once."""
        return self._write(
            ActionKind.CORDON,
            node.name,
            group,
            reason,
            partial(self._cordon, node, at, retry_conflict),
            destructive=True,
        )

    def _cordon(self, node: Node, at: datetime, retry_conflict: bool) -> None:
        try:
            self._cluster.cordon(node.name, at, resource_version=node.resource_version or None)
        except ConflictError:
            if not retry_conflict:
                raise
            fresh = self._cluster.get_node(node.name)
            if fresh is None:
                raise NotFoundError(f"node {node.name} is gone") from None
            self._cluster.cordon(node.name, at, resource_version=fresh.resource_version or None)

    def uncordon(self, node: str, group: str, reason: str) -> bool:
        """Make a node schedulable again (giving capacity back is never destructive)."""
        return self._write(
            ActionKind.UNCORDON, node, group, reason, partial(self._cluster.uncordon, node), destructive=False
        )

    def mark(self, node: Node, taint: Taint, group: str, reason: str) -> bool:
        """Put the attrition taint on a node only if it is unchanged since `node` was read (fenced:
        a mark is decided on the whole picture, so none follows a failed read)."""
        return self._write(
            ActionKind.MARK,
            node.name,
            group,
            reason,
            partial(
                self._cluster.taint_node, node.name, taint, resource_version=node.resource_version or None
            ),
            destructive=True,
        )

    def unmark(self, node: str, key: str, group: str, reason: str) -> bool:
        """Lift the attrition taint (giving room back is never destructive)."""
        return self._write(
            ActionKind.UNMARK,
            node,
            group,
            reason,
            partial(self._cluster.untaint_node, node, key),
            destructive=False,
        )

    def evict(self, pod: Pod, group: str, reason: str) -> bool:
        """Evict through the Eviction API (PodDisruptionBudgets apply)."""
        return self._remove_pod(ActionKind.EVICT, self._cluster.evict, pod, group, reason)

    def delete_pod(self, pod: Pod, group: str, reason: str) -> bool:
        """Delete a pod past PodDisruptionBudgets (a forced drain whose grace is over)."""
        return self._remove_pod(ActionKind.DELETE_POD, self._cluster.delete_pod, pod, group, reason)

    def _remove_pod(
        self, kind: ActionKind, remove: Callable[[str, str], object], pod: Pod, group: str, reason: str
    ) -> bool:
        """Take one pod off its node (a destructive write, recorded under the pod's key)."""
        return self._write(
            kind, pod.key, group, reason, partial(remove, pod.namespace, pod.name), destructive=True
        )

    def answer_request(self, update: ConditionUpdate, group: str, reason: str) -> bool:
        """Write a ProvisioningRequest's conditions (status subresource; not destructive: it buys
        or removes nothing, and a request deleted or re-created meanwhile is skipped)."""
        return self._write(
            ActionKind.ANSWER_REQUEST,
            update.key,
            group,
            reason,
            partial(self._cluster.set_provisioning_request_conditions, update),
            destructive=False,
        )

    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        """Kubernetes Events, best effort (the port never raises); how many were written."""
        if self.dry_run or not events:
            return 0
        self._fence(_EVENTS)
        written = self._cluster.record_events(events)
        self._reporter.log("info", "recorded pod events", events=len(events), written=written)
        return written

    def back_off(self, group: str, at: datetime, reason: str, policy: PolicyConfig) -> datetime | None:
        """Put a group in capacity backoff; returns its end (None: the write failed)."""
        if self.dry_run:
            until = next_backoff(Backoff(), at, policy).until
            detail = f"until {until.isoformat()}" if until else ""
            self.note(ActionKind.BACKOFF, group, group, reason, ActionStatus.DRY_RUN, detail)
            return until
        ends: list[datetime] = []

        def write() -> None:
            lease = self._guard.lease if self._guard else None  # unleased: the AWS-events backoff
            ends.append(self._state.record_capacity_failure(lease, group, at))

        self._write(
            ActionKind.BACKOFF,
            group,
            group,
            reason,
            write,
            destructive=False,
            store_fenced=True,
            detail=lambda: f"until {ends[0].isoformat()}",
        )
        return ends[0] if ends else None

    def store_intent(self, intent: DrainIntent, reason: str) -> DrainIntent | None:
        """Store a drain intent over the revision read; the intent as stored, or None if it was not."""
        if self.dry_run:
            self.note(ActionKind.DRAIN, intent.group, intent.group, reason, ActionStatus.DRY_RUN)
            return intent
        stored: list[DrainIntent] = []
        self._write(
            ActionKind.DRAIN,
            intent.group,
            intent.group,
            reason,
            lambda: stored.append(self._state.put_drain_intent(self._lease(), intent)),
            destructive=False,
            store_fenced=True,
        )
        return stored[0] if stored else None

    def forget_intent(self, intent: DrainIntent, reason: str) -> bool:
        """Delete a finished or expired drain intent (if unchanged since read)."""
        return self._write(
            ActionKind.DRAIN,
            intent.group,
            intent.group,
            reason,
            lambda: self._state.delete_drain_intent(self._lease(), intent),
            destructive=False,
            store_fenced=True,
            quiet=True,  # the drain's own record says it finished or was given up
        )

    def publish_status(self, namespace: str, name: str, data: Mapping[str, str]) -> bool:
        """Patch the status ConfigMap's `data` (shared.controller.status); True when written.

        The run's last write and only a report: whatever it raises is a warning (the next run writes
        again), never an error or an action of the run. Written in a dry run too (the document says
        dryRun): it is the scaler's own object, and how a shadow trial is watched.
        """
        try:
            self._fence(None)
            self._cluster.patch_config_map(namespace, name, data)
        except ScalerError as exc:  # LeaseHeldError included: the run is over, nothing follows
            self._reporter.log(
                "warning",
                "status ConfigMap not written",
                configmap=f"{namespace}/{name}",
                error=str(exc),
                error_type=type(exc).__name__,
            )
            return False
        return True

    def save(self, what: str, write: Callable[[Lease], object]) -> bool:
        """A state write under the lease (idle-since, first seen, pod memory, scale times).

        Not an action of the log: a failure is an error of the run, and the next run writes again.
        """
        if self.dry_run:
            return True
        try:
            write(self._lease())
        except LeaseHeldError:
            raise
        except ScalerError as exc:
            self.errors.append(f"save {what}: {exc}")
            self._reporter.metric(constants.METRIC_ACTION_FAILURES, 1)
            self._reporter.log("error", "saving state failed", what=what, error=str(exc))
            return False
        return True
