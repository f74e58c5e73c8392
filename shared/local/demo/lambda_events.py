"""The events AWS hands the functions, built as Lambda receives them (field for field).

scheduled_event         EventBridge schedule -> reconcile
sqs_event               SQS event source mapping (a batch of received messages) -> reconcile
webhook_event           Function URL / HTTP API payload v2 (a signed POST) -> webhook
admission_review        the body the API server posts for a pod CREATE (admission.k8s.io/v1)
launch_unsuccessful     EventBridge "EC2 Instance Launch Unsuccessful" -> aws_events
LambdaContext           what Powertools reads of the context object
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ACCOUNT = "123456789012"  # moto's default account


def iso(at: datetime) -> str:
    """RFC 3339 with a Z, whole seconds (as EventBridge writes `time`)."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso_ms(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of the Lambda context object that Powertools and the handlers read."""

    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    region: str = "us-east-1"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.function_name}"

    @property
    def function_version(self) -> str:
        return "$LATEST"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "demo"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


def scheduled_event(now: datetime, region: str, rule: str) -> dict[str, Any]:
    """The EventBridge event of a `rate(1 minute)` rule."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": iso(now),
        "region": region,
        "resources": [f"arn:aws:events:{region}:{ACCOUNT}:rule/{rule}"],
        "detail": {},
    }


def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda SQS event for messages from `receive_message(..., MessageSystemAttributeNames=["All"])`."""
    records = []
    for message in messages:
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes") or {}),
                "messageAttributes": dict(message.get("MessageAttributes") or {}),
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        )
    return {"Records": records}


def webhook_event(path: str, body: str, headers: Mapping[str, str], now: datetime) -> dict[str, Any]:
    """A Function URL request (payload v2) POSTing `body` to `path` with `headers`."""
    all_headers = {
        "content-type": "application/json",
        "content-length": str(len(body.encode("utf-8"))),
        "host": "webhook.demo.lambda-url.us-east-1.on.aws",
        "user-agent": "kube-apiserver-admission",
        "x-forwarded-proto": "https",
        **{name.lower(): value for name, value in headers.items()},
    }
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": all_headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "webhook",
            "domainName": all_headers["host"],
            "domainPrefix": "webhook",
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": all_headers["user-agent"],
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "body": body,
        "isBase64Encoded": False,
    }


# Who creates what in the demo: the Job controller its pods, Kueue its ProvisioningRequests.
_CREATORS = {
    "Pod": ("pods", "system:serviceaccount:kube-system:job-controller"),
    "ProvisioningRequest": (
        "provisioningrequests",
        "system:serviceaccount:kueue-system:kueue-controller-manager",
    ),
}


def admission_review(pod: Mapping[str, Any]) -> str:
    """The AdmissionReview (v1) body the API server sends for the CREATE of `pod` (or of another
    object the webhook's rules name, such as a ProvisioningRequest), as JSON text."""
    meta = pod.get("metadata") or {}
    kind = str(pod.get("kind") or "Pod")
    group, _, version = str(pod.get("apiVersion") or "v1").rpartition("/")
    resource, username = _CREATORS[kind]
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    review = {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": username, "groups": ["system:serviceaccounts"]},
            "object": dict(pod),
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    return json.dumps(review, separators=(",", ":"))


def launch_unsuccessful(
    *,
    asg_name: str,
    region: str,
    now: datetime,
    availability_zone: str,
    instance_type: str,
    desired: int,
    running: int,
) -> dict[str, Any]:
    """EventBridge "EC2 Instance Launch Unsuccessful" for a launch EC2 had no capacity for."""
    activity = str(uuid.uuid4())
    group_id = uuid.uuid5(uuid.NAMESPACE_DNS, asg_name)
    message = (
        f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
        f"requested ({availability_zone}). Our system will be working on provisioning additional "
        "capacity. You can currently get capacity by not specifying an Availability Zone in your "
        "request or choosing a different Availability Zone. Launching EC2 instance failed."
    )
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "EC2 Instance Launch Unsuccessful",
        "source": "aws.autoscaling",
        "account": ACCOUNT,
        "time": iso(now),
        "region": region,
        "resources": [
            f"arn:aws:autoscaling:{region}:{ACCOUNT}:autoScalingGroup:{group_id}"
            f":autoScalingGroupName/{asg_name}"
        ],
        "detail": {
            "StatusCode": "Failed",
            "AutoScalingGroupName": asg_name,
            "ActivityId": activity,
            "Details": {"Availability Zone": availability_zone, "Subnet ID": "subnet-demo"},
            "RequestId": activity,
            "StatusMessage": message,
            "EndTime": _iso_ms(now),
            "EC2InstanceId": "",
            "StartTime": _iso_ms(now),
            "Cause": (
                f"At {iso(now)} an instance was started in response to a difference between desired and "
                f"actual capacity, increasing the capacity from {running} to {desired}."
            ),
        },
    }
