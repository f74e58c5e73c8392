"""The scaling functions' environment: one pydantic model, errors naming the variable, real wiring."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import boto3
import pytest
from moto import mock_aws

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from aws_lambda_powertools.utilities import parameters

from functions.common.dependencies import Dependencies
from functions.common.wiring import controller_from_environment
from shared.adapters.aws.fleet import AsgFleet
from shared.adapters.aws.notifier import SnsNotifier
from shared.adapters.aws.state_store import DynamoDbStateStore
from shared.adapters.kubernetes.cluster import KubernetesCluster
from shared.domain.errors import ConfigError
from shared.runtime import load_settings
from tests.fakes.aws import use_fake_credentials

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n").decode()
CONFIG = {
    "cluster_name": "research",
    "region": "us-west-2",
    "node_groups": [{"name": "a100", "asg_name": "research-a100", "instance_type": "p4d.24xlarge"}],
}


def environment(**changes: str | None) -> dict[str, str]:
    env = {
        "SCALER_CONFIG": json.dumps(CONFIG),
        "SCALER_TABLE_NAME": "backlog-scaler-state",
        "SCALER_DRY_RUN": "false",
        "SCALER_TOPIC_ARN": "arn:aws:sns:us-west-2:123456789012:backlog-scaler",
        "SCALER_CLUSTER_ENDPOINT": "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
        "SCALER_CLUSTER_CA": CA,
        "AWS_LAMBDA_FUNCTION_NAME": "backlog-scaler-reconcile",
        "PATH": "/usr/bin",
    }
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SCALER_TABLE_NAME": None}, "environment: SCALER_TABLE_NAME: Field required"),
        ({"SCALER_CONFIG": None}, "environment: SCALER_CONFIG: Field required"),
        ({"SCALER_CONFIG": "{not json"}, "environment: SCALER_CONFIG: not valid JSON"),
        (
            {"SCALER_CONFIG": json.dumps({**CONFIG, "node_groups": []})},
            "environment: SCALER_CONFIG: node_groups: Tuple should have at least 1 item",
        ),
        ({"SCALER_DRY_RUN": "perhaps"}, "environment: SCALER_DRY_RUN"),
    ],
)
def test_bad_environment_names_the_variable(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(environment(**changes))


def test_environment_overrides_the_config_and_blank_means_unset() -> None:
    settings = load_settings(environment(SCALER_DRY_RUN="true", SCALER_SLACK_SECRET_ARN=" "))
    config = settings.scaler_config()
    assert settings.dry_run and settings.slack_secret_arn is None
    assert config.kubernetes.endpoint == "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com"
    assert config.kubernetes.certificate_authority == CA
    assert config.notifications.sns_topic_arn == "arn:aws:sns:us-west-2:123456789012:backlog-scaler"
    assert settings.owner == "backlog-scaler-reconcile"


def test_controller_is_built_once_from_the_environment_on_the_real_adapters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in environment(SCALER_DRY_RUN="true").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    builds: list[int] = []

    def build() -> Any:
        builds.append(1)
        return controller_from_environment()

    with mock_aws():
        dependencies = Dependencies(build)
        controller = dependencies.get()
        assert dependencies.get() is controller and builds == [1]
    assert controller.dry_run
    assert isinstance(controller.deps.ports.cluster, KubernetesCluster)
    assert isinstance(controller.deps.ports.fleet, AsgFleet)
    assert isinstance(controller.deps.ports.state, DynamoDbStateStore)
    assert isinstance(controller.deps.notifier, SnsNotifier)


def test_without_a_parameter_name_the_config_comes_from_the_environment() -> None:
    # Given a local run: SCALER_CONFIG set, the parameter name blank (no SSM call is made)
    settings = load_settings(environment(SCALER_CONFIG_PARAMETER=" "))
    assert settings.config_parameter is None
    assert settings.config.cluster_name == "research"


def test_controller_is_built_from_the_config_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the deployed environment: the parameter's name and version instead of SCALER_CONFIG
    for key, value in environment(SCALER_CONFIG=None).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SCALER_CONFIG", raising=False)
    monkeypatch.setenv("SCALER_CONFIG_PARAMETER", "/backlog-scaler/research/config")
    monkeypatch.setenv("SCALER_CONFIG_VERSION", "0123456789abcdef")
    use_fake_credentials(monkeypatch, "us-west-2")
    parameters.clear_caches()
    try:
        with mock_aws():
            boto3.client("ssm", region_name="us-west-2").put_parameter(
                Name="/backlog-scaler/research/config", Value=json.dumps(CONFIG), Type="String"
            )
            # When the cold start builds the controller, Then it runs on the parameter's config
            controller = controller_from_environment()
    finally:
        parameters.clear_caches()
    assert controller.config.cluster_name == "research"
    assert controller.config.group_names == ("a100",)
    assert isinstance(controller.deps.ports.fleet, AsgFleet)
