"""The functions' environment (one pydantic model, parsed once) and the real adapters built from it.

    SCALER_CONFIG_PARAMETER  the SSM parameter holding the scaler config (what the stack sets);
                             read once per cold start through Powertools Parameters (cached)
    SCALER_CONFIG_VERSION    a hash of the parameter's value: only there so that a changed config
                             changes the function configuration and a deploy rolls the functions
    SCALER_CONFIG            the scaler config document (JSON), validated by shared.config; read
                             only when no SCALER_CONFIG_PARAMETER is set (local runs, tests)
    SCALER_TABLE_NAME        DynamoDB state table
    SCALER_DRY_RUN           "true": log and return every action, change nothing (default false;
                             the config's own dry_run also turns it on)
    SCALER_TOPIC_ARN         SNS topic for notifications (overrides the config's)
    SCALER_SLACK_SECRET_ARN  Secrets Manager secret with a Slack webhook URL (overrides the config's)
    SCALER_KUBECONFIG        a kubeconfig file (local runs)
    SCALER_CLUSTER_ENDPOINT  the EKS API endpoint; with SCALER_CLUSTER_CA no eks:DescribeCluster call
    SCALER_CLUSTER_CA        its certificate authority (base64 PEM, as DescribeCluster returns it)
    SCALER_QUEUE_URL         the wake-up queue (read by functions that enqueue; optional here)

A missing or invalid variable is a ConfigError naming it (`environment: SCALER_TABLE_NAME: ...`);
a missing, unreadable or invalid parameter is one naming the parameter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from shared import constants
from shared.adapters.aws.fleet import AsgFleet
from shared.adapters.aws.notifier import notifier_from_config
from shared.adapters.aws.state_store import DynamoDbStateStore
from shared.adapters.kubernetes.cluster import cluster_from_config
from shared.config import (
    ScalerConfig,
    decode_stored_config,
    parse_config,
    parse_config_variable,
)
from shared.controller import Controller
from shared.domain.errors import ConfigError
from shared.formats.validation import format_validation_error
from shared.reporting import Reporter

SOURCE = "environment"
# The parameter changes only with a deploy, which rolls the functions (SCALER_CONFIG_VERSION) onto new
# execution environments; a warm one never needs to read it again.
CONFIG_PARAMETER_MAX_AGE_SECONDS = 24 * 3600


def _blank_is_none(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


def _config_from_json(value: object) -> object:
    return parse_config_variable(value, constants.ENV_CONFIG) if isinstance(value, str) else value


OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]
ConfigJson = Annotated[ScalerConfig, BeforeValidator(_config_from_json)]


class RuntimeSettings(BaseModel):
    """What the reconcile, force-scale-down and AWS-events functions read from their environment."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    config: ConfigJson = Field(validation_alias=constants.ENV_CONFIG)
    config_parameter: OptionalText = Field(default=None, validation_alias=constants.ENV_CONFIG_PARAMETER)
    config_version: OptionalText = Field(default=None, validation_alias=constants.ENV_CONFIG_VERSION)
    table_name: str = Field(validation_alias=constants.ENV_TABLE_NAME, min_length=1)
    dry_run: bool = Field(default=False, validation_alias=constants.ENV_DRY_RUN)
    topic_arn: OptionalText = Field(default=None, validation_alias=constants.ENV_TOPIC_ARN)
    slack_secret_arn: OptionalText = Field(default=None, validation_alias=constants.ENV_SLACK_SECRET_ARN)
    kubeconfig: OptionalText = Field(default=None, validation_alias=constants.ENV_KUBECONFIG)
    cluster_endpoint: OptionalText = Field(default=None, validation_alias=constants.ENV_CLUSTER_ENDPOINT)
    cluster_ca: OptionalText = Field(default=None, validation_alias=constants.ENV_CLUSTER_CA)
    queue_url: OptionalText = Field(default=None, validation_alias=constants.ENV_QUEUE_URL)
    function_name: str = Field(default="local", validation_alias="AWS_LAMBDA_FUNCTION_NAME")
    log_stream: str = Field(default="", validation_alias="AWS_LAMBDA_LOG_STREAM_NAME")

    def scaler_config(self) -> ScalerConfig:
        """The config with the environment's overrides (cluster access, notification targets)."""
        kubernetes = self.config.kubernetes.model_copy(
            update={
                key: value
                for key, value in (
                    ("kubeconfig", self.kubeconfig),
                    ("endpoint", self.cluster_endpoint),
                    ("certificate_authority", self.cluster_ca),
                )
                if value
            }
        )
        notifications = self.config.notifications.model_copy(
            update={
                key: value
                for key, value in (
                    ("sns_topic_arn", self.topic_arn),
                    ("slack_webhook_secret_arn", self.slack_secret_arn),
                )
                if value
            }
        )
        return self.config.model_copy(update={"kubernetes": kubernetes, "notifications": notifications})

    @property
    def owner(self) -> str:
        """Who takes the lease: this function instance (the controller adds a per-run suffix)."""
        return f"{self.function_name}:{self.log_stream}" if self.log_stream else self.function_name


def load_settings(environ: Mapping[str, str]) -> RuntimeSettings:
    """Parse the environment once; ConfigError naming each bad variable (or the config parameter)."""
    values: dict[str, object] = dict(environ)
    parameter = _blank_is_none(environ.get(constants.ENV_CONFIG_PARAMETER))
    if isinstance(parameter, str):
        values[constants.ENV_CONFIG] = read_config_parameter(parameter.strip())
    try:
        return RuntimeSettings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, SOURCE)) from exc


def read_config_parameter(name: str) -> ScalerConfig:
    """The scaler config stored in the SSM parameter `name` (cached by Powertools Parameters)."""
    from aws_lambda_powertools.utilities.parameters import get_parameter
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    source = f"SSM parameter {name}"
    try:
        value = get_parameter(name, max_age=CONFIG_PARAMETER_MAX_AGE_SECONDS)
    except GetParameterError as exc:
        raise ConfigError(f"{source}: cannot read it ({constants.ENV_CONFIG_PARAMETER}): {exc}") from exc
    if not isinstance(value, str):
        raise ConfigError(f"{source}: expected a String parameter")
    try:
        document = json.loads(decode_stored_config(value))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    return parse_config(document, source)


class SystemClock:
    """The Clock port on the system clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def build_controller(settings: RuntimeSettings, *, reporter: Reporter, **overrides: Any) -> Controller:
    """A Controller on the real adapters; `overrides` replace any of them (e.g. `cluster=`)."""
    config = settings.scaler_config()
    dependencies: dict[str, Any] = {
        "config": config,
        "clock": SystemClock(),
        "reporter": reporter,
        "owner": settings.owner,
        "dry_run": settings.dry_run,
    }
    dependencies.update(overrides)
    if "cluster" not in dependencies:
        dependencies["cluster"] = cluster_from_config(config)
    if "fleet" not in dependencies:
        dependencies["fleet"] = AsgFleet.from_config(config)
    if "state" not in dependencies:
        dependencies["state"] = DynamoDbStateStore(settings.table_name, config.cluster_name, config.policy)
    if "notifier" not in dependencies:
        dependencies["notifier"] = notifier_from_config(config.notifications)
    return Controller(**dependencies)
