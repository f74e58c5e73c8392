"""`DynamoDbStateStore` on moto's DynamoDB: lease and fencing, replace semantics, backoff, drains, TTL."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.state_store import MAX_STORED_DISTRUSTED, DynamoDbStateStore, create_table
from shared.config import PolicyConfig
from shared.domain.errors import ActionError, AuthError, ConflictError, LeaseHeldError, ReadError
from shared.domain.model import PodMemory
from shared.domain.operations import DrainIntent, Lease

REGION = "us-east-1"
# One session for every client of this module: it parses each service model once. Created after
# `import moto`, so its clients go through moto's interception.
SESSION = boto3.session.Session()
TABLE = "backlog-scaler-state"
CLUSTER = "research"
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POLICY = PolicyConfig(backoff_initial_seconds=300, backoff_max_seconds=1800, backoff_reset_seconds=3 * 3600)


pytestmark = pytest.mark.usefixtures("fake_aws")


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = SESSION.client("dynamodb", region_name=REGION, config=clients.client_config())
        create_table(client, TABLE)
        yield client


@pytest.fixture
def store(dynamodb: Any) -> DynamoDbStateStore:
    return DynamoDbStateStore(TABLE, CLUSTER, POLICY, dynamodb, clock=lambda: T0)


def raw_items(client: Any) -> dict[str, dict[str, Any]]:
    """Every item of the cluster's partition, by sort key."""
    items = [
        item for page in client.get_paginator("scan").paginate(TableName=TABLE) for item in page["Items"]
    ]
    return {item["sk"]["S"]: item for item in items if item["pk"]["S"] == f"CLUSTER#{CLUSTER}"}


def count_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    client.meta.events.register(f"provide-client-params.dynamodb.{operation}", record)
    return calls


def epoch(at: datetime) -> int:
    return int(at.timestamp())


# table


def test_create_table_is_idempotent_and_enables_ttl(dynamodb: Any) -> None:
    # Given the table already created by the fixture
    # When it is created again
    create_table(dynamodb, TABLE)

    # Then it keeps its pk/sk keys, on-demand billing and TTL on the ttl attribute
    table = dynamodb.describe_table(TableName=TABLE)["Table"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == [
        constants.TABLE_PARTITION_KEY,
        constants.TABLE_SORT_KEY,
    ]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = dynamodb.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": constants.TABLE_TTL_ATTRIBUTE}


# lease


def test_acquire_lease_on_a_free_cluster(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given no lease
    # When run A acquires it for 60 s
    lease = store.acquire_lease("run-a", T0, 60)

    # Then A holds it until T0 + 60 s with a positive fencing token, and the item expires an hour later
    assert (lease.cluster, lease.owner, lease.expires_at) == (CLUSTER, "run-a", T0 + timedelta(seconds=60))
    assert lease.fencing_token > 0
    item = raw_items(dynamodb)["LEASE"]
    assert int(item["ttl"]["N"]) == epoch(T0) + 60 + 3600


def test_renewing_the_lease_extends_it_and_bumps_the_fence(store: DynamoDbStateStore) -> None:
    # Given run A holds the lease
    first = store.acquire_lease("run-a", T0, 60)

    # When A acquires it again before it expires
    second = store.acquire_lease("run-a", T0 + timedelta(seconds=30), 60)

    # Then it is extended and the fencing token grew by one
    assert second.expires_at == T0 + timedelta(seconds=90)
    assert second.fencing_token == first.fencing_token + 1


def test_a_live_lease_of_another_owner_is_held(store: DynamoDbStateStore) -> None:
    # Given run A holds a live lease
    store.acquire_lease("run-a", T0, 60)

    # When run B tries to acquire it
    with pytest.raises(LeaseHeldError, match="run-a") as caught:
        store.acquire_lease("run-b", T0 + timedelta(seconds=59), 60)

    # Then B is refused, and the error says who holds it
    assert "held by run-a" in str(caught.value)


def test_an_expired_lease_is_taken_over(store: DynamoDbStateStore) -> None:
    # Given run A's lease expired
    old = store.acquire_lease("run-a", T0, 60)

    # When run B acquires it after expiry
    new = store.acquire_lease("run-b", T0 + timedelta(seconds=61), 60)

    # Then B holds it with a larger fencing token
    assert new.owner == "run-b"
    assert new.fencing_token > old.fencing_token


def test_a_released_lease_is_free_at_once_and_keeps_its_fence(store: DynamoDbStateStore) -> None:
    # Given run A released its lease
    old = store.acquire_lease("run-a", T0, 60)
    store.release_lease(old)

    # When run B acquires it immediately
    new = store.acquire_lease("run-b", T0 + timedelta(seconds=1), 60)

    # Then B gets it and the fencing token still grows
    assert new.fencing_token == old.fencing_token + 1


def test_releasing_a_lease_that_is_no_longer_ours_changes_nothing(store: DynamoDbStateStore) -> None:
    # Given A's lease was taken over by B
    old = store.acquire_lease("run-a", T0, 60)
    store.acquire_lease("run-b", T0 + timedelta(seconds=61), 60)

    # When A releases its stale lease
    store.release_lease(old)

    # Then B still holds it: C is refused
    with pytest.raises(LeaseHeldError):
        store.acquire_lease("run-c", T0 + timedelta(seconds=62), 60)


def test_release_never_raises(store: DynamoDbStateStore) -> None:
    # Given a store whose table is gone
    broken = DynamoDbStateStore("no-such-table", CLUSTER, POLICY, store._client)

    # When a lease is released / Then nothing is raised
    broken.release_lease(Lease(CLUSTER, "run-a", T0, 1))


def test_fencing_refuses_writes_of_an_old_lease_holder(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given run A's lease expired and run B took over
    lease_a = store.acquire_lease("run-a", T0, 60)
    store.save_node_idle_since(lease_a, {"node-1": T0}, T0)
    lease_b = store.acquire_lease("run-b", T0 + timedelta(seconds=120), 60)

    # When A (still running, unaware) writes under its old lease
    with pytest.raises(LeaseHeldError):
        store.save_node_idle_since(lease_a, {"node-2": T0}, T0 + timedelta(seconds=121))
    with pytest.raises(LeaseHeldError):
        store.record_scale_up(lease_a, "gpu-a", T0 + timedelta(seconds=121))
    with pytest.raises(LeaseHeldError):
        store.record_capacity_failure(lease_a, "gpu-a", T0 + timedelta(seconds=121))

    # Then none of A's writes landed, and B can write
    assert set(store.load().nodes) == {"node-1"}
    assert store.load().groups == {}
    store.save_node_idle_since(lease_b, {"node-3": T0}, T0 + timedelta(seconds=122))
    assert set(store.load().nodes) == {"node-3"}


def test_the_same_owner_with_an_old_fencing_token_is_refused(store: DynamoDbStateStore) -> None:
    # Given an owner re-acquired the lease (token moved on) but still writes with the first token
    first = store.acquire_lease("reconcile", T0, 60)
    store.acquire_lease("reconcile", T0 + timedelta(seconds=120), 60)

    # When / Then the write with the stale token is refused
    with pytest.raises(LeaseHeldError):
        store.record_scale_up(first, "gpu-a", T0)


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serialize moto's DynamoDB writes: moto 5.2.5 checks conditions and writes in two unlocked steps,
    so threads can both pass a condition; real DynamoDB applies each conditional write atomically."""
    lock = threading.Lock()
    for name in ("update_item", "put_item", "delete_item", "transact_write_items"):
        original: Callable[..., Any] = getattr(DynamoDBBackend, name)

        def locked(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with lock:
                return _original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)


def test_racing_runs_get_exactly_one_lease(dynamodb: Any, atomic_moto: None) -> None:
    # Given 20 runs starting at the same moment
    stores = [DynamoDbStateStore(TABLE, CLUSTER, POLICY, dynamodb) for _ in range(20)]
    barrier = threading.Barrier(len(stores))
    winners: list[Lease] = []
    refused: list[str] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            winners.append(stores[index].acquire_lease(f"run-{index}", T0, 60))
        except LeaseHeldError:
            refused.append(f"run-{index}")

    # When they all try to take the lease
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly one wins and the others are refused
    assert len(winners) == 1
    assert len(refused) == 19
    assert raw_items(dynamodb)["LEASE"]["owner"]["S"] == winners[0].owner


# idle-since and first-seen maps


def test_save_node_idle_since_replaces_the_map(store: DynamoDbStateStore) -> None:
    # Given nodes 1 and 2 stored as idle
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_node_idle_since(lease, {"node-1": T0, "node-2": T0}, T0)

    # When the next run saves node 2 (idle since later) and node 3
    later = T0 + timedelta(minutes=1, microseconds=123456)
    store.save_node_idle_since(lease, {"node-2": later, "node-3": later}, later)

    # Then node 1 is forgotten, node 2 updated and node 3 added, to the microsecond
    nodes = store.load().nodes
    assert {name: state.idle_since for name, state in nodes.items()} == {"node-2": later, "node-3": later}


def test_unchanged_nodes_are_not_rewritten_until_half_their_lifetime(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given node 1 stored
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_node_idle_since(lease, {"node-1": T0}, T0)
    writes = count_calls(dynamodb, "TransactWriteItems")

    # When the same map is saved a minute later, then four days later
    store.save_node_idle_since(lease, {"node-1": T0}, T0 + timedelta(minutes=1))
    quiet = len(writes)
    store.save_node_idle_since(lease, {"node-1": T0}, T0 + timedelta(days=4))

    # Then the first save writes nothing and the second refreshes the item's TTL
    assert quiet == 0
    assert len(writes) == 1
    assert int(raw_items(dynamodb)["NODE#node-1"]["ttl"]["N"]) == epoch(T0 + timedelta(days=11))


def test_large_maps_are_written_in_transactions_of_at_most_100_items(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given 250 idle nodes
    lease = store.acquire_lease("run-a", T0, 60)
    writes = count_calls(dynamodb, "TransactWriteItems")
    nodes = {f"node-{i:03d}": T0 for i in range(250)}

    # When they are saved
    store.save_node_idle_since(lease, nodes, T0)

    # Then three transactions carry them, each starting with the lease check
    assert [len(w["TransactItems"]) for w in writes] == [100, 100, 53]
    assert all("ConditionCheck" in w["TransactItems"][0] for w in writes)
    assert len(store.load().nodes) == 250


def test_instances_first_seen_round_trip_and_replace(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given two instances seen
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_instances_first_seen(lease, {"i-1": T0, "i-2": T0 + timedelta(seconds=5)})

    # When the next map drops i-1 and adds i-3
    store.save_instances_first_seen(
        lease, {"i-2": T0 + timedelta(seconds=5), "i-3": T0 + timedelta(minutes=1)}
    )

    # Then the stored map is exactly the new one, and items expire 7 days after being written
    assert store.load().instances_first_seen == {
        "i-2": T0 + timedelta(seconds=5),
        "i-3": T0 + timedelta(minutes=1),
    }
    assert int(raw_items(dynamodb)["INSTANCE#i-3"]["ttl"]["N"]) == epoch(T0 + timedelta(days=7))


# groups: scale-up and backoff


def test_record_scale_up_round_trip_keeps_the_backoff(store: DynamoDbStateStore) -> None:
    # Given a group in backoff
    lease = store.acquire_lease("run-a", T0, 60)
    until = store.record_capacity_failure(lease, "gpu-a", T0)

    # When a scale-up of the group is recorded
    store.record_scale_up(lease, "gpu-a", T0 + timedelta(minutes=1))

    # Then both facts are loaded
    group = store.load().groups["gpu-a"]
    assert group.last_scale_up == T0 + timedelta(minutes=1)
    assert group.backoff_until == until


def test_record_scale_down_is_kept_beside_the_scale_up(store: DynamoDbStateStore) -> None:
    # Given a group that grew
    lease = store.acquire_lease("run-a", T0, 60)
    store.record_scale_up(lease, "gpu-a", T0)

    # When a scale-down is recorded later
    store.record_scale_down(lease, "gpu-a", T0 + timedelta(minutes=30))

    # Then both times are loaded
    group = store.load().groups["gpu-a"]
    assert (group.last_scale_up, group.last_scale_down) == (T0, T0 + timedelta(minutes=30))


def test_migrations_of_the_last_hour_are_kept_beside_the_backoff(store: DynamoDbStateStore) -> None:
    # Given a group in backoff and a migration recorded at T0
    lease = store.acquire_lease("run-a", T0, 60)
    until = store.record_capacity_failure(lease, "gpu-a", T0)
    store.record_migration(lease, "gpu-a", T0)

    # When two more are recorded, 40 and 70 minutes later
    store.record_migration(lease, "gpu-a", T0 + timedelta(minutes=40), ["research/Job/train"])
    store.record_migration(lease, "gpu-a", T0 + timedelta(minutes=70), ["research/Job/train"])

    # Then the last hour's are loaded (the one at T0 is dropped), and the backoff is kept
    group = store.load().groups["gpu-a"]
    assert group.migrated_at == (T0 + timedelta(minutes=40), T0 + timedelta(minutes=70))
    assert group.backoff_until == until
    # And the job moved twice is remembered with its last move
    assert group.moved_jobs == {"research/Job/train": (2, T0 + timedelta(minutes=70))}


def test_backoff_doubles_per_failure_up_to_the_maximum(store: DynamoDbStateStore) -> None:
    # Given a lease
    lease = store.acquire_lease("run-a", T0, 60)

    # When a group fails five times, a minute apart
    durations = []
    for minute in range(5):
        at = T0 + timedelta(minutes=minute)
        durations.append((store.record_capacity_failure(lease, "gpu-a", at) - at).total_seconds())

    # Then the backoff goes 5, 10, 20, 30, 30 minutes
    assert durations == [300, 600, 1200, 1800, 1800]
    assert store.load().groups["gpu-a"].backoff_until == T0 + timedelta(minutes=4, seconds=1800)


def test_backoff_resets_after_the_reset_period_without_failures(store: DynamoDbStateStore) -> None:
    # Given a group that failed twice
    store.record_capacity_failure(None, "gpu-a", T0)
    store.record_capacity_failure(None, "gpu-a", T0 + timedelta(minutes=1))

    # When it fails again more than 3 h after the last failure
    at = T0 + timedelta(minutes=1, hours=3, seconds=1)
    until = store.record_capacity_failure(None, "gpu-a", at)

    # Then the backoff starts over at 5 minutes
    assert until == at + timedelta(seconds=300)


def test_recording_the_same_failure_twice_does_not_double(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given a failure recorded (by the AWS-events function, without a lease)
    first = store.record_capacity_failure(None, "gpu-a", T0)

    # When the same failure is recorded again (a retried event), and an older one arrives late
    again = store.record_capacity_failure(None, "gpu-a", T0)
    older = store.record_capacity_failure(None, "gpu-a", T0 - timedelta(minutes=5))

    # Then the backoff is unchanged and counted once
    assert again == older == first == T0 + timedelta(seconds=300)
    assert raw_items(dynamodb)["GROUP#gpu-a"]["failures"]["N"] == "1"


def test_group_items_expire_a_day_after_the_reset_period(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given a recorded failure / When the item is read raw
    store.record_capacity_failure(None, "gpu-a", T0)

    # Then its TTL is the failure + backoff reset + 1 day
    ttl = int(raw_items(dynamodb)["GROUP#gpu-a"]["ttl"]["N"])
    assert ttl == epoch(T0 + timedelta(hours=3, days=1))


def test_concurrent_failure_records_both_count(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given the reconcile run and the events function each read the group before either wrote
    lease = store.acquire_lease("run-a", T0, 60)
    other = DynamoDbStateStore(TABLE, CLUSTER, POLICY, dynamodb)
    original_get = store._get
    raced = False

    def get_then_interleave(sk: str) -> dict[str, Any] | None:
        nonlocal raced
        item = original_get(sk)
        if not raced:
            raced = True
            other.record_capacity_failure(None, "gpu-a", T0)  # lands between our read and our write
        return item

    store._get = get_then_interleave  # type: ignore[method-assign]

    # When the reconcile run records a later failure
    until = store.record_capacity_failure(lease, "gpu-a", T0 + timedelta(minutes=1))

    # Then its conditional write lost once, re-read, and counted the failure as the second
    assert until == T0 + timedelta(minutes=1, seconds=600)
    assert raw_items(dynamodb)["GROUP#gpu-a"]["failures"]["N"] == "2"


# drain intents


def test_drain_intents_round_trip_replace_and_delete(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given two drain intents stored under the lease
    lease = store.acquire_lease("run-a", T0, 60)
    intent = DrainIntent(
        group="gpu-a",
        nodes=("node-1", "node-2"),
        requested_at=T0,
        expires_at=T0 + timedelta(hours=1),
        grace_seconds=120,
        force=True,
        requested_by="alice",
    )
    stored = store.put_drain_intent(lease, intent)
    other = store.put_drain_intent(lease, DrainIntent("gpu-b", (), T0, T0 + timedelta(hours=2)))

    # When gpu-a's intent is replaced (over the revision read) and gpu-b's deleted
    replaced = store.put_drain_intent(lease, replace(stored, nodes=("node-2",)))
    store.delete_drain_intent(lease, other)

    # Then only the replacement is left, equal field by field, expiring a day after its deadline
    assert stored.revision == 1 and replaced.revision == 2
    assert store.drain_intents() == (replaced,)
    assert int(raw_items(dynamodb)["DRAIN#gpu-a"]["ttl"]["N"]) == epoch(T0 + timedelta(hours=1, days=1))


def test_drain_intents_are_loaded_with_all_fields(store: DynamoDbStateStore) -> None:
    # Given an intent with every field set
    intent = DrainIntent("gpu-a", ("node-1",), T0, T0 + timedelta(hours=1), 60, True, "alice")

    # When stored and read back / Then it is equal (at its stored revision)
    store.put_drain_intent(store.acquire_lease("run-a", T0, 60), intent)
    assert store.drain_intents() == (replace(intent, revision=1),)


def test_a_drain_intent_written_over_a_stale_read_is_a_conflict(store: DynamoDbStateStore) -> None:
    # Given an intent read at revision 1, then changed by another write (revision 2)
    lease = store.acquire_lease("run-a", T0, 60)
    read = store.put_drain_intent(lease, DrainIntent("gpu-a", ("node-1",), T0, T0 + timedelta(hours=1)))
    newer = store.put_drain_intent(lease, replace(read, nodes=("node-1", "node-2")))

    # When the stale read is written back, or deleted, or a new intent stored over the existing one
    # Then each is refused: no update is lost
    with pytest.raises(ConflictError):
        store.put_drain_intent(lease, replace(read, nodes=("node-1",)))
    with pytest.raises(ConflictError):
        store.delete_drain_intent(lease, read)
    with pytest.raises(ConflictError):
        store.put_drain_intent(lease, DrainIntent("gpu-a", ("node-3",), T0, T0 + timedelta(hours=1)))
    assert store.drain_intents() == (newer,)


def test_a_drain_intent_write_needs_the_lease(store: DynamoDbStateStore) -> None:
    # Given a run whose lease another run took after it expired
    old = store.acquire_lease("run-a", T0, 60)
    store.acquire_lease("run-b", T0 + timedelta(seconds=61), 60)

    # When the old run stores or deletes a drain intent / Then the fence refuses it
    intent = DrainIntent("gpu-a", ("node-1",), T0, T0 + timedelta(hours=1))
    with pytest.raises(LeaseHeldError):
        store.put_drain_intent(old, intent)
    with pytest.raises(LeaseHeldError):
        store.delete_drain_intent(old, intent)
    assert store.drain_intents() == ()


def test_an_intent_stored_before_revisions_existed_is_replaced_once(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given a drain item without a revision attribute (written by the previous release)
    lease = store.acquire_lease("run-a", T0, 60)
    store.put_drain_intent(lease, DrainIntent("gpu-a", ("node-1",), T0, T0 + timedelta(hours=1)))
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": f"CLUSTER#{CLUSTER}"}, "sk": {"S": "DRAIN#gpu-a"}},
        UpdateExpression="REMOVE revision",
    )
    (legacy,) = store.drain_intents()

    # When it is read (revision 0) and written back / Then the write goes through at revision 1
    assert legacy.revision == 0
    assert store.put_drain_intent(lease, replace(legacy, nodes=("node-2",))).revision == 1


def test_renewing_a_lease_extends_it_and_fails_once_another_run_took_it(store: DynamoDbStateStore) -> None:
    # Given a lease renewed before it ends
    lease = store.acquire_lease("run-a", T0, 60)
    renewed = store.renew_lease(lease, T0 + timedelta(seconds=50), 60)
    assert renewed.expires_at == T0 + timedelta(seconds=110)
    assert renewed.fencing_token == lease.fencing_token
    # Then no other run can take it until the new expiry
    with pytest.raises(LeaseHeldError):
        store.acquire_lease("run-b", T0 + timedelta(seconds=100), 60)

    # When another run takes it after it expired / Then the old holder can no longer renew it (the fence)
    store.acquire_lease("run-b", T0 + timedelta(seconds=111), 60)
    with pytest.raises(LeaseHeldError):
        store.renew_lease(renewed, T0 + timedelta(seconds=112), 60)


# load and errors


def test_load_reads_everything_and_every_item_has_a_ttl(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given one fact of each kind
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_node_idle_since(lease, {"node-1": T0}, T0)
    store.save_instances_first_seen(lease, {"i-1": T0})
    store.record_scale_up(lease, "gpu-a", T0)
    store.put_drain_intent(lease, DrainIntent("gpu-a", ("node-1",), T0, T0 + timedelta(hours=1)))

    # When loaded
    state = store.load()

    # Then the state holds them, and every stored item carries a whole-second TTL
    assert state.nodes["node-1"].idle_since == T0
    assert state.instances_first_seen == {"i-1": T0}
    assert state.groups["gpu-a"].last_scale_up == T0
    items = raw_items(dynamodb)
    assert set(items) == {"LEASE", "NODE#node-1", "INSTANCE#i-1", "GROUP#gpu-a", "DRAIN#gpu-a"}
    assert all(item["ttl"]["N"].isdigit() for item in items.values())


def test_clusters_do_not_see_each_others_state(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given another cluster in the same table with its own lease and nodes
    other = DynamoDbStateStore(TABLE, "other", POLICY, dynamodb)
    other_lease = other.acquire_lease("run-x", T0, 60)
    other.save_node_idle_since(other_lease, {"node-x": T0}, T0)

    # When this cluster acquires its lease and loads
    lease = store.acquire_lease("run-a", T0, 60)

    # Then neither lease nor state are shared
    assert lease.owner == "run-a"
    assert store.load().nodes == {}


def test_a_malformed_item_is_skipped_not_fatal(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given hand-edited items with unreadable times next to a good one
    partition = {"S": f"CLUSTER#{CLUSTER}"}
    dynamodb.put_item(
        TableName=TABLE, Item={"pk": partition, "sk": {"S": "GROUP#gpu-x"}, "backoff_until": {"N": "-1e99"}}
    )
    dynamodb.put_item(
        TableName=TABLE, Item={"pk": partition, "sk": {"S": "DRAIN#gpu-x"}, "group": {"N": "1"}}
    )
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_node_idle_since(lease, {"node-1": T0}, T0)

    # When loaded
    state = store.load()

    # Then the good facts are there, the unreadable time is unknown and the broken intent is skipped
    assert set(state.nodes) == {"node-1"}
    assert state.groups["gpu-x"].backoff_until is None
    assert store.drain_intents() == ()


def test_a_missing_table_is_a_read_error_on_load_and_an_action_error_on_write(dynamodb: Any) -> None:
    # Given a store pointing at a table that does not exist
    broken = DynamoDbStateStore("no-such-table", CLUSTER, POLICY, dynamodb)

    # When / Then reads raise ReadError and writes ActionError
    with pytest.raises(ReadError):
        broken.load()
    with pytest.raises(ReadError):
        broken.acquire_lease("run-a", T0, 60)
    lease = Lease(CLUSTER, "run-a", T0 + timedelta(seconds=60), 1)
    with pytest.raises(ActionError):
        broken.put_drain_intent(lease, DrainIntent("gpu-a", (), T0, T0))
    with pytest.raises(ActionError):
        broken.record_capacity_failure(None, "gpu-a", T0)


def test_access_denied_is_an_auth_error() -> None:
    # Given DynamoDB denies the query
    client = SESSION.client("dynamodb", region_name=REGION)
    stub = Stubber(client)
    stub.add_client_error("query", "AccessDeniedException", "not authorized", http_status_code=400)

    # When / Then load raises AuthError
    with stub, pytest.raises(AuthError):
        DynamoDbStateStore(TABLE, CLUSTER, POLICY, client).load()


def test_a_lease_of_another_cluster_is_a_programming_error(store: DynamoDbStateStore) -> None:
    # Given a lease of another cluster / When used here / Then ValueError before any write
    with pytest.raises(ValueError, match="cluster"):
        store.record_scale_up(Lease("other", "run-a", T0, 1), "gpu-a", T0)


def test_naive_datetimes_are_refused(store: DynamoDbStateStore) -> None:
    # Given a naive time / When used / Then ValueError (the store only keeps UTC instants)
    with pytest.raises(ValueError, match="naive"):
        store.acquire_lease("run-a", datetime(2026, 12, 2, 12, 0), 60)


# pod memory


def memory(**fields: Any) -> PodMemory:
    return PodMemory(**{"uid": "uid-1", "counted_on": "node-1", "counted_since": T0, **fields})


def test_pod_memory_round_trips_every_fact_to_the_microsecond(store: DynamoDbStateStore) -> None:
    # Given a pod's full memory: counted on a node, distrusting two, bought and refused per group
    lease = store.acquire_lease("run-a", T0, 60)
    later = T0 + timedelta(minutes=3, microseconds=250)
    full = memory(
        distrusted=("node-2", "node-3"),
        bought={"gpu-a": T0, "gpu-b": later},
        refused={"gpu-a": later + timedelta(hours=1)},
    )

    # When it is saved next to a pod that only waits
    store.save_pod_memory(lease, {"ml/train-0": full, "ml/train-1": PodMemory(uid="uid-2")})

    # Then load gives both back exactly
    assert store.load().pods == {"ml/train-0": full, "ml/train-1": PodMemory(uid="uid-2")}


def test_pod_memory_is_one_item_per_pod_without_empty_attributes(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given a pod counted on a node and nothing else
    lease = store.acquire_lease("run-a", T0, 60)

    # When saved
    store.save_pod_memory(lease, {"ml/train-0": memory()})

    # Then its item holds only the facts it has, with a TTL a week out
    item = raw_items(dynamodb)["POD#ml/train-0"]
    assert set(item) == {"pk", "sk", "pod", "uid", "counted_on", "counted_since", "updated_at", "ttl"}
    assert int(item["ttl"]["N"]) == epoch(T0 + timedelta(days=7))


def test_pod_memory_replaces_forgets_and_rewrites_only_changed_pods(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given three pods remembered
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_pod_memory(lease, {f"ml/p{i}": memory(uid=f"u{i}") for i in range(3)})
    writes = count_calls(dynamodb, "TransactWriteItems")

    # When the next run keeps p0, changes p1, forgets p2 and adds p3
    changed = memory(uid="u1", distrusted=("node-1",), counted_on="")
    store.save_pod_memory(lease, {"ml/p0": memory(uid="u0"), "ml/p1": changed, "ml/p3": memory(uid="u3")})

    # Then one transaction puts p1 and p3 and deletes p2, and p0 is left alone
    (transaction,) = writes
    kinds = [
        (next(iter(w)), (w.get("Put", {}).get("Item") or w.get("Delete", {}).get("Key"))["sk"]["S"])
        for w in transaction["TransactItems"][1:]
    ]
    assert kinds == [("Put", "POD#ml/p1"), ("Put", "POD#ml/p3"), ("Delete", "POD#ml/p2")]
    assert store.load().pods == {"ml/p0": memory(uid="u0"), "ml/p1": changed, "ml/p3": memory(uid="u3")}


def test_memory_of_hundreds_of_pods_never_makes_one_large_item(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given 300 pending pods remembered (three transactions' worth; moto copies the whole table
    # per transaction, so more only costs test time), each distrusting a few long-named nodes
    lease = store.acquire_lease("run-a", T0, 60)
    writes = count_calls(dynamodb, "TransactWriteItems")
    nodes = tuple(f"ip-10-0-{i}-1.us-west-2.compute.internal" for i in range(5))
    pods = {f"batch/job-{i:05d}": memory(uid=f"u{i}", distrusted=nodes) for i in range(300)}

    # When saved
    store.save_pod_memory(lease, pods)

    # Then every item is small, every transaction is fenced and within DynamoDB's limits
    items = [item for sk, item in raw_items(dynamodb).items() if sk.startswith("POD#")]
    assert len(items) == 300
    assert len(writes) == 4
    assert max(len(json.dumps(item)) for item in items) < 1000
    assert all(len(w["TransactItems"]) <= 100 for w in writes)
    assert all("ConditionCheck" in w["TransactItems"][0] for w in writes)
    assert len(store.load().pods) == 300


def test_a_pod_distrusting_thousands_of_nodes_keeps_the_newest_under_the_item_limit(
    store: DynamoDbStateStore, dynamodb: Any
) -> None:
    # Given a pod that distrusts 2,000 nodes with the longest names Kubernetes allows
    lease = store.acquire_lease("run-a", T0, 60)
    nodes = tuple(f"{i:04d}-" + "n" * 248 for i in range(2000))

    # When saved
    store.save_pod_memory(lease, {"ml/huge": memory(distrusted=nodes)})

    # Then its item stays under 400 KB and keeps the newest (last) distrusted nodes
    item = raw_items(dynamodb)["POD#ml/huge"]
    assert len(json.dumps(item)) < 400_000
    assert store.load().pods["ml/huge"].distrusted == nodes[-MAX_STORED_DISTRUSTED:]


def test_pod_memory_writes_are_fenced_by_the_lease(store: DynamoDbStateStore) -> None:
    # Given a run whose lease was taken over after it expired
    old = store.acquire_lease("run-a", T0, 60)
    store.acquire_lease("run-b", T0 + timedelta(minutes=2), 60)

    # When / Then the old holder can no longer write pod memory
    with pytest.raises(LeaseHeldError):
        store.save_pod_memory(old, {"ml/p0": memory()})
    assert store.load().pods == {}


def test_a_malformed_pod_item_is_skipped_not_fatal(store: DynamoDbStateStore, dynamodb: Any) -> None:
    # Given a hand-edited pod item with an unreadable bought time next to a good one
    lease = store.acquire_lease("run-a", T0, 60)
    store.save_pod_memory(lease, {"ml/good": memory()})
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": f"CLUSTER#{CLUSTER}"},
            "sk": {"S": "POD#ml/bad"},
            "bought": {"M": {"gpu-a": {"S": "yesterday"}}},
        },
    )

    # When loaded / Then the good pod is remembered and the broken one forgotten
    assert set(store.load().pods) == {"ml/good"}
