"""`DynamoDbStateStore`: the `StateStore` port on one DynamoDB table (single-table design).

One partition per cluster, one item per fact; times are epoch seconds (exact to the microsecond):

    pk                  sk                  attributes
    CLUSTER#<cluster>   LEASE               owner, expires_at, fence, acquired_at, ttl (expiry + 1 h)
    CLUSTER#<cluster>   NODE#<node>         node, idle_since, updated_at, ttl (+7 d without update)
    CLUSTER#<cluster>   INSTANCE#<id>       instance_id, first_seen, updated_at, ttl (+7 d)
    CLUSTER#<cluster>   GROUP#<group>       group, backoff_until, failures, last_failure,
                                            last_scale_up, ttl (last write + backoff reset + 1 d)
    CLUSTER#<cluster>   DRAIN#<group>       group, nodes, requested_at, expires_at, grace_seconds,
                                            force, requested_by, revision, ttl (expires_at + 1 d)
    CLUSTER#<cluster>   POD#<ns>/<name>     pod, uid, counted_on, counted_since, distrusted (list),
                                            bought, refused (maps group -> time), updated_at,
                                            ttl (+7 d without update); empty attributes are left out

Pod memory is one item per pod, not one map: thousands of pending pods would not fit DynamoDB's
400 KB item limit, and a run rewrites only the pods whose memory changed. One pod's item stays far
below the limit: at most MAX_STORED_DISTRUSTED distrusted nodes are kept (the newest).

Single writer: the LEASE item is taken with a conditional update that bumps the fencing counter
`fence`; every write made under a lease is a transaction whose first item is a ConditionCheck on
LEASE (owner and fence unchanged), so a run that lost its lease can no longer write (fencing);
`renew_lease` is the same check for the run's writes elsewhere (the controller confirms it before each
destructive batch). `LeaseFence` is the one home of the LEASE item and of that check; the store hands
it every write it makes under a lease. Drain intents carry a `revision`: each write is conditional on the
revision read.
TTL only collects garbage (abandoned clusters, stale items); nothing depends on when it fires.

Errors: ConditionalCheckFailed on the lease -> LeaseHeldError; other failures -> ReadError for reads
(and lease acquisition), ActionError for writes, AuthError for denied credentials. Throttling folds
into ReadError / ActionError, as the port's contracts say.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.clients import BOTO_ERRORS, AwsClient, error_code, scaler_error
from shared.config import PolicyConfig
from shared.domain.checkpoint import MIGRATION_WINDOW, remember_moves
from shared.domain.errors import ActionError, ConflictError, LeaseHeldError, ReadError, ScalerError
from shared.domain.model import GroupState, NodeState, PodMemory, ScalerState
from shared.domain.operations import DrainIntent, Lease, NodeDrain
from shared.domain.safety import Backoff, is_counted, next_backoff

logger = logging.getLogger(__name__)

PK = constants.TABLE_PARTITION_KEY
SK = constants.TABLE_SORT_KEY
TTL = constants.TABLE_TTL_ATTRIBUTE

LEASE_SK = "LEASE"
NODE_PREFIX = "NODE#"
INSTANCE_PREFIX = "INSTANCE#"
GROUP_PREFIX = "GROUP#"
DRAIN_PREFIX = "DRAIN#"
POD_PREFIX = "POD#"

NODE_TTL = timedelta(days=7)
INSTANCE_TTL = timedelta(days=7)
POD_TTL = timedelta(days=7)
GROUP_TTL_MARGIN = timedelta(days=1)
DRAIN_TTL_MARGIN = timedelta(days=1)
LEASE_TTL_MARGIN = timedelta(hours=1)

# A transaction holds at most 100 items (one of them is the lease check) and 4 MB.
MAX_TRANSACTION_ITEMS = 100
MAX_TRANSACTION_BYTES = 3_500_000  # a margin under 4 MB for DynamoDB's own size accounting
# Node names are at most 253 bytes: 500 of them keep a pod's item near 130 KB, under the 400 KB limit.
MAX_STORED_DISTRUSTED = 500
# Concurrent failure records of one group (reconcile and the AWS-events function) retry this often.
MAX_BACKOFF_WRITE_ATTEMPTS = 5

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_TIME = "0"


def create_table(client: AwsClient, table_name: str) -> None:
    """Create the state table (pk/sk strings, on demand, TTL on); an existing table is kept."""
    try:
        client.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": PK, "KeyType": "HASH"}, {"AttributeName": SK, "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": PK, "AttributeType": "S"},
                {"AttributeName": SK, "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    except BOTO_ERRORS as exc:
        if error_code(exc) != "ResourceInUseException":
            raise scaler_error(exc, ActionError, f"create table {table_name}") from exc
    try:
        client.get_waiter("table_exists").wait(
            TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL}
        )
    except BOTO_ERRORS as exc:
        # Enabling TTL twice is refused with a ValidationException; the table is usable either way.
        if error_code(exc) != "ValidationException":
            raise scaler_error(exc, ActionError, f"enable TTL on {table_name}") from exc


class LeaseFence:
    """The cluster's LEASE item: taking, renewing and giving back the lease, and the writes it fences.

    Every write made under a lease is a transaction (`transact`) whose first item checks that the lease
    is still the writer's: owner and fencing token unchanged.
    """

    def __init__(self, client: AwsClient, table_name: str, cluster: str, key: Mapping[str, Any]) -> None:
        self._client = client
        self._table = table_name
        self._cluster = cluster
        self._key = dict(key)  # the LEASE item's key

    def acquire(self, owner: str, now: datetime, ttl_seconds: int) -> Lease:
        """The port's `acquire_lease`: a conditional update that bumps the fencing token."""
        if not owner:
            raise ValueError("lease owner must not be empty")
        if ttl_seconds <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl_seconds}")
        expires_at = now + timedelta(seconds=ttl_seconds)
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key,
                # A missing item starts its fence at the current time in milliseconds, not 0: once TTL
                # removes an old lease item, tokens still only grow (acquisitions are far rarer than
                # one per millisecond), so a holder from before the deletion can never match again.
                UpdateExpression=(
                    "SET #owner = :owner, #expires = :expires, #acquired = :now, #ttl = :ttl, "
                    "#fence = if_not_exists(#fence, :seed) + :one"
                ),
                ConditionExpression="attribute_not_exists(#pk) OR #expires < :now OR #owner = :owner",
                ExpressionAttributeNames={
                    "#pk": PK,
                    "#owner": "owner",
                    "#expires": "expires_at",
                    "#acquired": "acquired_at",
                    "#fence": "fence",
                    "#ttl": TTL,
                },
                ExpressionAttributeValues={
                    ":owner": _s(owner),
                    ":expires": _n(_epoch(expires_at)),
                    ":now": _n(_epoch(now)),
                    ":ttl": _n(str(_ttl(expires_at + LEASE_TTL_MARGIN))),
                    ":seed": _n(str(_epoch_ms(now))),
                    ":one": _n("1"),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except BOTO_ERRORS as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise LeaseHeldError(_held_by(exc, self._cluster)) from exc
            raise scaler_error(
                exc, ReadError, f"acquire lease of {self._cluster}", throttled=ReadError
            ) from exc
        item = response["Attributes"]
        return Lease(
            cluster=self._cluster,
            owner=owner,
            expires_at=expires_at,
            fencing_token=int(item["fence"]["N"]),
        )

    def renew(self, lease: Lease, now: datetime, ttl_seconds: int) -> Lease:
        """The port's `renew_lease`: a conditional update on owner and fencing token."""
        if ttl_seconds <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl_seconds}")
        expires_at = now + timedelta(seconds=ttl_seconds)
        try:
            ours = _ours(lease)
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="SET #expires = :expires, #ttl = :ttl",
                ConditionExpression=ours["ConditionExpression"],
                ExpressionAttributeNames={
                    **ours["ExpressionAttributeNames"],
                    "#expires": "expires_at",
                    "#ttl": TTL,
                },
                ExpressionAttributeValues={
                    **ours["ExpressionAttributeValues"],
                    ":expires": _n(_epoch(expires_at)),
                    ":ttl": _n(str(_ttl(expires_at + LEASE_TTL_MARGIN))),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except BOTO_ERRORS as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise LeaseHeldError(
                    f"the lease of {self._cluster} is no longer {lease.owner}'s "
                    f"(fencing token {lease.fencing_token}): {_held_by(exc, self._cluster)}"
                ) from exc
            raise scaler_error(
                exc, ReadError, f"renew lease of {self._cluster}", throttled=ReadError
            ) from exc
        return Lease(lease.cluster, lease.owner, expires_at, lease.fencing_token)

    def release(self, lease: Lease) -> None:
        """The port's `release_lease`: expire the lease now if still ours (its fence stays); never raises."""
        ours = _ours(lease)
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="SET #expires = :zero",
                ConditionExpression=ours["ConditionExpression"],
                ExpressionAttributeNames={**ours["ExpressionAttributeNames"], "#expires": "expires_at"},
                ExpressionAttributeValues={**ours["ExpressionAttributeValues"], ":zero": _n(_NO_TIME)},
            )
        except BOTO_ERRORS as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                logger.info("lease of %s was no longer ours to release", self._cluster)
            else:
                logger.warning("could not release the lease of %s", self._cluster, exc_info=True)
        except Exception:  # the contract says never raises: a failed release only delays the next run
            logger.warning("could not release the lease of %s", self._cluster, exc_info=True)

    def transact_all(self, lease: Lease, writes: Sequence[dict[str, Any]], what: str) -> None:
        """Apply `writes` in transactions of up to 99 writes and ~3.5 MB, each guarded by the lease check."""
        batch: list[dict[str, Any]] = []
        size = 0
        for write in writes:
            write_size = len(json.dumps(write, separators=(",", ":")))
            if batch and (
                len(batch) == MAX_TRANSACTION_ITEMS - 1 or size + write_size > MAX_TRANSACTION_BYTES
            ):
                self.transact(lease, batch, what)
                batch, size = [], 0
            batch.append(write)
            size += write_size
        if batch:
            self.transact(lease, batch, what)

    def transact(self, lease: Lease, writes: Sequence[dict[str, Any]], what: str) -> None:
        """One transaction guarded by the lease; raises _ConditionFailed(index) for a write's condition."""
        try:
            self._client.transact_write_items(TransactItems=[self._check(lease), *writes])
        except BOTO_ERRORS as exc:
            reasons = _cancellation_codes(exc)
            if reasons and reasons[0] == "ConditionalCheckFailed":
                raise LeaseHeldError(
                    f"{what}: the lease of {self._cluster} is no longer {lease.owner}'s "
                    f"(fencing token {lease.fencing_token})"
                ) from exc
            if "ConditionalCheckFailed" in reasons[1:]:
                raise _ConditionFailed(what) from exc
            raise scaler_error(exc, ActionError, what, throttled=ActionError) from exc

    def _check(self, lease: Lease) -> dict[str, Any]:
        if lease.cluster != self._cluster:
            raise ValueError(f"lease of cluster {lease.cluster!r} used for {self._cluster!r}")
        return {"ConditionCheck": {"TableName": self._table, "Key": self._key, **_ours(lease)}}


class DynamoDbStateStore:
    """The durable state of one cluster in a DynamoDB table."""

    def __init__(
        self,
        table_name: str,
        cluster: str,
        policy: PolicyConfig,
        client: AwsClient | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._table = table_name
        self._cluster = cluster
        self._policy = policy
        self._client = client if client is not None else clients.client("dynamodb")
        # Only TTLs of writes whose port method has no `now` read it.
        self._clock = clock or (lambda: datetime.now(UTC))
        self._pk = f"CLUSTER#{cluster}"
        self._fence = LeaseFence(self._client, table_name, cluster, self._key(LEASE_SK))

    # Lease (the LEASE item and the fencing of every write under it: `LeaseFence`)

    def acquire_lease(self, owner: str, now: datetime, ttl_seconds: int) -> Lease:
        """Take the lease if free, expired or ours, bumping its fencing token.

        Raises LeaseHeldError, ReadError, AuthError.
        """
        return self._fence.acquire(owner, now, ttl_seconds)

    def renew_lease(self, lease: Lease, now: datetime, ttl_seconds: int) -> Lease:
        """Extend the lease if its owner and fencing token are unchanged (the fence of a run).

        Raises LeaseHeldError (another run took it), ReadError, AuthError.
        """
        return self._fence.renew(lease, now, ttl_seconds)

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back if still ours (expire it now, keep its fence); never raises."""
        self._fence.release(lease)

    # Reads

    def load(self) -> ScalerState:
        """Everything stored for the cluster, from one strongly consistent query. Raises ReadError."""
        nodes: dict[str, NodeState] = {}
        groups: dict[str, GroupState] = {}
        first_seen: dict[str, datetime] = {}
        pods: dict[str, PodMemory] = {}
        for item in self._query(""):
            sk = item[SK]["S"]
            try:
                if sk.startswith(POD_PREFIX):
                    pods[sk.removeprefix(POD_PREFIX)] = _pod_memory_from_item(item)
                elif sk.startswith(NODE_PREFIX):
                    nodes[sk.removeprefix(NODE_PREFIX)] = NodeState(idle_since=_time(item, "idle_since"))
                elif sk.startswith(INSTANCE_PREFIX):
                    seen = _time(item, "first_seen")
                    if seen is not None:
                        first_seen[sk.removeprefix(INSTANCE_PREFIX)] = seen
                elif sk.startswith(GROUP_PREFIX):
                    groups[sk.removeprefix(GROUP_PREFIX)] = GroupState(
                        backoff_until=_time(item, "backoff_until"),
                        last_scale_up=_time(item, "last_scale_up"),
                        last_scale_down=_time(item, "last_scale_down"),
                        migrated_at=_migrations(item),
                        moved_jobs=_moved_jobs(item),
                    )
            except (KeyError, TypeError, ValueError, ArithmeticError):
                # Every fact here degrades safely when forgotten (idleness restarts, no backoff, the
                # instance looks new), so one hand-edited item must not stop the scaler.
                logger.warning("ignoring malformed state item %s", sk, exc_info=True)
        return ScalerState(nodes=nodes, groups=groups, instances_first_seen=first_seen, pods=pods)

    def drain_intents(self) -> tuple[DrainIntent, ...]:
        """Stored drain intents, by group. Raises ReadError."""
        intents = []
        for item in self._query(DRAIN_PREFIX):
            try:
                intents.append(_drain_from_item(item))
            except (KeyError, TypeError, ValueError, ArithmeticError):
                logger.warning("ignoring malformed drain intent %s", item.get(SK), exc_info=True)
        return tuple(sorted(intents, key=lambda i: i.group))

    # Writes under the lease

    def save_node_idle_since(self, lease: Lease, idle_since: Mapping[str, datetime], now: datetime) -> None:
        """Replace the idle-since map (writes only what changed). Raises LeaseHeldError, ActionError."""
        wanted = {node: {"node": _s(node), "idle_since": _n(_epoch(at))} for node, at in idle_since.items()}
        self._replace(lease, NODE_PREFIX, wanted, now, NODE_TTL)

    def save_instances_first_seen(self, lease: Lease, first_seen: Mapping[str, datetime]) -> None:
        """Replace the first-seen map of instances. Raises LeaseHeldError, ActionError."""
        wanted = {
            instance: {"instance_id": _s(instance), "first_seen": _n(_epoch(at))}
            for instance, at in first_seen.items()
        }
        self._replace(lease, INSTANCE_PREFIX, wanted, self._clock(), INSTANCE_TTL)

    def save_pod_memory(self, lease: Lease, memory: Mapping[str, PodMemory]) -> None:
        """Replace the pod memory, one item per pod (writes only what changed, deletes the forgotten).

        Raises LeaseHeldError, ActionError.
        """
        wanted = {pod: _pod_memory_attributes(pod, record) for pod, record in memory.items()}
        self._replace(lease, POD_PREFIX, wanted, self._clock(), POD_TTL)

    def record_scale_up(self, lease: Lease, group: str, at: datetime) -> None:
        """Remember when a group last grew. Raises LeaseHeldError, ActionError."""
        self._record_group_time(lease, group, "last_scale_up", at, "scale-up")

    def record_scale_down(self, lease: Lease, group: str, at: datetime) -> None:
        """Remember when the scaler last terminated nodes of a group. Raises LeaseHeldError, ActionError."""
        self._record_group_time(lease, group, "last_scale_down", at, "scale-down")

    def record_migration(
        self,
        lease: Lease,
        group: str,
        at: datetime,
        jobs: Sequence[str] = (),
        present: Collection[str] = (),
    ) -> None:
        """Remember a migration of a group, keeping the last hour's (the per-hour budget; a single
        writer holds the lease, so reading then writing the list loses nothing). Raises
        LeaseHeldError, ActionError."""
        item = self._get(GROUP_PREFIX + group) or {}
        kept = [t for t in _migrations(item) if at - t < MIGRATION_WINDOW]
        times = {"L": [_n(_epoch(t)) for t in sorted([*kept, at])]}
        moves = remember_moves(_moved_jobs(item), jobs, at, present)
        moved = {
            "M": {job: {"L": [_n(str(n)), _n(_epoch(last))]} for job, (n, last) in sorted(moves.items())}
        }
        update = {
            "Update": {
                "TableName": self._table,
                "Key": self._key(GROUP_PREFIX + group),
                "UpdateExpression": "SET #group = :group, #m = :m, #j = :j, #ttl = :ttl",
                "ExpressionAttributeNames": {
                    "#group": "group",
                    "#m": "migrated_at",
                    "#j": "moved_jobs",
                    "#ttl": TTL,
                },
                "ExpressionAttributeValues": {
                    ":group": _s(group),
                    ":m": times,
                    ":j": moved,
                    ":ttl": _n(str(self._group_ttl(at))),
                },
            }
        }
        self._fence.transact_all(lease, [update], f"record migration of {group}")

    def _record_group_time(self, lease: Lease, group: str, attribute: str, at: datetime, what: str) -> None:
        update = {
            "Update": {
                "TableName": self._table,
                "Key": self._key(GROUP_PREFIX + group),
                "UpdateExpression": "SET #group = :group, #at = :at, #ttl = :ttl",
                "ExpressionAttributeNames": {"#group": "group", "#at": attribute, "#ttl": TTL},
                "ExpressionAttributeValues": {
                    ":group": _s(group),
                    ":at": _n(_epoch(at)),
                    ":ttl": _n(str(self._group_ttl(at))),
                },
            }
        }
        self._fence.transact_all(lease, [update], f"record {what} of {group}")

    def record_capacity_failure(self, lease: Lease | None, group: str, at: datetime) -> datetime:
        """Put a group in exponential backoff and return its end; idempotent per failure time.

        Raises LeaseHeldError (lease given and lost), ActionError.
        """
        for _ in range(MAX_BACKOFF_WRITE_ATTEMPTS):
            item = self._get(GROUP_PREFIX + group)
            previous = Backoff(
                _int(item, "failures", 0), _time(item, "last_failure"), _time(item, "backoff_until")
            )
            after = next_backoff(previous, at, self._policy)
            assert after.until is not None
            if is_counted(previous, at):
                return after.until  # the same failure again, or an older one arriving late
            if self._write_failure(lease, group, at, after.failures, after.until, item):
                return after.until
        raise ActionError(f"record capacity failure of {group}: too many concurrent updates")

    # Drain intents: under the lease, and only over the revision read (no lost update)

    def put_drain_intent(self, lease: Lease, intent: DrainIntent) -> DrainIntent:
        """Store a drain intent over the revision it was read at; returns it with its new revision.

        Raises LeaseHeldError, ConflictError (the stored intent changed since read), ActionError.
        """
        what = f"store drain intent of {intent.group}"
        if intent.oversize:
            raise ActionError(f"{what}: {intent.oversize}")
        stored = replace(intent, revision=intent.revision + 1)
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": _drain_item(self._key(DRAIN_PREFIX + stored.group), stored),
        }
        put.update(_revision_condition(intent.revision))
        try:
            self._fence.transact(lease, [{"Put": put}], what)
        except _ConditionFailed as exc:
            raise ConflictError(f"{what}: it changed since revision {intent.revision} was read") from exc
        return stored

    def delete_drain_intent(self, lease: Lease, intent: DrainIntent) -> None:
        """Forget a drain intent if still at the revision read (a missing one is success).

        Raises LeaseHeldError, ConflictError, ActionError.
        """
        delete: dict[str, Any] = {"TableName": self._table, "Key": self._key(DRAIN_PREFIX + intent.group)}
        delete.update(_revision_condition(intent.revision, missing_ok=True))
        what = f"delete drain intent of {intent.group}"
        try:
            self._fence.transact(lease, [{"Delete": delete}], what)
        except _ConditionFailed as exc:
            raise ConflictError(f"{what}: it changed since revision {intent.revision} was read") from exc

    # Internals

    def _key(self, sk: str) -> dict[str, Any]:
        return {PK: _s(self._pk), SK: _s(sk)}

    def _query(self, prefix: str) -> list[dict[str, Any]]:
        params: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "ExpressionAttributeNames": {"#pk": PK},
            "ExpressionAttributeValues": {":pk": _s(self._pk)},
            "KeyConditionExpression": "#pk = :pk",
        }
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(#sk, :prefix)"
            params["ExpressionAttributeNames"]["#sk"] = SK
            params["ExpressionAttributeValues"][":prefix"] = _s(prefix)
        try:
            return [
                item
                for page in self._client.get_paginator("query").paginate(**params)
                for item in page["Items"]
            ]
        except BOTO_ERRORS as exc:
            raise scaler_error(exc, ReadError, f"load state of {self._cluster}", throttled=ReadError) from exc

    def _get(self, sk: str) -> dict[str, Any] | None:
        try:
            response = self._client.get_item(TableName=self._table, Key=self._key(sk), ConsistentRead=True)
        except BOTO_ERRORS as exc:
            raise scaler_error(
                exc, ActionError, f"read {sk} of {self._cluster}", throttled=ActionError
            ) from exc
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _replace(
        self,
        lease: Lease,
        prefix: str,
        wanted: Mapping[str, Mapping[str, Any]],
        now: datetime,
        lifetime: timedelta,
    ) -> None:
        """Make the `prefix` items exactly `wanted` (name -> attributes), writing only what changed."""
        try:
            stored = {item[SK]["S"].removeprefix(prefix): item for item in self._query(prefix)}
        except ReadError as exc:
            raise ActionError(str(exc)) from exc
        # Unchanged items are rewritten only once half their lifetime has passed, to keep them alive.
        refresh_before = _ttl(now + lifetime / 2)
        ttl = _ttl(now + lifetime)
        writes: list[dict[str, Any]] = []
        for name, attributes in sorted(wanted.items()):
            old = stored.get(name)
            if old is not None and _same_facts(old, attributes) and _int(old, TTL, 0) >= refresh_before:
                continue
            item = {
                **self._key(prefix + name),
                **attributes,
                "updated_at": _n(_epoch(now)),
                TTL: _n(str(ttl)),
            }
            writes.append({"Put": {"TableName": self._table, "Item": item}})
        for name in sorted(stored.keys() - wanted.keys()):
            writes.append({"Delete": {"TableName": self._table, "Key": self._key(prefix + name)}})
        self._fence.transact_all(lease, writes, f"save {prefix.rstrip('#').lower()} state")

    def _write_failure(
        self,
        lease: Lease | None,
        group: str,
        at: datetime,
        failures: int,
        until: datetime,
        previous: Mapping[str, Any] | None,
    ) -> bool:
        """Write one failure if the item is unchanged since read; False when someone else wrote first."""
        update = {
            "TableName": self._table,
            "Key": self._key(GROUP_PREFIX + group),
            **_failure_update(group, at, failures, until, previous, self._group_ttl(at)),
        }
        what = f"record capacity failure of {group}"
        if lease is not None:
            try:
                self._fence.transact(lease, [{"Update": update}], what)
            except _ConditionFailed:
                return False
            return True
        try:
            self._client.update_item(**update)
        except BOTO_ERRORS as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise scaler_error(exc, ActionError, what, throttled=ActionError) from exc
        return True

    def _group_ttl(self, at: datetime) -> int:
        return _ttl(at + timedelta(seconds=self._policy.backoff_reset_seconds) + GROUP_TTL_MARGIN)


class _ConditionFailed(ScalerError):
    """A write's own condition (not the lease's) failed inside a transaction."""


def _drain_item(key: Mapping[str, Any], intent: DrainIntent) -> dict[str, Any]:
    return {
        **key,
        "group": _s(intent.group),
        "nodes": {"L": [_s(node) for node in intent.nodes]},
        "delete_after": {"L": [_n(_drain_code(intent.terms_of(node))) for node in intent.nodes]},
        "requested_at": _n(_epoch(intent.requested_at)),
        "expires_at": _n(_epoch(intent.expires_at)),
        "grace_seconds": _n(str(intent.grace_seconds)),
        "force": {"BOOL": intent.force},
        "requested_by": _s(intent.requested_by),
        "revision": _n(str(intent.revision)),
        TTL: _n(str(_ttl(intent.expires_at + DRAIN_TTL_MARGIN))),
    }


# Each node's terms, in a list beside `nodes` (a few bytes a node: the item's size is bounded by
# MAX_INTENT_NODES names): when pods PDBs keep are deleted, 0 for never, -1 for a node only held.
_NEVER, _HELD = "0", "-1"


def _drain_code(terms: NodeDrain) -> str:
    if terms.hold_only:
        return _HELD
    return _NEVER if terms.delete_after is None else _epoch(terms.delete_after)


def _node_drain(code: str) -> NodeDrain:
    if code == _HELD:
        return NodeDrain(hold_only=True)
    return NodeDrain(delete_after=None if code == _NEVER else _from_epoch(code))


def _failure_update(
    group: str, at: datetime, failures: int, until: datetime, previous: Mapping[str, Any] | None, ttl: int
) -> dict[str, Any]:
    """The update of a GROUP item for one more failure, conditional on the failure read before."""
    values = {
        ":group": _s(group),
        ":at": _n(_epoch(at)),
        ":failures": _n(str(failures)),
        ":until": _n(_epoch(until)),
        ":ttl": _n(str(ttl)),
    }
    previous_failure = (previous or {}).get("last_failure")
    if previous_failure is None:
        condition = "attribute_not_exists(#last)"
    else:
        condition = "#last = :previous"
        values[":previous"] = previous_failure
    return {
        "UpdateExpression": (
            "SET #group = :group, #last = :at, #failures = :failures, #until = :until, #ttl = :ttl"
        ),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {
            "#group": "group",
            "#last": "last_failure",
            "#failures": "failures",
            "#until": "backoff_until",
            "#ttl": TTL,
        },
        "ExpressionAttributeValues": values,
    }


def _ours(lease: Lease) -> dict[str, Any]:
    """The condition that the LEASE item is still `lease`'s: owner and fencing token unchanged."""
    return {
        "ConditionExpression": "#owner = :owner AND #fence = :fence",
        "ExpressionAttributeNames": {"#owner": "owner", "#fence": "fence"},
        "ExpressionAttributeValues": {":owner": _s(lease.owner), ":fence": _n(str(lease.fencing_token))},
    }


def _held_by(exc: BaseException, cluster: str) -> str:
    item = getattr(exc, "response", {}).get("Item") or {}
    holder = item.get("owner", {}).get("S", "another run")
    expires = item.get("expires_at", {}).get("N")
    until = f" until {_from_epoch(expires).isoformat()}" if expires else ""
    return f"the lease of {cluster} is held by {holder}{until}"


def _revision_condition(revision: int, *, missing_ok: bool = False) -> dict[str, Any]:
    """The condition of a drain intent write: the stored item is still at `revision`.

    Revision 0 means none was read: no item, or one stored before revisions existed (replaced once).
    """
    names = {"#pk": PK, "#revision": "revision"}
    if revision == 0:
        condition = "attribute_not_exists(#pk) OR attribute_not_exists(#revision)"
        return {"ConditionExpression": condition, "ExpressionAttributeNames": names}
    condition = "#revision = :revision"
    if missing_ok:
        condition = f"attribute_not_exists(#pk) OR {condition}"
    else:
        del names["#pk"]
    return {
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {":revision": _n(str(revision))},
    }


def _drain_from_item(item: Mapping[str, Any]) -> DrainIntent:
    requested_at = _time(item, "requested_at")
    expires_at = _time(item, "expires_at")
    if requested_at is None or expires_at is None:
        raise ValueError("drain intent without requested_at/expires_at")
    nodes = tuple(node["S"] for node in item.get("nodes", {}).get("L", ()))
    codes = [code["N"] for code in item.get("delete_after", {}).get("L", ())]
    # An item written before nodes had terms of their own: every node is drained by the intent's.
    terms = {n: _node_drain(c) for n, c in zip(nodes, codes, strict=True)} if codes else {}
    intent = DrainIntent(
        group=item["group"]["S"],
        nodes=nodes,
        requested_at=requested_at,
        expires_at=expires_at,
        grace_seconds=int(item.get("grace_seconds", {}).get("N", "300")),
        force=bool(item.get("force", {}).get("BOOL", False)),
        requested_by=item.get("requested_by", {}).get("S", ""),
        revision=int(item.get("revision", {}).get("N", "0")),
    )
    return intent.with_terms(terms)


def _same_facts(item: Mapping[str, Any], attributes: Mapping[str, Any]) -> bool:
    """Whether a stored item holds exactly `attributes` (its key, updated_at and ttl aside)."""
    facts = {k: v for k, v in item.items() if k not in (PK, SK, "updated_at", TTL)}
    return facts == dict(attributes)


def _times(times: Mapping[str, datetime]) -> dict[str, Any]:
    return {"M": {name: _n(_epoch(at)) for name, at in sorted(times.items())}}


def _pod_memory_attributes(pod: str, memory: PodMemory) -> dict[str, Any]:
    """The attributes of one POD item; empty facts are left out (DynamoDB items stay small)."""
    attributes: dict[str, Any] = {"pod": _s(pod)}
    if memory.uid:
        attributes["uid"] = _s(memory.uid)
    if memory.counted_on:
        attributes["counted_on"] = _s(memory.counted_on)
    if memory.counted_since is not None:
        attributes["counted_since"] = _n(_epoch(memory.counted_since))
    distrusted = memory.distrusted
    if len(distrusted) > MAX_STORED_DISTRUSTED:
        # Forgetting a refuted fit only lets the planner count it again until the scheduler refutes it.
        logger.warning(
            "pod %s distrusts %d nodes; storing the last %d", pod, len(distrusted), MAX_STORED_DISTRUSTED
        )
        distrusted = distrusted[-MAX_STORED_DISTRUSTED:]
    if distrusted:
        attributes["distrusted"] = {"L": [_s(node) for node in distrusted]}
    if memory.bought:
        attributes["bought"] = _times(memory.bought)
    if memory.refused:
        attributes["refused"] = _times(memory.refused)
    return attributes


def _migrations(item: Mapping[str, Any]) -> tuple[datetime, ...]:
    return tuple(_from_epoch(value["N"]) for value in item.get("migrated_at", {}).get("L", []))


def _moved_jobs(item: Mapping[str, Any]) -> dict[str, tuple[int, datetime]]:
    found = item.get("moved_jobs", {}).get("M", {})
    return {job: (int(v["L"][0]["N"]), _from_epoch(v["L"][1]["N"])) for job, v in found.items()}


def _time_map(item: Mapping[str, Any], attribute: str) -> dict[str, datetime]:
    raw = item.get(attribute, {}).get("M", {})
    return {name: _from_epoch(value["N"]) for name, value in raw.items()}


def _pod_memory_from_item(item: Mapping[str, Any]) -> PodMemory:
    return PodMemory(
        uid=item.get("uid", {}).get("S", ""),
        counted_on=item.get("counted_on", {}).get("S", ""),
        counted_since=_time(item, "counted_since"),
        distrusted=tuple(node["S"] for node in item.get("distrusted", {}).get("L", ())),
        bought=_time_map(item, "bought"),
        refused=_time_map(item, "refused"),
    )


def _cancellation_codes(exc: BaseException) -> list[str]:
    """Per-item reason codes of a cancelled transaction ([] for any other failure)."""
    if error_code(exc) != "TransactionCanceledException":
        return []
    reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
    return [str(reason.get("Code") or "None") for reason in reasons]


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: str) -> dict[str, str]:
    return {"N": value}


def _aware(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError(f"naive datetime {at.isoformat()}: the store needs timezone-aware times")
    return at


def _epoch(at: datetime) -> str:
    """Exact epoch seconds ("1764675000.123456"); floats would lose the microseconds."""
    delta = _aware(at) - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    # DynamoDB drops trailing zeros of numbers; writing them already dropped keeps values comparable.
    return f"{seconds}.{delta.microseconds:06d}".rstrip("0") if delta.microseconds else str(seconds)


def _epoch_ms(at: datetime) -> int:
    delta = _aware(at) - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _from_epoch(raw: str) -> datetime:
    seconds, _, fraction = raw.partition(".")
    return _EPOCH + timedelta(
        seconds=int(seconds), microseconds=int((fraction + "000000")[:6]) if fraction else 0
    )


def _time(item: Mapping[str, Any] | None, attribute: str) -> datetime | None:
    """A stored time; None when absent or unreadable (every stored time degrades safely to unknown)."""
    raw = (item or {}).get(attribute, {}).get("N")
    try:
        return _from_epoch(raw) if raw else None
    except (ValueError, OverflowError):
        return None


def _int(item: Mapping[str, Any] | None, attribute: str, default: int) -> int:
    raw = (item or {}).get(attribute, {}).get("N")
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def _ttl(at: datetime) -> int:
    """A TTL value: whole epoch seconds, as DynamoDB's TTL requires."""
    delta = _aware(at) - _EPOCH
    return delta.days * 86400 + delta.seconds + (1 if delta.microseconds else 0)
