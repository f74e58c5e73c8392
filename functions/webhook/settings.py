"""The webhook's Lambda environment: one pydantic model, parsed once at cold start.

    SCALER_QUEUE_URL           URL of the SQS FIFO queue of reconcile triggers (ends in .fifo)
    SCALER_WEBHOOK_SECRET_ARN  Secrets Manager secret holding the shared webhook secret
    SCALER_CLUSTER_NAME        the cluster's name (the message group of the queue); the deployed
                               webhook gets only this, never the config
    SCALER_CONFIG              local runs and tests: the scaler config (JSON), read for its
                               cluster_name when SCALER_CLUSTER_NAME is absent

A missing or invalid variable is a ConfigError naming it, raised at import (cold start).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.constants import ENV_CLUSTER_NAME, ENV_CONFIG, ENV_QUEUE_URL, ENV_WEBHOOK_SECRET_ARN
from shared.domain.errors import ConfigError
from shared.formats.validation import format_validation_error

SOURCE = "webhook environment"
CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")  # ScalerConfig.cluster_name


class WebhookSettings(BaseModel):
    """What the webhook needs from its environment, and nothing else."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    queue_url: str = Field(validation_alias=ENV_QUEUE_URL)
    secret_arn: str = Field(validation_alias=ENV_WEBHOOK_SECRET_ARN, min_length=1)
    # The deployed webhook has the name alone; local runs and tests may pass the config instead.
    cluster_name: str = Field(validation_alias=AliasChoices(ENV_CLUSTER_NAME, ENV_CONFIG))

    @field_validator("queue_url")
    @classmethod
    def _fifo_queue(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("https://", "http://")) or not value.endswith(".fifo"):
            raise ValueError("must be the URL of an SQS FIFO queue (https://..., ending in .fifo)")
        return value

    @field_validator("secret_arn")
    @classmethod
    def _strip(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the webhook secret (its ARN)")
        return value.strip()

    @field_validator("cluster_name", mode="before")
    @classmethod
    def _cluster_of_config(cls, value: object) -> str:
        if not isinstance(value, str):
            return value  # type: ignore[return-value]  # pydantic reports the type error
        if not value.lstrip().startswith("{"):
            # SCALER_CLUSTER_NAME: held to the config's own rule for cluster names.
            if not CLUSTER_NAME.fullmatch(value):
                raise ValueError(f"not a cluster name: {value[:100]!r}")
            return value
        # Local runs and tests only (the deployed webhook has the name): the config's models load here.
        from shared.config import parse_config_variable

        return parse_config_variable(value, ENV_CONFIG).cluster_name  # the one parser of the config


def load_settings(environ: Mapping[str, str]) -> WebhookSettings:
    """The settings in `environ`; ConfigError naming every missing or invalid variable."""
    try:
        return WebhookSettings.model_validate(dict(environ))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, SOURCE)) from exc
