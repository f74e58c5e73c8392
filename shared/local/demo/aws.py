"""The AWS side of the local run: a moto server on 127.0.0.1 and what `cdk deploy` would create in it.

Resources: one launch template and one Auto Scaling group per node group (tagged with the cluster),
the DynamoDB state table (the state store's own `create_table`), the SQS FIFO trigger queue, the SNS
topic and the webhook secret in Secrets Manager. Every client comes from `shared.adapters.aws.clients`
(boto3 stays in the adapters), pointed at moto by AWS_ENDPOINT_URL exactly like the functions' clients.

EC2 capacity shortages: moto launches whatever desired capacity asks for, so `CapacityShortage` caps
the instances of chosen groups inside the (in-process) moto backend. Desired then stays above the
instances, as on AWS when EC2 has no capacity; the world emits the launch-failure events.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.state_store import create_table
from shared.config import ScalerConfig
from shared.domain.errors import ConfigError
from shared.local.sim.world import launchable

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
DEMO_AMI = "ami-12c6146b"  # one of moto's default images
QUEUE_VISIBILITY_SECONDS = 30


@dataclass(frozen=True)
class DemoResources:
    """Names and ARNs of what `provision` created (the functions' environment points at them)."""

    table_name: str
    queue_url: str
    queue_arn: str
    topic_arn: str
    webhook_secret_arn: str
    webhook_secret: str  # the value: the demo signs webhook requests with it, like a forwarder would


class MotoServer:
    """moto's threaded server on 127.0.0.1, on a free port."""

    def __init__(self) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # moto[server] is a dev dependency; `make demo` installs it
            raise ConfigError("the demo needs moto[server]: pip install -e '.[dev]'") from exc
        # werkzeug logs every request on stderr; the demo prints its own timeline instead.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""

    def start(self) -> str:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        self._server.stop()


def provision(config: ScalerConfig, *, asg_max_size: int) -> DemoResources:
    """Create the groups, the table, the queue, the topic and the webhook secret; return their names."""
    region = config.region
    prefix = f"{constants.SERVICE_NAME}-{config.cluster_name}"
    ec2 = clients.client("ec2", region)
    autoscaling = clients.client("autoscaling", region)
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
    for group in config.node_groups:
        template = f"{prefix}-{group.name}"
        ec2.create_launch_template(
            LaunchTemplateName=template,
            LaunchTemplateData={"ImageId": DEMO_AMI, "InstanceType": group.instance_type},
        )
        tags = {constants.TAG_CLUSTER: config.cluster_name, constants.TAG_GROUP: group.name}
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=group.asg_name,
            LaunchTemplate={"LaunchTemplateName": template, "Version": "$Latest"},
            MinSize=0,
            MaxSize=group.max_size if group.max_size is not None else asg_max_size,
            DesiredCapacity=0,
            AvailabilityZones=zones,
            Tags=[
                {
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": True,
                    "ResourceId": group.asg_name,
                    "ResourceType": "auto-scaling-group",
                }
                for key, value in tags.items()
            ],
        )
    table_name = f"{prefix}-state"
    create_table(clients.client("dynamodb", region), table_name)
    sqs = clients.client("sqs", region)
    # No delivery delay: the driver delivers queued triggers only after the simulated scheduler has
    # tried the new pods, which is what the production delay (10 s) waits for.
    queue_url = sqs.create_queue(
        QueueName=f"{prefix}-triggers.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "false",
            "DelaySeconds": "0",
            "VisibilityTimeout": str(QUEUE_VISIBILITY_SECONDS),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    topic_arn = clients.client("sns", region).create_topic(Name=f"{prefix}-decisions")["TopicArn"]
    secret = secrets.token_urlsafe(32)
    secret_arn = clients.client("secretsmanager", region).create_secret(
        Name=f"{prefix}/webhook", SecretString=secret
    )["ARN"]
    return DemoResources(table_name, queue_url, queue_arn, topic_arn, secret_arn, secret)


class CapacityShortage:
    """Caps the instances EC2 "has capacity for" per ASG name, inside the in-process moto backend.

    moto's group launches `desired - running` instances through `replace_autoscaling_group_instances`;
    while installed, a capped group launches only up to its cap and the rest silently does not
    happen, leaving desired above the instance count, as a real ASG does while EC2 refuses it.
    """

    _TARGET = "replace_autoscaling_group_instances"

    def __init__(self, caps: Mapping[str, int]) -> None:
        self._caps = dict(caps)

    @contextlib.contextmanager
    def installed(self) -> Iterator[CapacityShortage]:
        from moto.autoscaling.models import FakeAutoScalingGroup

        original: Callable[..., None] | None = getattr(FakeAutoScalingGroup, self._TARGET, None)
        if original is None:
            raise ConfigError(f"this moto version has no FakeAutoScalingGroup.{self._TARGET}: pin moto 5.2.x")
        launch = original
        shortage = self

        def capped(group: Any, count_needed: int, propagated_tags: dict[str, str]) -> None:
            count = shortage.allowed(group.name, len(group.active_instances()), count_needed)
            if count > 0:
                launch(group, count, propagated_tags)

        setattr(FakeAutoScalingGroup, self._TARGET, capped)
        try:
            yield self
        finally:
            setattr(FakeAutoScalingGroup, self._TARGET, original)

    def allowed(self, asg_name: str, running: int, wanted: int) -> int:
        """How many of `wanted` new instances EC2 launches for a group that runs `running`."""
        return launchable(self._caps.get(asg_name), running, wanted)
