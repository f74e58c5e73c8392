"""Least privilege: one role per function, no wildcard actions, ASG mutations only on tagged groups."""

from __future__ import annotations

from typing import Any

import pytest

from shared.constants import (
    ALL_FUNCTIONS,
    FUNCTION_AWS_EVENTS,
    FUNCTION_FORCE_SCALE_DOWN,
    FUNCTION_RECONCILE,
    FUNCTION_WEBHOOK,
    TAG_CLUSTER,
)
from tests.infra.conftest import Synthesized

MUTATING = {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"}
DESCRIBES = {
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeAutoScalingInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeSubnets",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeLaunchTemplates",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _all_statements(synthesized: Synthesized) -> list[tuple[str, dict[str, Any]]]:
    """(logical id, statement) of every policy document in the template (identity and resource)."""
    found = []
    for logical_id, resource in synthesized.template_json["Resources"].items():
        props = resource.get("Properties", {})
        documents = [props.get(key) for key in ("PolicyDocument", "KeyPolicy", "AssumeRolePolicyDocument")]
        documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
        for document in documents:
            if isinstance(document, dict):
                found += [(logical_id, statement) for statement in document.get("Statement", [])]
    return found


def _role_statements(synthesized: Synthesized, function: str) -> list[dict[str, Any]]:
    """Allow statements of every policy attached to the function's role."""
    role_id = synthesized.function(function)["Role"]["Fn::GetAtt"][0]
    statements = []
    for resource in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in resource["Properties"]["Roles"]:
            statements += resource["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for s in statements if s["Effect"] == "Allow" for action in _as_list(s["Action"])}


def test_one_role_per_function(synthesized: Synthesized) -> None:
    roles = {synthesized.function(name)["Role"]["Fn::GetAtt"][0] for name in ALL_FUNCTIONS}
    assert len(roles) == 4
    assert set(synthesized.resources("AWS::IAM::Role")) == roles


def test_no_role_uses_a_managed_policy(synthesized: Synthesized) -> None:
    for role in synthesized.resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


def test_no_wildcard_in_any_allowed_action(synthesized: Synthesized) -> None:
    for logical_id, statement in _all_statements(synthesized):
        if statement["Effect"] != "Allow":
            continue  # a broad Deny (e.g. sqs:* without TLS) only takes permissions away
        actions = _as_list(statement.get("Action", []))
        if logical_id in synthesized.resources("AWS::KMS::Key") and actions == ["kms:*"]:
            # The standard key-policy statement delegating the key to the account's IAM policies.
            assert statement["Principal"]["AWS"]["Fn::Join"][1][-1] == ":root"
            continue
        assert not [a for a in actions if "*" in a], (logical_id, statement)


def test_asg_mutations_require_the_cluster_tag(synthesized: Synthesized) -> None:
    mutating = [s for _, s in _all_statements(synthesized) if MUTATING & set(_as_list(s.get("Action", [])))]
    assert mutating, "no statement grants SetDesiredCapacity"
    for statement in mutating:
        assert set(_as_list(statement["Action"])) == MUTATING
        assert statement["Condition"] == {
            "StringEquals": {f"autoscaling:ResourceTag/{TAG_CLUSTER}": synthesized.config.cluster_name}
        }
        resources = _as_list(statement["Resource"])
        assert "*" not in resources
        assert len(resources) == len(synthesized.config.node_groups)
        rendered = [str(r) for r in resources]
        for group in synthesized.config.node_groups:
            assert any(f"autoScalingGroupName/{group.asg_name}" in r for r in rendered)


XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


@pytest.mark.parametrize("variant", ["synthesized", "vpc_synthesized"])
def test_only_describes_and_tracing_have_wildcard_resources(
    variant: str, request: pytest.FixtureRequest
) -> None:
    # Given the default stack (tracing off) and the variant with tracing on
    synthesized: Synthesized = request.getfixturevalue(variant)
    tracing = synthesized.config.deployment.tracing
    for name in ALL_FUNCTIONS:
        statements = [
            s
            for s in _role_statements(synthesized, name)
            if s["Resource"] == "*" and "ec2:CreateNetworkInterface" not in _as_list(s["Action"])
        ]
        expected = ({frozenset(XRAY)} if tracing else set()) | (
            set() if name == FUNCTION_WEBHOOK else {frozenset(DESCRIBES)}
        )
        assert {frozenset(_as_list(s["Action"])) for s in statements} == expected, name


def test_describe_cluster_on_the_one_cluster(synthesized: Synthesized) -> None:
    (statement,) = [
        s for s in _role_statements(synthesized, FUNCTION_RECONCILE) if s["Action"] == "eks:DescribeCluster"
    ]
    parts = statement["Resource"]["Fn::Join"][1]
    assert parts[-1].endswith(f":cluster/{synthesized.config.cluster_name}")
    assert f"eks:{synthesized.config.region}:" in parts[2]


def test_each_function_gets_only_what_it_uses(synthesized: Synthesized) -> None:
    webhook = _actions(_role_statements(synthesized, FUNCTION_WEBHOOK))
    assert "sqs:SendMessage" in webhook
    assert "secretsmanager:GetSecretValue" in webhook
    assert not {
        a for a in webhook if a.split(":")[0] in ("dynamodb", "autoscaling", "ec2", "eks", "sns", "ssm")
    }

    reconcile = _actions(_role_statements(synthesized, FUNCTION_RECONCILE))
    assert reconcile >= MUTATING | DESCRIBES
    assert {"dynamodb:PutItem", "dynamodb:Query", "sns:Publish", "sqs:ReceiveMessage"} <= reconcile
    assert "sqs:SendMessage" not in reconcile
    assert "secretsmanager:GetSecretValue" not in reconcile  # no Slack secret configured

    force = _actions(_role_statements(synthesized, FUNCTION_FORCE_SCALE_DOWN))
    assert force >= MUTATING
    assert not {a for a in force if a.startswith("sqs:")}

    aws_events = _actions(_role_statements(synthesized, FUNCTION_AWS_EVENTS))
    assert aws_events >= MUTATING  # it records the backoff and reconciles itself
    # Only its on-failure destination (Lambda sends there on the function's behalf, with its role).
    assert {a for a in aws_events if a.startswith("sqs:")} <= {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }


def test_the_config_parameter_is_readable_by_the_scaling_functions_only(synthesized: Synthesized) -> None:
    # Given the SSM parameter that holds the config
    (parameter,) = synthesized.resources("AWS::SSM::Parameter").values()
    for name in (FUNCTION_RECONCILE, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS):
        # Then each scaling function may read that one parameter, and do nothing else in SSM
        (statement,) = [
            s
            for s in _role_statements(synthesized, name)
            if any(a.startswith("ssm:") for a in _as_list(s["Action"]))
        ]
        assert _as_list(statement["Action"]) == ["ssm:GetParameter"]
        assert statement["Resource"]["Fn::Join"][1] == [
            f"arn:aws:ssm:{synthesized.config.region}:",
            {"Ref": "AWS::AccountId"},
            f":parameter{parameter['Properties']['Name']}",
        ]
    assert not {a for a in _actions(_role_statements(synthesized, FUNCTION_WEBHOOK)) if a.startswith("ssm:")}


def test_no_unused_actions(synthesized: Synthesized) -> None:
    # Given every role's permissions
    granted = {a for name in ALL_FUNCTIONS for a in _actions(_role_statements(synthesized, name))}

    # Then nothing the code never calls: no EC2 instance reads, no stream reads (the table has no stream)
    assert not granted & {"ec2:DescribeInstances", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    assert not {a for a in granted if a.startswith("dynamodb:") and a.endswith(("Scan", "BatchGetItem"))}


def test_publishing_to_the_encrypted_topic_needs_no_wildcard_kms_action(synthesized: Synthesized) -> None:
    statements = _role_statements(synthesized, FUNCTION_RECONCILE)
    kms = [s for s in statements if any(a.startswith("kms:") for a in _as_list(s["Action"]))]
    assert [sorted(_as_list(s["Action"])) for s in kms] == [["kms:Decrypt", "kms:GenerateDataKey"]]


def test_logs_are_written_only_to_the_functions_own_group(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        log_group = synthesized.function(name)["LoggingConfig"]["LogGroup"]["Ref"]
        (statement,) = [
            s for s in _role_statements(synthesized, name) if "logs:PutLogEvents" in _as_list(s["Action"])
        ]
        assert statement["Resource"] == {"Fn::GetAtt": [log_group, "Arn"]}
