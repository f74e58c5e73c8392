"""One synthesized template per test session (CDK synth in-process; bundling skipped).

The first synth starts the jsii Node.js runtime (~2 s) and synthesizes (~4 s); every test of the
default stack shares it. Variant configs (VPC placement) get one more synth of their own.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_VERSION_CHECK", "1")

from aws_cdk import assertions
from cdk_nag import AwsSolutionsChecks

from cdk.app import build_app, synth
from cdk.context import cdk_json_context
from shared.config import ScalerConfig

# Tests never run pip or Docker: no stack is bundled (assets point at their source directories).
NO_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}


@dataclass(frozen=True)
class Synthesized:
    config: ScalerConfig
    stack_name: str
    template: assertions.Template
    template_json: dict[str, Any]
    assembly_dir: Path
    nag_findings: tuple[str, ...]  # unacknowledged AwsSolutions findings of any severity

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.template_json["Resources"].items()
            if resource["Type"] == resource_type
        }

    def function(self, name: str) -> dict[str, Any]:
        """Properties of the function whose handler is functions/<name>/handler.py:handler."""
        handler = f"functions.{name}.handler.handler"
        (found,) = [
            r["Properties"]
            for r in self.resources("AWS::Lambda::Function").values()
            if r["Properties"]["Handler"] == handler
        ]
        return found

    def function_logical_id(self, name: str) -> str:
        handler = f"functions.{name}.handler.handler"
        (found,) = [
            logical_id
            for logical_id, r in self.resources("AWS::Lambda::Function").items()
            if r["Properties"]["Handler"] == handler
        ]
        return found


def default_scaler_context() -> dict[str, Any]:
    """The `scaler` document embedded in cdk.json (a deep copy to vary in a test)."""
    return copy.deepcopy(cdk_json_context()["scaler"])


def synthesize(outdir: Path, scaler: Mapping[str, Any] | None = None) -> Synthesized:
    context: dict[str, Any] = dict(NO_BUNDLING)
    if scaler is not None:
        context["scaler"] = dict(scaler)
    # CDK's built-in template validation costs seconds per synth; cfn-lint covers it (test_compliance).
    app, stack = build_app(context, outdir=str(outdir), builtin_validation=False)
    assembly = synth(app, stack)  # raises if cdk-nag finds an unacknowledged error
    report = AwsSolutionsChecks().validate_scope(app)
    findings = tuple(
        f"{violation.rule_name} ({violation.severity}): "
        + ", ".join(r.construct_path or "?" for r in violation.violating_resources)
        for violation in report.violations
    )
    artifact = assembly.get_stack_by_name(stack.stack_name)
    template_json = json.loads(Path(artifact.template_full_path).read_text(encoding="utf-8"))
    return Synthesized(
        config=stack.config,
        stack_name=stack.stack_name,
        template=assertions.Template.from_json(template_json),
        template_json=template_json,
        assembly_dir=Path(assembly.directory),
        nag_findings=findings,
    )


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """The stack of the config in cdk.json, synthesized once per session."""
    yield synthesize(tmp_path_factory.mktemp("cdk-default"))


VPC_DEPLOYMENT = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
    "security_group_ids": ["sg-0ccccccccccccccc3"],
    "python_runtime": "python3.13",
    "architecture": "x86_64",
    "tracing": True,
    "eks_access_entry": False,
}


@pytest.fixture(scope="session")
def vpc_synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """A variant: functions in a VPC, Python 3.13 on x86_64, a Slack secret, no access entries."""
    scaler = default_scaler_context()
    scaler["deployment"] = dict(VPC_DEPLOYMENT)
    scaler["notifications"] = {
        "slack_webhook_secret_arn": "arn:aws:secretsmanager:us-west-2:111122223333:secret:slack-AbCdEf"
    }
    yield synthesize(tmp_path_factory.mktemp("cdk-vpc"), scaler)
