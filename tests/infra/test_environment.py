"""Function environments: names from shared.constants, only what each function uses, within 4 KB."""

from __future__ import annotations

import json

import pytest

from cdk.constructs.scaler_function import LAMBDA_ENVIRONMENT_LIMIT_BYTES, check_environment_size
from cdk.environment import config_json, function_environments
from shared import constants
from shared.config import parse_config
from shared.constants import (
    ALL_FUNCTIONS,
    ENV_CONFIG,
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
from tests.infra.conftest import Synthesized, default_scaler_context

KNOWN_NAMES = {value for name, value in vars(constants).items() if name.startswith("ENV_")}
POWERTOOLS = {ENV_POWERTOOLS_SERVICE_NAME, ENV_POWERTOOLS_METRICS_NAMESPACE, constants.ENV_TRACE_DISABLED}
SCALING = POWERTOOLS | {ENV_CONFIG, ENV_TABLE_NAME, ENV_TOPIC_ARN, ENV_DRY_RUN}


def _variables(synthesized: Synthesized, name: str) -> dict:
    return synthesized.function(name)["Environment"]["Variables"]


def test_every_variable_name_comes_from_shared_constants(synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        assert set(_variables(synthesized, name)) <= KNOWN_NAMES, name


def test_each_function_gets_only_what_it_uses(synthesized: Synthesized) -> None:
    assert set(_variables(synthesized, FUNCTION_RECONCILE)) == SCALING
    assert set(_variables(synthesized, FUNCTION_FORCE_SCALE_DOWN)) == SCALING
    assert set(_variables(synthesized, FUNCTION_AWS_EVENTS)) == SCALING
    assert set(_variables(synthesized, FUNCTION_WEBHOOK)) == POWERTOOLS | {
        ENV_CONFIG,
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


def test_config_variable_is_the_config_without_deployment(synthesized: Synthesized) -> None:
    # Given the JSON the functions receive, When parsed by the same model, Then it is the same config
    document = json.loads(_variables(synthesized, FUNCTION_RECONCILE)[ENV_CONFIG])
    assert "deployment" not in document
    parsed = parse_config(document, source=ENV_CONFIG)
    assert parsed == synthesized.config.model_copy(update={"deployment": parsed.deployment})


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
    assert len(_variables(synthesized, FUNCTION_RECONCILE)[ENV_CONFIG]) < LAMBDA_ENVIRONMENT_LIMIT_BYTES // 2
