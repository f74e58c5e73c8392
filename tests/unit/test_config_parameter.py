"""The scaler config read from SSM (moto) through Powertools Parameters, once per cold start."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters.base import DEFAULT_PROVIDERS
from aws_lambda_powertools.utilities.parameters.ssm import SSMProvider

from functions.common.dependencies import Dependencies
from functions.reconcile import handler as reconcile
from shared.config import (
    STORED_CONFIG_PLAIN_LIMIT_BYTES,
    ScalerConfig,
    decode_stored_config,
    encode_stored_config,
)
from shared.domain.errors import ConfigError
from shared.runtime import load_settings
from tests.builders import asg, pod
from tests.builders import config as make_config
from tests.fakes.aws import use_fake_credentials
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld

EVENTS = Path(__file__).resolve().parents[1] / "events"
REGION = "us-west-2"
PARAMETER = "/backlog-scaler/research/config"
GROUPS = 40


def forty_group_document() -> dict[str, Any]:
    """The builders' one-group config grown to a lab's 40 groups (JSON far beyond 4 KB)."""
    document = make_config().model_dump(mode="json", exclude={"deployment"})
    (group,) = document["node_groups"]
    document["node_groups"] = [
        {**group, "name": f"gpu-{i:02d}", "asg_name": f"research-gpu-{i:02d}", "priority": GROUPS - i}
        for i in range(GROUPS)
    ]
    return document


@dataclass
class Ssm:
    client: Any
    reads: list[str] = field(default_factory=list)  # names of every GetParameter call

    def put(self, value: str, name: str = PARAMETER) -> None:
        self.client.put_parameter(Name=name, Value=value, Type="String", Tier="Advanced", Overwrite=True)


@pytest.fixture
def ssm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ssm]:
    """moto's SSM behind Powertools' default SSM provider, with every GetParameter recorded."""
    use_fake_credentials(monkeypatch, REGION)
    parameters.clear_caches()
    with mock_aws():
        client = boto3.client("ssm", region_name=REGION)
        world = Ssm(client)
        client.meta.events.register(
            "provide-client-params.ssm.GetParameter", lambda params, **_: world.reads.append(params["Name"])
        )
        DEFAULT_PROVIDERS["ssm"] = SSMProvider(boto3_client=client)
        yield world
    parameters.clear_caches()


def environment(**changes: str) -> dict[str, str]:
    return {
        "SCALER_CONFIG_PARAMETER": PARAMETER,
        "SCALER_CONFIG_VERSION": "0af0ffb8f1368c7b",
        "SCALER_TABLE_NAME": "backlog-scaler-state",
        "AWS_LAMBDA_FUNCTION_NAME": "backlog-scaler-reconcile",
        **changes,
    }


def test_a_large_config_is_stored_compressed_and_read_back_unchanged() -> None:
    # Given a 40-group config, whose JSON outgrows SSM's 4 KB Standard tier
    document = json.dumps(forty_group_document())
    assert len(document) > 2 * STORED_CONFIG_PLAIN_LIMIT_BYTES
    # When encoded, Then it is compressed well within the 8 KB Advanced tier, and decodes to itself
    stored = encode_stored_config(document)
    assert len(stored) < STORED_CONFIG_PLAIN_LIMIT_BYTES and not stored.startswith("{")
    assert decode_stored_config(stored) == document
    assert encode_stored_config(document) == stored  # deterministic: the version changes only with it


def test_a_small_config_is_stored_as_readable_json() -> None:
    document = make_config().model_dump_json(exclude={"deployment"})
    assert encode_stored_config(document) == document == decode_stored_config(document)


def test_reconcile_reads_the_config_from_the_parameter_once(
    ssm: Ssm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the 40-group config in the parameter, and only its name in the function's environment
    ssm.put(encode_stored_config(json.dumps(forty_group_document())))
    for key, value in environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SCALER_CONFIG", raising=False)
    fleet = FakeFleet([asg(f"research-gpu-{i:02d}", desired=0) for i in range(GROUPS)])
    configs: list[ScalerConfig] = []

    def cold_start() -> Any:
        """What controller_from_environment does, on fakes for the cluster, fleet and state."""
        config = load_settings(os.environ).scaler_config()
        configs.append(config)
        return FakeWorld(config=config, cluster=FakeCluster([pod("train", gpus=8)]), fleet=fleet).controller()

    monkeypatch.setattr(reconcile, "dependencies", Dependencies(cold_start))
    schedule = json.loads((EVENTS / "schedule.json").read_text())

    # When reconcile is invoked twice
    first = reconcile.handler(schedule, FakeLambdaContext())
    second = reconcile.handler(schedule, FakeLambdaContext())

    # Then it ran on the 40 groups of the parameter, read with one GetParameter for both invocations
    assert first["ok"] and second["ok"]
    assert [len(c.node_groups) for c in configs] == [GROUPS]
    assert ssm.reads == [PARAMETER]
    assert fleet.desired("research-gpu-00") == 1  # the highest-priority group got the pod

    # And a rebuilt controller (as after an override) is served from Powertools' cache (max_age)
    reconcile.dependencies.override(None)
    reconcile.handler(schedule, FakeLambdaContext())
    assert len(configs) == 2 and ssm.reads == [PARAMETER]


def test_the_parameter_wins_over_a_config_in_the_environment(ssm: Ssm) -> None:
    ssm.put(json.dumps(forty_group_document()))
    inline = make_config().model_dump_json(exclude={"deployment"})
    settings = load_settings(environment(SCALER_CONFIG=inline))
    assert len(settings.config.node_groups) == GROUPS
    assert settings.config_parameter == PARAMETER and settings.config_version == "0af0ffb8f1368c7b"


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        (None, f"SSM parameter {PARAMETER}: cannot read it (SCALER_CONFIG_PARAMETER)"),
        ("not base64 at all!", f"SSM parameter {PARAMETER}: neither a JSON document nor gzip"),
        ('{"cluster_name": "research"', f"SSM parameter {PARAMETER}: not valid JSON"),
        ('{"cluster_name": "research"}', f"SSM parameter {PARAMETER}: node_groups: Field required"),
    ],
)
def test_a_missing_or_bad_parameter_is_a_config_error_naming_it(
    ssm: Ssm, stored: str | None, message: str
) -> None:
    if stored is not None:
        ssm.put(stored)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(environment())
