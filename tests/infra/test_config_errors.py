"""A bad config fails the synth with the model's field-named message, before any resource exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk.app import build_app
from cdk.context import CONFIG_SOURCE, cdk_json_context, stack_name
from shared.config import parse_config
from shared.domain.errors import ConfigError
from tests.infra.conftest import NO_BUNDLING, default_scaler_context

REPO_ROOT = Path(__file__).resolve().parents[2]


def _build(scaler: object, tmp_path: Path) -> None:
    build_app({**NO_BUNDLING, "scaler": scaler}, outdir=str(tmp_path))


def test_bad_field_is_named_in_the_error(tmp_path: Path) -> None:
    # Given a taint with an invalid effect
    scaler = default_scaler_context()
    scaler["node_groups"][1]["taints"][0]["effect"] = "Sometimes"
    # When the app is built, Then the error names the source and the field path
    with pytest.raises(ConfigError) as raised:
        _build(scaler, tmp_path)
    assert str(raised.value).startswith(f"{CONFIG_SOURCE}: node_groups[1].taints[0].effect:")


def test_unknown_deployment_setting_is_rejected(tmp_path: Path) -> None:
    scaler = default_scaler_context()
    scaler["deployment"] = {"architecture": "sparc"}
    with pytest.raises(ConfigError, match=r"deployment\.architecture"):
        _build(scaler, tmp_path)


@pytest.mark.parametrize(
    ("deployment", "field"),
    [
        ({"log_retention_days": 10}, "deployment.log_retention_days"),
        ({"vpc_id": "vpc-1"}, "deployment.subnet_ids"),
        ({"subnet_ids": ["subnet-1"]}, "deployment.vpc_id"),
    ],
)
def test_deployment_settings_the_cdk_app_cannot_use_are_rejected(
    deployment: dict, field: str, tmp_path: Path
) -> None:
    scaler = default_scaler_context()
    scaler["deployment"] = deployment
    with pytest.raises(ConfigError, match=rf"^{CONFIG_SOURCE}: {field}:"):
        _build(scaler, tmp_path)


def test_config_given_as_a_json_string_is_accepted() -> None:
    # `cdk synth -c scaler='{...}'` passes the context value as a string
    from cdk.context import scaler_config

    class Node:
        def try_get_context(self, key: str) -> str:
            return json.dumps(default_scaler_context())

    class Scope:
        node = Node()

    assert scaler_config(Scope()).cluster_name == "research"  # type: ignore[arg-type]


def test_synth_exits_non_zero_with_the_message(tmp_path: Path) -> None:
    # Given the CLI's way of passing context (CDK_CONTEXT_JSON) with a config missing its groups
    scaler = default_scaler_context()
    scaler["node_groups"] = []
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"scaler": scaler}), "CDK_OUTDIR": str(tmp_path)}
    # When the app runs as `cdk synth` runs it
    result = subprocess.run(
        [sys.executable, "cdk/app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    # Then it fails with the model's message and no traceback
    assert result.returncode == 1
    assert f"{CONFIG_SOURCE}: node_groups:" in result.stderr
    assert "Traceback" not in result.stderr


def test_cdk_json_embeds_the_example_config() -> None:
    yaml = pytest.importorskip("yaml")
    example = yaml.safe_load((REPO_ROOT / "examples" / "config.yaml").read_text())
    assert cdk_json_context()["scaler"] == example
    assert stack_name(parse_config(example)) == "BacklogScaler-research"


def test_cdk_json_runs_the_app_with_the_project_python() -> None:
    document = json.loads((REPO_ROOT / "cdk.json").read_text())
    assert "cdk/app.py" in document["app"]
    assert ".venv/bin/python" in document["app"]


def test_synth_without_the_cdk_extra_says_what_to_install() -> None:
    # Given a Python without the cdk extra (-S: no site-packages, so no aws_cdk, constructs, cdk_nag)
    # When cdk.json's app command runs the app
    result = subprocess.run(
        [sys.executable, "-S", "cdk/app.py"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    # Then it fails with one line naming the extra, not an ImportError's traceback
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "needs the cdk extra" in result.stderr and "pip install -e '.[cdk]'" in result.stderr
    assert "missing: aws_cdk" in result.stderr
