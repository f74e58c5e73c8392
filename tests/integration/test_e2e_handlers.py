"""End to end: the real handlers, the real adapters, moto (`mock_aws`) and the fake Kubernetes API server.

Each test builds one cluster: two GPU groups (a100 preferred, h100) as moto Auto Scaling groups, their
instances registered as Nodes on the fake API server (real HTTP, the official kubernetes client), the
DynamoDB state table and an SNS topic, and the functions' environment pointing at all of it. The
controller is the one the handlers build from that environment; only its clock is a test clock, so
idle thresholds pass without waiting.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws
from moto.autoscaling.models import autoscaling_backends

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.aws_events import handler as aws_events
from functions.common.powertools import logger
from functions.force_scale_down import handler as force_scale_down
from functions.reconcile import handler as reconcile
from functions.webhook.queue import deduplication_id, message_body
from functions.webhook.service import build_webhook
from functions.webhook.settings import load_settings as load_webhook_settings
from shared.adapters.aws import clients
from shared.adapters.aws.state_store import DynamoDbStateStore, create_table
from shared.adapters.kubernetes.rbac import status_config_map
from shared.config import PolicyConfig
from shared.constants import DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP, STATUS_DATA_KEY, TAG_CLUSTER
from shared.domain.errors import ClusterReadError, FleetReadError, ThrottledError
from shared.local import cli
from shared.local.kube_api_server import FakeKubeApiServer
from shared.observability import PowertoolsReporter
from shared.runtime import build_controller, load_settings
from shared.webhook_auth import sign
from tests.builders import GPU_TAINT, iso, node, pod
from tests.builders_dra import claim_template, device_class, dra_pod, from_template, gpu_device, slice_spec
from tests.fakes.aws import use_fake_credentials
from tests.fakes.memory import FakeClock, FakeLambdaContext

REGION = "us-west-2"
ACCOUNT = "123456789012"
TABLE = "backlog-scaler-state"
TOKEN = "e2e-token"
EVENTS = Path(__file__).resolve().parents[1] / "events"
SHAPE = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}
HANDLERS = (reconcile, aws_events, force_scale_down)

pytestmark = pytest.mark.slow


def scaler_config(name: str) -> dict[str, Any]:
    return {
        "cluster_name": name,
        "region": REGION,
        "node_groups": [
            {"name": "a100", "asg_name": f"{name}-a100", "allocatable": SHAPE, "labels": {"gpu": "a100"},
             "taints": [GPU_TAINT], "priority": 10, "max_size": 8},
            {"name": "h100", "asg_name": f"{name}-h100", "allocatable": SHAPE, "labels": {"gpu": "h100"},
             "taints": [GPU_TAINT], "max_size": 8},
        ],
        "policy": {"idle_seconds": 600, "cordon_settle_seconds": 30, "max_scale_in_fraction": 1.0},
    }  # fmt: skip


@dataclass(frozen=True)
class Aws:
    """What every cluster of the module shares in one moto account: the table, a topic, a template."""

    topic_arn: str


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    # One moto account for the module (its EC2 backend costs a second to build); each test gets its
    # own cluster name, hence its own groups, state partition and queue.
    with pytest.MonkeyPatch.context() as patch:
        use_fake_credentials(patch, REGION)
        with mock_aws():
            create_table(boto3.client("dynamodb", region_name=REGION), TABLE)
            topic = boto3.client("sns", region_name=REGION).create_topic(Name="backlog-scaler")["TopicArn"]
            boto3.client("ec2", region_name=REGION).create_launch_template(
                LaunchTemplateName="gpu",
                LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p4d.24xlarge"},
            )
            yield Aws(topic)
        clients.clear_clients()


class Cluster:
    """One cluster on moto and the fake API server, and the handlers wired to it."""

    def __init__(
        self, name: str, aws: Aws, server: FakeKubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.name = name
        self.a100, self.h100 = f"{name}-a100", f"{name}-h100"
        self.server = server
        self.now = datetime.now(UTC).replace(microsecond=0)
        self.clock = FakeClock(self.now)
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", TOKEN)
        self.autoscaling = boto3.client("autoscaling", region_name=REGION)
        for asg in (self.a100, self.h100):
            self.autoscaling.create_auto_scaling_group(
                AutoScalingGroupName=asg,
                MinSize=0,
                MaxSize=8,
                DesiredCapacity=0,
                LaunchTemplate={"LaunchTemplateName": "gpu"},
                AvailabilityZones=[f"{REGION}a"],
                # the tag the stack's IAM conditions key on, and that marks a group as the scaler's
                Tags=[{"Key": TAG_CLUSTER, "Value": name, "PropagateAtLaunch": False}],
            )
        environment = {
            "SCALER_CONFIG": json.dumps(scaler_config(name)),
            "SCALER_TABLE_NAME": TABLE,
            "SCALER_TOPIC_ARN": aws.topic_arn,
            "SCALER_KUBECONFIG": str(kubeconfig),
            "SCALER_DRY_RUN": "false",
            "AWS_LAMBDA_FUNCTION_NAME": "backlog-scaler-e2e",
        }
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        self.state = DynamoDbStateStore(
            TABLE, name, PolicyConfig(), boto3.client("dynamodb", region_name=REGION)
        )

    def wire(self) -> None:
        """The controller the handlers build from the environment, on the test clock."""
        settings = load_settings(os.environ)
        reporter = PowertoolsReporter(logger=logger, cluster=self.name)
        controller = build_controller(settings, reporter=reporter, clock=self.clock)
        for module in HANDLERS:
            module.set_dependencies(controller)

    def launch(self, asg: str, count: int) -> list[str]:
        """Grow a group in moto (which launches at once); returns the new instance ids."""
        before = set(self.instances(asg))
        self.autoscaling.set_desired_capacity(
            AutoScalingGroupName=asg, DesiredCapacity=self.desired(asg) + count
        )
        return sorted(set(self.instances(asg)) - before)

    def register(self, name: str, instance_id: str, gpu: str = "a100", **kw: Any) -> None:
        created = self.now - timedelta(hours=2)
        self.server.add_node(node(name, instance_id, labels={"gpu": gpu}, created=created, **kw))

    def group(self, asg: str) -> dict[str, Any]:
        found: dict[str, Any] = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])[
            "AutoScalingGroups"
        ][0]
        return found

    def desired(self, asg: str) -> int:
        return int(self.group(asg)["DesiredCapacity"])

    def instances(self, asg: str) -> list[str]:
        return [i["InstanceId"] for i in self.group(asg)["Instances"]]

    def writes(self) -> list[str]:
        """Every write the scaler made to the Kubernetes API."""
        return [f"{c.method} {c.path}" for c in self.server.calls if c.method != "GET"]

    def cordoned(self, name: str) -> bool:
        found = self.server.get_node(name)
        return bool(found and found["spec"].get("unschedulable"))


_clusters = itertools.count(1)


@pytest.fixture
def cluster(
    aws: Aws, kube_api_server: FakeKubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    # RBAC is the generated ClusterRole's (conftest): a request it lacks is a 403, as on a cluster.
    kube_api_server.require_token(TOKEN)
    world = Cluster(f"research-{next(_clusters)}", aws, kube_api_server, tmp_path, monkeypatch)
    world.wire()
    yield world
    for module in HANDLERS:
        module.set_dependencies(None)


@pytest.fixture
def throttle() -> Iterator[Callable[[str, int], None]]:
    """Answer an operation of the scaler's autoscaling client with Throttling (after botocore's retries)."""
    client = clients.client("autoscaling", REGION)
    registered: list[tuple[str, Callable[..., Any]]] = []

    def install(operation: str, times: int) -> None:
        remaining = [times]

        def throttled(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            if remaining[0] == 0:
                return None
            remaining[0] -= 1
            error = {
                "Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            return AWSResponse("https://autoscaling.amazonaws.com", 400, {}, None), error

        event = f"before-call.auto-scaling.{operation}"
        client.meta.events.register_first(event, throttled)
        registered.append((event, throttled))

    yield install
    for event, handler in registered:
        client.meta.events.unregister(event, handler)


def schedule() -> dict[str, Any]:
    return json.loads((EVENTS / "schedule.json").read_text())


def run_reconcile(cluster: Cluster) -> dict[str, Any]:
    return reconcile.handler(schedule(), FakeLambdaContext())


# ------------------------------------------------------------------------------------------ scaling


def test_idle_node_is_cordoned_then_terminated(cluster: Cluster) -> None:
    # Given an a100 node running only a DaemonSet pod, and a busy one
    idle, busy = cluster.launch(cluster.a100, 2)
    cluster.register("idle", idle)
    cluster.register("busy", busy)
    cluster.server.add_pod(pod("plugin", gpus=0, node="idle", owner_kind="DaemonSet"))
    cluster.server.add_pod(pod("job", node="busy"))
    # When the scaler runs over 11 minutes: first it only notes the idle time
    run_reconcile(cluster)
    assert not cluster.cordoned("idle")
    cluster.clock.advance(660)
    # Then it cordons the idle node (never the busy one)
    cordon = run_reconcile(cluster)
    assert cluster.cordoned("idle") and not cluster.cordoned("busy")
    assert [a["kind"] for a in cordon["actions"]] == ["cordon"]
    annotations = cluster.server.get_node("idle")["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["backlog-scaler/cordoned-at"] == iso(cluster.clock.now())
    # When it runs again after the settle time: the instance is terminated with decrement, Node deleted
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert cluster.instances(cluster.a100) == [busy] and cluster.desired(cluster.a100) == 1
    assert cluster.server.get_node("idle") is None
    assert cluster.server.get_node("busy") is not None


def test_launch_failure_moves_the_backlog_to_the_next_group_in_one_run(cluster: Cluster) -> None:
    # Given a100 asked for a node that could not launch (desired 1, no instance) and the pod still pending
    cluster.server.add_pod(pod("train", gpus=8))
    autoscaling_backends[ACCOUNT][REGION].autoscaling_groups[cluster.a100].desired_capacity = 1
    event = json.loads((EVENTS / "launch_unsuccessful.json").read_text())
    event["detail"]["StartTime"] = cluster.now.isoformat()
    event["detail"]["AutoScalingGroupName"] = cluster.a100
    # When EventBridge delivers "EC2 Instance Launch Unsuccessful"
    response = aws_events.handler(event, FakeLambdaContext())
    # Then a100 backs off, its launch is cancelled, and h100 grows for the pod in the same invocation
    assert response["ok"], response
    assert cluster.desired(cluster.a100) == 0 and cluster.desired(cluster.h100) == 1
    assert cluster.state.load().groups["a100"].backoff_until == cluster.now + timedelta(minutes=5)
    [event_obj] = [e for e in cluster.server.events() if e["reason"] == "TriggeredScaleUp"]
    assert event_obj["involvedObject"]["name"] == "train"
    assert "h100" in event_obj["message"]


def test_forced_scale_down_with_a_pdb_that_blocks_then_allows(cluster: Cluster) -> None:
    # Given two busy a100 nodes whose pods a PodDisruptionBudget (minAvailable 1) covers, one not Ready
    first, second = cluster.launch(cluster.a100, 2)
    cluster.register("n1", first)
    cluster.register("n2", second)
    cluster.server.add_pod(pod("train-0", node="n1", labels={"app": "train"}))
    cluster.server.add_pod(pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet", labels={"app": "plugin"}))
    cluster.server.add_pod(pod("train-1", node="n2", labels={"app": "train"}))
    set_ready(cluster, "train-1", False)
    cluster.server.add_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train", "namespace": "research"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
        }
    )
    # When an operator forces n1 out
    report = force_scale_down.handler(
        {"group": "a100", "nodes": ["n1"], "requested_by": "ops"}, FakeLambdaContext()
    )
    # Then n1 is cordoned, its pod's eviction refused by the PDB, and the drain stored
    assert report["ok"] and report["draining"] == ["n1"] and report["blocked"] == ["research/train-0"]
    assert cluster.cordoned("n1")
    assert [i.nodes for i in cluster.state.drain_intents()] == [("n1",)]
    # When the reconcile runs while the budget still says no: nothing moves
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert cluster.server.get_pod("research", "train-0") is not None
    # When the other pod becomes Ready, the budget allows one disruption: the next run evicts
    set_ready(cluster, "train-1", True)
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert ("research", "train-0") in cluster.server.evictions
    # And the run after that terminates the empty node with decrement and forgets the drain
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert cluster.instances(cluster.a100) == [second] and cluster.desired(cluster.a100) == 1
    assert cluster.server.get_node("n1") is None
    assert cluster.state.drain_intents() == ()


def set_ready(cluster: Cluster, name: str, ready: bool) -> None:
    def update(obj: dict[str, Any]) -> None:
        for condition in obj["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition["status"] = "True" if ready else "False"

    cluster.server.update_pod("research", name, update)


def test_spot_interruption_cordons_the_node_and_the_next_runs_keep_it_cordoned(cluster: Cluster) -> None:
    [instance] = cluster.launch(cluster.a100, 1)
    cluster.register("spot", instance)
    cluster.server.add_pod(pod("job", node="spot"))
    event = json.loads((EVENTS / "spot_interruption.json").read_text())
    event["detail"]["instance-id"] = instance
    aws_events.handler(event, FakeLambdaContext())
    assert cluster.cordoned("spot")
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert cluster.cordoned("spot") and cluster.server.evictions == []


# ------------------------------------------------------------------------------------------ failures


def idle_cordoned_node(cluster: Cluster) -> str:
    """An a100 node the scaler cordoned long ago, still idle: the next run would terminate it."""
    [instance] = cluster.launch(cluster.a100, 1)
    cordoned_at = {"backlog-scaler/cordoned-at": iso(cluster.now - timedelta(minutes=5))}
    cluster.register("idle", instance, unschedulable=True, annotations=cordoned_at)
    return instance


@pytest.mark.parametrize(
    "fault",
    [
        {"method": "GET", "path_regex": r"^/api/v1/nodes$", "status": 500},
        {"method": "GET", "path_regex": r"^/api/v1/pods$", "drop": True, "times": -1},
        {"method": "GET", "path_regex": r"^/api/v1/nodes$", "status": 429, "times": -1, "retry_after": 0},
    ],
    ids=["http-500", "dropped-connection", "throttled"],
)
def test_kubernetes_failure_mid_gather_changes_nothing(cluster: Cluster, fault: dict[str, Any]) -> None:
    instance = idle_cordoned_node(cluster)
    cluster.server.add_pod(pod("train", gpus=8, node_selector={"gpu": "h100"}))  # would also scale up
    cluster.server.clear_calls()
    cluster.server.inject(**fault)
    with pytest.raises((ClusterReadError, ThrottledError)):
        run_reconcile(cluster)
    assert (
        cluster.instances(cluster.a100) == [instance]
        and cluster.desired(cluster.a100) == 1
        and cluster.desired(cluster.h100) == 0
    )
    assert cluster.writes() == []
    # And once the API server recovers, the next run does the work
    cluster.server.clear_injections()
    run_reconcile(cluster)
    assert cluster.server.get_node("idle") is None and cluster.desired(cluster.h100) == 1


def test_aws_throttling_on_the_read_changes_nothing(
    cluster: Cluster, throttle: Callable[[str, int], None]
) -> None:
    instance = idle_cordoned_node(cluster)
    cluster.server.clear_calls()
    throttle("DescribeAutoScalingGroups", 1)
    with pytest.raises(FleetReadError, match="Throttling"):
        run_reconcile(cluster)
    assert cluster.instances(cluster.a100) == [instance] and cluster.writes() == []


def test_aws_throttling_on_set_desired_is_reported_and_the_next_run_succeeds(
    cluster: Cluster, throttle: Callable[[str, int], None]
) -> None:
    cluster.server.add_pod(pod("train", gpus=8))
    throttle("SetDesiredCapacity", 1)
    first = run_reconcile(cluster)
    assert not first["ok"] and "Throttling" in first["errors"][0]
    assert cluster.desired(cluster.a100) == 0
    assert not [e for e in cluster.server.events() if e["reason"] == "TriggeredScaleUp"]
    second = run_reconcile(cluster)
    assert second["ok"] and cluster.desired(cluster.a100) == 1


# ------------------------------------------------------------------------------------------ queue


def sqs_event(sqs: Any, queue_url: str) -> dict[str, Any]:
    """The Lambda SQS event source's event for what the queue delivers now."""
    messages = sqs.receive_message(QueueUrl=queue_url, AttributeNames=["All"], MaxNumberOfMessages=10)
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message["Attributes"],
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:backlog-scaler-triggers.fifo",
                "awsRegion": REGION,
            }
            for message in messages.get("Messages", [])
        ]
    }


def fifo_queue(cluster: Cluster) -> tuple[Any, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = {"FifoQueue": "true"}
    return sqs, sqs.create_queue(QueueName=f"{cluster.name}-triggers.fifo", Attributes=attributes)["QueueUrl"]


def test_wake_up_from_the_queue_runs_a_reconcile_with_the_environment_built_controller(
    cluster: Cluster,
) -> None:
    # Given the handlers build their controller from the environment alone (system clock)
    for module in HANDLERS:
        module.set_dependencies(None)
    cluster.server.add_pod(pod("train", gpus=8, created=datetime.now(UTC) - timedelta(minutes=1)))
    sqs, queue_url = fifo_queue(cluster)
    now = datetime.now(UTC).timestamp()
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=message_body("admission", cluster.name, "pod research/train requests 8 GPUs", now),
        MessageGroupId=cluster.name,
        MessageDeduplicationId=deduplication_id(cluster.name, now),
    )
    # When the queue delivers the message to the reconcile function (the Lambda event source's shape)
    response = reconcile.handler(sqs_event(sqs, queue_url), FakeLambdaContext())
    # Then the batch succeeds and the group grew for the pod
    assert response == {"batchItemFailures": []}
    assert cluster.desired(cluster.a100) == 1


WEBHOOK_SECRET = "whsec-e2e-0123456789abcdef0123456789"


def test_pending_pods_reach_the_group_through_webhook_queue_and_reconcile(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # Given a signed webhook on the cluster's FIFO queue, and three pending 8-GPU pods
    sqs, queue_url = fifo_queue(cluster)
    secret_arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name=f"{cluster.name}-webhook", SecretString=WEBHOOK_SECRET
    )["ARN"]
    monkeypatch.setenv("SCALER_QUEUE_URL", queue_url)
    monkeypatch.setenv("SCALER_WEBHOOK_SECRET_ARN", secret_arn)
    webhook_handler = importlib.import_module("functions.webhook.handler")  # builds at import, as on Lambda
    webhook_handler.set_dependencies(build_webhook(load_webhook_settings(os.environ)))
    request.addfinalizer(lambda: webhook_handler.set_dependencies(None))
    for i in range(3):
        cluster.server.add_pod(pod(f"train-{i}", gpus=8, created=datetime.now(UTC) - timedelta(minutes=1)))

    # When the API server's AdmissionReviews arrive signed, and the queue then wakes the reconcile
    admission = json.loads((EVENTS / "webhook_function_url_admission.json").read_text())
    answers = []
    for _ in range(3):
        signed = {**admission["headers"], **sign(WEBHOOK_SECRET, int(time.time()), admission["body"])}
        answers.append(webhook_handler.handler({**admission, "headers": signed}, FakeLambdaContext()))
    event = sqs_event(sqs, queue_url)
    response = reconcile.handler(event, FakeLambdaContext())

    # Then every pod was admitted, the burst became one message, and one run grew a100 by 3 nodes
    assert [a["statusCode"] for a in answers] == [200, 200, 200]
    assert len(event["Records"]) == 1
    assert response == {"batchItemFailures": []}
    assert cluster.desired(cluster.a100) == 3


def test_pods_claiming_gpus_through_dra_scale_a_group_up_from_zero(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a100 at zero declaring the 8 GPUs its DRA driver publishes per node, a DeviceClass and a
    # claim template on the API server, and 10 pending pods each claiming one GPU from the template
    config = scaler_config(cluster.name)
    config["node_groups"][0]["resource_slices"] = [slice_spec([gpu_device(i) for i in range(8)], pool="gpus")]
    monkeypatch.setenv("SCALER_CONFIG", json.dumps(config))
    cluster.wire()
    cluster.server.add_dra_object(device_class())
    cluster.server.add_dra_object(claim_template())
    for index in range(10):
        cluster.server.add_pod(dra_pod(f"train-{index}", [from_template()]))
    # When the reconcile runs (its reads pass the generated ClusterRole)
    result = run_reconcile(cluster)
    # Then a100 grows to the two nodes whose devices the claims need; h100 (no devices known) stays
    assert cluster.desired(cluster.a100) == 2 and cluster.desired(cluster.h100) == 0
    assert [a["kind"] for a in result["actions"]] == ["set-desired"]


# ------------------------------------------------------------------------------------------ status


def test_each_run_keeps_the_status_config_map_that_the_status_command_prints(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the status ConfigMap the applied manifests create, and a pending 8-GPU pod
    cluster.server.add_config_map(status_config_map(DEFAULT_STATUS_NAMESPACE))
    cluster.server.add_pod(pod("train", gpus=8))

    # When the reconcile handler runs: the group grows and the status says so, under the generated roles
    run_reconcile(cluster)
    stored = cluster.server.get_config_map(DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP)
    assert stored is not None
    status = json.loads(stored["data"][STATUS_DATA_KEY])
    groups = {g["name"]: g for g in status["groups"]}
    assert (groups["a100"]["desired"], groups["a100"]["ready"], groups["a100"]["booting"]) == (1, 0, 1)
    assert status["run"]["trigger"] == "schedule" and status["run"]["result"] == "ok"

    # When it runs twice more on the same picture (the first says the pod waits for the booting node,
    # where the run before said why it grew): the second writes nothing
    cluster.clock.advance(60)
    run_reconcile(cluster)
    cluster.server.clear_calls()
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert not [w for w in cluster.writes() if "/configmaps/" in w]

    # When the operator asks through a kubeconfig: the status as stored, and as a table
    kubeconfig = str(cluster.server.write_kubeconfig(tmp_path / "operator", TOKEN))
    capsys.readouterr()  # the functions' log lines
    assert cli.main(["status", "--kubeconfig", kubeconfig, "--format", "json"]) == 0
    stored = cluster.server.get_config_map(DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP)
    assert stored is not None
    assert json.loads(capsys.readouterr().out) == json.loads(stored["data"][STATUS_DATA_KEY])
    assert cli.main(["status", "--kubeconfig", kubeconfig]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith(f"cluster {cluster.name}: last run ")
    assert any(line.split()[:4] == ["a100", "1", "0", "1"] for line in table)


def test_the_status_command_names_a_missing_config_map(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = str(cluster.server.write_kubeconfig(tmp_path / "operator", TOKEN))
    assert cli.main(["status", "--kubeconfig", kubeconfig, "--namespace", DEFAULT_STATUS_NAMESPACE]) == 2
    assert f"no ConfigMap {DEFAULT_STATUS_NAMESPACE}/{STATUS_CONFIGMAP}" in capsys.readouterr().err
