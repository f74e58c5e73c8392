"""The fault matrix: one object that cannot be changed never stops the rest of the run.

Through the real handlers, on moto and the fake Kubernetes API server (the cluster of
test_e2e_handlers.py). Each fault is injected at the wire: a botocore handler answers one AWS call
with the error AWS would give (AccessDenied, throttling, an item over 400 KB), the fake API server
answers one Kubernetes request with the real Status body (403 Forbidden, NamespaceTerminating). Each
test asserts what was and was not written in AWS and in the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from functions.force_scale_down import handler as force_scale_down
from shared.adapters.aws import clients
from shared.domain.model import ANNOTATION_CORDONED_AT
from tests.builders import iso, pod
from tests.fakes.memory import FakeLambdaContext
from tests.integration import test_e2e_handlers as e2e
from tests.integration.test_e2e_handlers import REGION, TABLE, Cluster, run_reconcile

# The e2e module's fixtures: the moto account and one cluster on it, wired to the handlers.
aws = e2e.aws
cluster = e2e.cluster

pytestmark = pytest.mark.slow

Fault = Callable[[dict[str, Any]], dict[str, Any] | None]  # request params -> error body, or None: pass


@pytest.fixture
def aws_fault() -> Iterator[Callable[[str, str, Fault], None]]:
    """Answer one operation of the scaler's own client with an AWS error, chosen per request."""
    registered: list[tuple[Any, str, Callable[..., Any]]] = []

    def install(service: str, operation: str, fault: Fault) -> None:
        # The clients the adapters use: Auto Scaling in the config's region, DynamoDB in the default one.
        client = clients.client(service, None if service == "dynamodb" else REGION)
        event_service = client.meta.service_model.service_id.hyphenize()
        seen: list[dict[str, Any]] = []

        def remember(params: dict[str, Any], **_: Any) -> None:
            seen.append(params)

        def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            error = fault(seen.pop()) if seen else None
            if error is None:
                return None
            status = error.pop("status", 400)
            body = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}
            return AWSResponse(f"https://{service}.amazonaws.com", status, {}, None), body

        for event, handler in (
            (f"before-parameter-build.{event_service}.{operation}", remember),
            (f"before-call.{event_service}.{operation}", answer),
        ):
            client.meta.events.register_first(event, handler)
            registered.append((client, event, handler))

    yield install
    for client, event, handler in registered:
        client.meta.events.unregister(event, handler)


def emitted(capsys: pytest.CaptureFixture[str], metric: str) -> float:
    """The sum of one metric over the EMF blobs the run printed (what CloudWatch would ingest)."""
    total = 0.0
    for line in capsys.readouterr().out.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if isinstance(blob, dict) and "_aws" in blob and metric in blob:
            value = blob[metric]
            total += sum(value) if isinstance(value, list) else value
    return total


def pending_for(name: str, gpu: str) -> dict[str, Any]:
    return pod(name, gpus=8, node_selector={"gpu": gpu})


# ------------------------------------------------------------------------------------------ AWS


def test_access_denied_on_one_group_lets_the_other_group_scale_in_the_same_run(
    cluster: Cluster, aws_fault: Callable[[str, str, Fault], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a pod pending for each group, and a100's ASG lacking the cluster tag IAM requires for
    # mutations: SetDesiredCapacity on it is denied
    cluster.server.add_pod(pending_for("train-a", "a100"))
    cluster.server.add_pod(pending_for("train-h", "h100"))

    def deny_a100(params: dict[str, Any]) -> dict[str, Any] | None:
        if params.get("AutoScalingGroupName") != cluster.a100:
            return None
        return {
            "Code": "AccessDenied",
            "Message": "not authorized to perform SetDesiredCapacity",
            "status": 403,
        }

    aws_fault("autoscaling", "SetDesiredCapacity", deny_a100)
    capsys.readouterr()
    # When the scheduled reconcile runs
    response = run_reconcile(cluster)
    # Then h100 grows in the same run, a100 stays, and the denial is reported, counted and notified
    assert cluster.desired(cluster.h100) == 1 and cluster.desired(cluster.a100) == 0
    (failed,) = response["failed"]
    assert (failed["kind"], failed["target"], failed["status"]) == ("set-desired", cluster.a100, "failed")
    assert "AuthError" in failed["detail"] and not response["ok"]
    assert emitted(capsys, "ActionFailures") == 1
    # And only the pod whose group grew is told it triggered a scale-up
    told = {e["involvedObject"]["name"] for e in cluster.server.events() if e["reason"] == "TriggeredScaleUp"}
    assert told == {"train-h"}


def cordoned_long_ago(cluster: Cluster, name: str) -> str:
    """An idle a100 node the scaler cordoned 5 minutes ago (its termination is due); its instance id."""
    [instance] = cluster.launch(cluster.a100, 1)
    cordoned_at = {ANNOTATION_CORDONED_AT: iso(cluster.now - timedelta(minutes=5))}
    cluster.register(name, instance, unschedulable=True, annotations=cordoned_at)
    return instance


def test_a_terminate_whose_response_is_lost_is_reported_and_not_repeated(
    cluster: Cluster, aws_fault: Callable[[str, str, Fault], None]
) -> None:
    # Given an idle node the scaler cordoned long ago; its termination goes through but the
    # response is lost (the client sees a 500 after the instance already went)
    cordoned_long_ago(cluster, "idle")
    autoscaling = boto3.client("autoscaling", region_name=REGION)

    def lost(params: dict[str, Any]) -> dict[str, Any] | None:
        autoscaling.terminate_instance_in_auto_scaling_group(
            InstanceId=params["InstanceId"], ShouldDecrementDesiredCapacity=True
        )
        return {"Code": "InternalFailure", "Message": "We encountered an internal error", "status": 500}

    aws_fault("autoscaling", "TerminateInstanceInAutoScalingGroup", lost)
    # When the reconcile runs / Then the failure is reported and the Node is left for the next run
    first = run_reconcile(cluster)
    assert [a["status"] for a in first["failed"]] == ["failed"]
    assert cluster.instances(cluster.a100) == [] and cluster.desired(cluster.a100) == 0
    # When the next run comes / Then it sees the instance gone: nothing is terminated twice
    cluster.clock.advance(60)
    second = run_reconcile(cluster)
    assert [a for a in second["actions"] if a["kind"] == "terminate"] == []
    assert cluster.desired(cluster.a100) == 0 and second["ok"]


# ------------------------------------------------------------------------------------------ Kubernetes


def namespace_terminating(namespace: str, name: str) -> dict[str, Any]:
    """The Status the API server's NamespaceLifecycle admission answers in a namespace being deleted."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": (
            f'pods "{name}" is forbidden: unable to create new content in namespace {namespace} '
            "because it is being terminated"
        ),
        "reason": "Forbidden",
        "details": {
            "name": name,
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }


def two_busy_nodes(cluster: Cluster) -> tuple[str, str]:
    first, second = cluster.launch(cluster.a100, 2)
    cluster.register("n1", first)
    cluster.register("n2", second)
    cluster.server.add_pod(pod("doomed-job", node="n1", namespace="doomed"))
    cluster.server.add_pod(pod("train", node="n2"))
    return first, second


def test_an_eviction_refused_by_a_terminating_namespace_spares_the_other_drains(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two busy a100 nodes; n1's pod lives in a namespace being deleted: its eviction is a 403
    two_busy_nodes(cluster)
    cluster.server.inject(
        "POST",
        r"^/api/v1/namespaces/doomed/pods/doomed-job/eviction$",
        status=403,
        body=namespace_terminating("doomed", "doomed-job"),
        times=-1,
    )
    capsys.readouterr()
    # When an operator drains both nodes
    report = force_scale_down.handler({"group": "a100", "target": 0}, FakeLambdaContext())
    # Then n2's pod is evicted, n1's refusal is reported, and both nodes keep draining
    assert ("research", "train") in cluster.server.evictions
    assert cluster.server.get_pod("doomed", "doomed-job") is not None
    assert report["draining"] == ["n1", "n2"] and not report["ok"]
    failed = [a for a in report["actions"] if a["status"] == "failed"]
    assert [(a["kind"], a["target"]) for a in failed] == [("evict", "doomed/doomed-job")]
    assert emitted(capsys, "ActionFailures") == 1
    # When the reconcile continues the drain (with a pod pending for h100)
    cluster.server.add_pod(pending_for("wait-h", "h100"))
    cluster.clock.advance(60)
    response = run_reconcile(cluster)
    # Then the emptied n2 is terminated, n1 still drains, and h100 still grows in the same run
    assert cluster.server.get_node("n2") is None and cluster.cordoned("n1")
    assert cluster.desired(cluster.h100) == 1
    assert [a["target"] for a in response["failed"]] == ["doomed/doomed-job"]


def test_a_forced_drain_whose_pod_delete_is_forbidden_never_stops_scale_up(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a busy a100 node being force-drained without grace, and deleting its pod answers 403
    cluster.launch(cluster.a100, 1)
    [instance] = cluster.instances(cluster.a100)
    cluster.register("n1", instance)
    cluster.server.add_pod(pod("job", node="n1"))
    cluster.server.inject("DELETE", r"^/api/v1/namespaces/research/pods/job$", status=403, times=-1)
    capsys.readouterr()
    report = force_scale_down.handler(
        {"group": "a100", "nodes": ["n1"], "force": True, "grace_seconds": 0}, FakeLambdaContext()
    )
    assert report["draining"] == ["n1"] and cluster.server.get_pod("research", "job") is not None
    assert [a["kind"] for a in report["actions"] if a["status"] == "failed"] == ["delete-pod"]
    # When pods wait for h100 and the reconcile runs (the drain still meets the 403)
    cluster.server.add_pod(pending_for("wait-h", "h100"))
    cluster.clock.advance(60)
    response = run_reconcile(cluster)
    # Then h100 grows, the failed delete is reported again and counted (the alarm's metric)
    assert cluster.desired(cluster.h100) == 1
    assert [a["kind"] for a in response["failed"]] == ["delete-pod"]
    assert emitted(capsys, "ActionFailures") == 2
    assert cluster.cordoned("n1") and cluster.instances(cluster.a100) == [instance]


# ------------------------------------------------------------------------------------------ the lease


def steal_lease(cluster: Cluster) -> None:
    """Another run takes the cluster's lease for an hour (its fence moves on), as after this run's
    lease expired during a long pause."""
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=TABLE,
        Key={"pk": {"S": f"CLUSTER#{cluster.name}"}, "sk": {"S": "LEASE"}},
        UpdateExpression="SET #owner = :thief, #fence = #fence + :one, #expires = :later",
        ExpressionAttributeNames={"#owner": "owner", "#fence": "fence", "#expires": "expires_at"},
        ExpressionAttributeValues={
            ":thief": {"S": "another-run"},
            ":one": {"N": "1"},
            ":later": {"N": str(int(cluster.clock.now().timestamp()) + 3600)},
        },
    )


def test_a_lease_taken_over_mid_run_stops_every_write_after_it(
    cluster: Cluster, aws_fault: Callable[[str, str, Fault], None]
) -> None:
    # Given an idle node cordoned long ago (to terminate), an idle h100 node past its idle time (to
    # cordon) and a pod pending for a100 (to scale up)
    cordoned_long_ago(cluster, "old")
    [idle] = cluster.launch(cluster.h100, 1)
    cluster.register("idle", idle, gpu="h100")
    run_reconcile(cluster)  # notes idle-since of "idle" (and terminates "old")
    cluster.server.add_pod(pending_for("train", "a100"))
    cluster.clock.advance(700)
    writes_before: list[int] = []

    # When another run takes the lease while this one re-reads the groups before setting desired
    # (as after this run's lease expired during a long pause)
    def take_over(params: dict[str, Any]) -> None:
        if not writes_before:
            writes_before.append(len(cluster.writes()))
            steal_lease(cluster)
        return None

    calls = [0]

    def on_describe(params: dict[str, Any]) -> None:
        calls[0] += 1
        if calls[0] == 2:  # the gather's describe is the first; the re-read before set-desired the second
            take_over(params)

    aws_fault("autoscaling", "DescribeAutoScalingGroups", on_describe)
    response = run_reconcile(cluster)
    # Then the old run writes nothing more: no desired change, no cordon, no Event, no state
    assert cluster.desired(cluster.a100) == 0
    assert not cluster.cordoned("idle")
    assert cluster.writes()[writes_before[0] :] == []
    assert any("lease was lost" in e for e in response["errors"])
    lease = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName=TABLE, Key={"pk": {"S": f"CLUSTER#{cluster.name}"}, "sk": {"S": "LEASE"}}
    )["Item"]
    assert lease["owner"]["S"] == "another-run"


# ------------------------------------------------------------------------------------------ drain intents


@pytest.mark.parametrize(
    "error",
    [
        {"Code": "ProvisionedThroughputExceededException", "Message": "Rate of requests exceeds"},
        {"Code": "ValidationException", "Message": "Item size has exceeded the maximum allowed size"},
    ],
    ids=["throttled", "item-over-400-kb"],
)
def test_a_drain_intent_that_cannot_be_stored_is_never_reported_draining(
    cluster: Cluster, aws_fault: Callable[[str, str, Fault], None], error: dict[str, str]
) -> None:
    # Given a busy a100 node, and DynamoDB refusing every write of a drain intent
    two_busy_nodes(cluster)

    def refuse_drains(params: dict[str, Any]) -> dict[str, Any] | None:
        items = params.get("TransactItems", ())
        drains = [
            i
            for i in items
            if i.get("Put", {}).get("Item", {}).get("sk", {}).get("S", "").startswith("DRAIN#")
        ]
        return dict(error) if drains else None

    aws_fault("dynamodb", "TransactWriteItems", refuse_drains)
    # When an operator drains n2
    report = force_scale_down.handler({"group": "a100", "nodes": ["n2"]}, FakeLambdaContext())
    # Then nothing started: no cordon, no eviction, nothing reported draining, and it says why
    assert report["draining"] == [] and report["intent_expires_at"] is None and not report["ok"]
    assert not cluster.cordoned("n2") and cluster.server.evictions == []
    assert cluster.state.drain_intents() == ()
    assert any(a["kind"] == "drain" and a["status"] == "failed" for a in report["actions"])
    # And the next reconcile finds nothing to undo
    cluster.clock.advance(60)
    response = run_reconcile(cluster)
    assert not cluster.cordoned("n2") and [a for a in response["actions"] if a["kind"] == "uncordon"] == []
