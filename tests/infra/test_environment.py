"""Function environments: names from shared.constants, only what each function uses, within 4 KB."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from cdk.constructs.scaler_function import (
    LAMBDA_ENVIRONMENT_LIMIT_BYTES,
    SSM_ADVANCED_LIMIT_BYTES,
    UNRESOLVED_VALUE_ALLOWANCE_BYTES,
    check_environment_size,
)
from cdk.environment import config_json, function_environments
from shared import constants
from shared.config import decode_stored_config, parse_config
from shared.constants import (
    ALL_FUNCTIONS,
    ENV_CLUSTER_NAME,
    ENV_CONFIG,
    ENV_CONFIG_PARAMETER,
    ENV_CONFIG_VERSION,
    ENV_DRY_RUN,
    ENV_POWERTOOLS_METRICS_NAMESPACE,
    ENV_POWERTOOLS_SERVICE_NAME,
    ENV_QUEUE_URL,
    ENV_SLACK_SECRET_ARN,
    ENV_TABLE_NAME,
    ENV_TOPIC_ARN,
    ENV_WEBHOOK_SECRET_ARN,
    FUNCTION_AWS_EVENTS,
    FUNCTION_FORCE_SCALE_DOWN,
    FUNCTION_RECONCILE,
    FUNCTION_WEBHOOK,
    METRICS_NAMESPACE,
    SERVICE_NAME,
)
from shared.domain.errors import ConfigError
from tests.infra.conftest import Synthesized, default_scaler_context, synthesize

KNOWN_NAMES = {value for name, value in vars(constants).items() if name.startswith("ENV_")}
POWERTOOLS = {ENV_POWERTOOLS_SERVICE_NAME, ENV_POWERTOOLS_METRICS_NAMESPACE, constants.ENV_TRACE_DISABLED}
SCALING = POWERTOOLS | {ENV_CONFIG_PARAMETER, ENV_CONFIG_VERSION, ENV_TABLE_NAME, ENV_TOPIC_ARN, ENV_DRY_RUN}
SCALING_FUNCTIONS = (FUNCTION_RECONCILE, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS)


def _variables(synthesized: Synthesized, name: str) -> dict:
    return synthesized.function(name)["Environment"]["Variables"]


def _synthesized_size(variables: dict[str, Any]) -> int:
    """Bytes against Lambda's 4 KB, deploy-time values ({"Ref": ...}) counted as in the synth check."""
    return sum(
        len(key.encode())
        + (len(value.encode()) if isinstance(value, str) else UNRESOLVED_VALUE_ALLOWANCE_BYTES)
        for key, value in variables.items()
    )


def _config_parameter(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    (found,) = synthesized.resources("AWS::SSM::Parameter").items()
    return found[0], found[1]["Properties"]


def forty_groups() -> dict[str, Any]:
    """A lab's config: 40 GPU node groups, each with its labels, taints, priority, price and limit."""
    scaler = default_scaler_context()
    template = scaler["node_groups"][0]
    scaler["node_groups"] = [
        {
            **template,
            "name": f"gpu-{i:02d}",
            "asg_name": f"research-eks-gpu-{i:02d}-nodes",
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "lab.example.org/team": f"team-{i % 7}",
                "node.kubernetes.io/instance-type": template["instance_type"],
            },
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "priority": i % 5,
            "max_size": 8,
        }
        for i in range(40)
    ]
    return scaler


@pytest.fixture(scope="module")
def forty_synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(tmp_path_factory.mktemp("cdk-forty-groups"), forty_groups())


def test_every_variable_name_comes_from_shared_constants(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        assert set(_variables(synthesized, name)) <= KNOWN_NAMES, name


def test_each_function_gets_only_what_it_uses(synthesized: Synthesized) -> None:
    assert set(_variables(synthesized, FUNCTION_RECONCILE)) == SCALING
    assert set(_variables(synthesized, FUNCTION_FORCE_SCALE_DOWN)) == SCALING
    assert set(_variables(synthesized, FUNCTION_AWS_EVENTS)) == SCALING
    assert set(_variables(synthesized, FUNCTION_WEBHOOK)) == POWERTOOLS | {
        ENV_CLUSTER_NAME,  # the message group of the queue; never the config
        ENV_WEBHOOK_SECRET_ARN,
        ENV_QUEUE_URL,
    }


def test_values_point_at_the_stack_resources(synthesized: Synthesized) -> None:
    (table_id,) = synthesized.resources("AWS::DynamoDB::Table")
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    (secret_id,) = synthesized.resources("AWS::SecretsManager::Secret")
    reconcile = _variables(synthesized, FUNCTION_RECONCILE)
    webhook = _variables(synthesized, FUNCTION_WEBHOOK)
    assert reconcile[ENV_TABLE_NAME] == {"Ref": table_id}
    assert reconcile[ENV_TOPIC_ARN] == {"Ref": topic_id}
    assert reconcile[ENV_DRY_RUN] == "false"
    assert reconcile[ENV_POWERTOOLS_SERVICE_NAME] == SERVICE_NAME
    assert reconcile[ENV_POWERTOOLS_METRICS_NAMESPACE] == METRICS_NAMESPACE
    assert webhook[ENV_WEBHOOK_SECRET_ARN] == {"Ref": secret_id}
    (queue_id,) = [k for k, v in synthesized.resources("AWS::SQS::Queue").items() if "DeadLetter" not in k]
    assert webhook[ENV_QUEUE_URL] == {"Ref": queue_id}


def test_config_parameter_is_the_config_without_deployment(synthesized: Synthesized) -> None:
    # Given the JSON the functions read from the parameter, When parsed by the same model,
    # Then it is the same config
    parameter_id, parameter = _config_parameter(synthesized)
    document = json.loads(decode_stored_config(parameter["Value"]))
    assert "deployment" not in document
    parsed = parse_config(document, source=ENV_CONFIG)
    assert parsed == synthesized.config.model_copy(update={"deployment": parsed.deployment})
    # A config that fits 4 KB stays readable JSON in the free Standard tier
    assert parameter["Type"] == "String" and parameter["Tier"] == "Standard"
    assert parameter["Value"].startswith("{")
    for name in SCALING_FUNCTIONS:
        assert _variables(synthesized, name)[ENV_CONFIG_PARAMETER] == {"Ref": parameter_id}


def test_the_webhook_gets_the_cluster_name_not_the_whole_config(forty_synthesized: Synthesized) -> None:
    webhook = _variables(forty_synthesized, FUNCTION_WEBHOOK)
    assert webhook[ENV_CLUSTER_NAME] == forty_synthesized.config.cluster_name
    assert ENV_CONFIG not in webhook and ENV_CONFIG_PARAMETER not in webhook


def test_a_forty_group_config_deploys_through_the_parameter(forty_synthesized: Synthesized) -> None:
    # Given a lab with 40 node groups, whose config JSON is far beyond Lambda's 4 KB environment
    config = forty_synthesized.config
    assert len(config_json(config)) > 4 * LAMBDA_ENVIRONMENT_LIMIT_BYTES

    # When synthesized, Then the parameter holds it, compressed within SSM's limit
    parameter_id, parameter = _config_parameter(forty_synthesized)
    assert parameter["Name"] == f"/backlog-scaler/{config.cluster_name}/config"
    assert parameter["Type"] == "String"
    assert len(parameter["Value"]) <= SSM_ADVANCED_LIMIT_BYTES
    document = json.loads(decode_stored_config(parameter["Value"]))
    assert parse_config(document).node_groups == config.node_groups

    # And each scaling function's environment names the parameter and its version, nothing more
    versions = set()
    for name in SCALING_FUNCTIONS:
        variables = _variables(forty_synthesized, name)
        assert set(variables) == SCALING
        assert variables[ENV_CONFIG_PARAMETER] == {"Ref": parameter_id}
        versions.add(variables[ENV_CONFIG_VERSION])
        assert _synthesized_size(variables) < LAMBDA_ENVIRONMENT_LIMIT_BYTES // 2
    assert _synthesized_size(_variables(forty_synthesized, FUNCTION_WEBHOOK)) < LAMBDA_ENVIRONMENT_LIMIT_BYTES
    assert len(versions) == 1

    # And only the scaling functions may read it: ssm:GetParameter on exactly its ARN (a String
    # parameter, so no kms:Decrypt)
    for name in ALL_FUNCTIONS:
        ssm = [
            s for s in _statements(forty_synthesized, name) if any(a.startswith("ssm:") for a in _actions(s))
        ]
        if name == FUNCTION_WEBHOOK:
            assert ssm == []
            continue
        (statement,) = ssm
        assert _actions(statement) == ["ssm:GetParameter"]
        arn = _arn_text(statement["Resource"])
        assert arn.startswith(f"arn:aws:ssm:{config.region}:") and arn.endswith(
            f":parameter{parameter['Name']}"
        )


def test_a_changed_config_changes_the_version(
    synthesized: Synthesized, forty_synthesized: Synthesized
) -> None:
    default = _variables(synthesized, FUNCTION_RECONCILE)[ENV_CONFIG_VERSION]
    assert default != _variables(forty_synthesized, FUNCTION_RECONCILE)[ENV_CONFIG_VERSION]


def test_a_config_too_large_even_compressed_fails_the_synth(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Given groups that share nothing (digests as labels: gzip has nothing to fold)
    scaler = forty_groups()
    for i, group in enumerate(scaler["node_groups"]):
        digests = [hashlib.sha256(f"{i}-{n}".encode()).hexdigest() for n in range(4)]
        group["labels"] = {f"lab.example.org/{d[:16]}": d for d in digests}
    # When synthesized, Then the error says how big the config is and what SSM holds
    with pytest.raises(ConfigError, match=r"cdk.json context 'scaler'.*8192 bytes"):
        synthesize(tmp_path_factory.mktemp("cdk-too-large"), scaler)


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement.get("Action", [])
    return action if isinstance(action, list) else [action]


def _statements(synthesized: Synthesized, function: str) -> list[dict[str, Any]]:
    role_id = synthesized.function(function)["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _arn_text(value: Any) -> str:
    """An ARN as text, each reference written ${logical id} (Fn::Join flattened)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    separator, parts = value["Fn::Join"]
    return separator.join(_arn_text(part) for part in parts)


def test_dry_run_and_slack_secret_are_passed_when_configured() -> None:
    scaler = default_scaler_context()
    scaler["dry_run"] = True
    scaler["notifications"] = {
        "slack_webhook_secret_arn": "arn:aws:secretsmanager:us-west-2:1:secret:s-AbCdEf"
    }
    config = parse_config(scaler)
    environments = function_environments(
        config,
        table_name="t",
        queue_url="q",
        topic_arn="a",
        webhook_secret_arn="w",
        slack_secret_arn="arn:slack",
        config_parameter={"SCALER_CONFIG_PARAMETER": "/backlog-scaler/research/config"},
    )
    for name in (FUNCTION_RECONCILE, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS):
        assert environments[name][ENV_DRY_RUN] == "true"
        assert environments[name][ENV_SLACK_SECRET_ARN] == "arn:slack"
    assert ENV_SLACK_SECRET_ARN not in environments[FUNCTION_WEBHOOK]


def test_a_config_too_large_for_the_lambda_environment_fails_the_synth() -> None:
    # Given a config whose JSON alone exceeds Lambda's 4 KB environment
    scaler = default_scaler_context()
    scaler["node_groups"] = [
        {**scaler["node_groups"][0], "name": f"group-{i}", "asg_name": f"research-group-{i}"}
        for i in range(12)
    ]
    config = parse_config(scaler)
    assert len(config_json(config)) > LAMBDA_ENVIRONMENT_LIMIT_BYTES
    environment = {ENV_CONFIG: config_json(config)}
    # When checked, Then the error says what is too big and what to do
    with pytest.raises(ConfigError, match=r"cdk.json context 'scaler'.*4096 bytes"):
        check_environment_size(FUNCTION_RECONCILE, environment, ENV_CONFIG)


def test_the_default_config_leaves_room_in_the_environment(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        assert _synthesized_size(_variables(synthesized, name)) < LAMBDA_ENVIRONMENT_LIMIT_BYTES // 2, name
