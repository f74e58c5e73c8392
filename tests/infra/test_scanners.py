"""checkov (CloudFormation checks) and parliament (IAM policy lint) on the synthesized template.

Every finding is fixed or acknowledged, with a reason, in tests/infra/scanner_acknowledgements.py; a
new one fails here. checkov pins its own boto3 (==1.35.x) against ours (~=1.44), so it runs as a CLI
from a virtualenv of its own (README, Dependencies): `$CHECKOV`, `.venv/checkov/bin/checkov` or PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import parliament
import pytest

from tests.infra import scanner_acknowledgements as acknowledged
from tests.infra.conftest import Synthesized

REPO = Path(__file__).resolve().parents[2]
ACCOUNT, PARTITION = "123456789012", "aws"
CHECKOV_INSTALL = "python -m venv .venv/checkov && .venv/checkov/bin/pip install checkov==3.3.30"


def _checkov() -> str | None:
    candidates = [os.environ.get("CHECKOV"), str(REPO / ".venv" / "checkov" / "bin" / "checkov")]
    found = next((c for c in candidates if c and Path(c).is_file()), None)
    return found or shutil.which("checkov")


@pytest.fixture(scope="module")
def checkov_failures(
    synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[set[str]]:
    """(check id, resource) of every failed checkov check, one run per session (~5 s)."""
    executable = _checkov()
    if executable is None:
        pytest.fail(f"checkov not installed (`make test` installs it): {CHECKOV_INSTALL}")
    template = tmp_path_factory.mktemp("scanners") / "template.json"
    template.write_text(json.dumps(synthesized.template_json), encoding="utf-8")
    run = subprocess.run(
        [
            executable,
            "-f",
            str(template),
            "--framework",
            "cloudformation",
            "-o",
            "json",
            "--quiet",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},  # no call home for guideline links
        check=False,
    )
    assert run.returncode in (0, 1), f"checkov failed to run: {run.stderr[-2000:]}"
    report = json.loads(run.stdout)
    reports = report if isinstance(report, list) else [report]
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports), run.stdout[-2000:]
    yield {f"{c['check_id']} {c['resource']}" for r in reports for c in r["results"]["failed_checks"]}


def test_checkov_finds_nothing_unacknowledged(checkov_failures: set[str]) -> None:
    new = sorted(f for f in checkov_failures if f.split()[0] not in acknowledged.CHECKOV)
    assert not new, "checkov findings to fix or acknowledge in scanner_acknowledgements.py:\n" + "\n".join(
        new
    )


def test_every_checkov_acknowledgement_is_still_needed(checkov_failures: set[str]) -> None:
    stale = set(acknowledged.CHECKOV) - {f.split()[0] for f in checkov_failures}
    assert not stale, f"acknowledged checks that no longer fail (remove them): {sorted(stale)}"


def _arn(resource_type: str, logical_id: str, region: str) -> str:
    """A realistic ARN for a resource of the template, so parliament can match it to the actions."""
    name = logical_id.lower()
    by_type = {
        "AWS::DynamoDB::Table": f"dynamodb:{region}:{ACCOUNT}:table/{name}",
        "AWS::KMS::Key": f"kms:{region}:{ACCOUNT}:key/{name}",
        "AWS::Logs::LogGroup": f"logs:{region}:{ACCOUNT}:log-group:{name}:*",
        "AWS::SQS::Queue": f"sqs:{region}:{ACCOUNT}:{name}",
        "AWS::SNS::Topic": f"sns:{region}:{ACCOUNT}:{name}",
        "AWS::SecretsManager::Secret": f"secretsmanager:{region}:{ACCOUNT}:secret:{name}-AbCdEf",
    }
    return f"arn:{PARTITION}:{by_type[resource_type]}"


def _resolve(value: Any, resources: dict[str, Any], region: str) -> Any:
    """The document with CloudFormation's intrinsic functions replaced by plausible values."""
    if isinstance(value, list):
        return [_resolve(v, resources, region) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        pseudo = {"AWS::Partition": PARTITION, "AWS::AccountId": ACCOUNT, "AWS::Region": region}
        ref = value["Ref"]
        return pseudo.get(ref) or _arn(resources[ref]["Type"], ref, region)
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn", value
        return _arn(resources[logical_id]["Type"], logical_id, region)
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_resolve(p, resources, region) for p in parts)
    return {k: _resolve(v, resources, region) for k, v in value.items()}


def _policy_documents(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """Every policy document of the template: the roles' policies and the queue, topic and key policies."""
    resources = synthesized.template_json["Resources"]
    region = synthesized.config.region
    documents = {}
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        for key in ("PolicyDocument", "KeyPolicy"):
            if key in props:
                documents[f"{logical_id} ({resource['Type']})"] = _resolve(props[key], resources, region)
    return documents


def test_parliament_finds_nothing_unacknowledged(synthesized: Synthesized) -> None:
    policies = _policy_documents(synthesized)
    assert len(policies) >= 4  # the scan ran on every kind
    found, used = [], set()
    for name, document in sorted(policies.items()):
        resource_type = name.rsplit("(", 1)[1].rstrip(")")
        for finding in parliament.analyze_policy_string(json.dumps(document)).findings:
            key = f"{finding.issue}@{resource_type}"
            if key in acknowledged.PARLIAMENT:
                used.add(key)
            else:
                found.append(f"{name}: {finding.issue} {finding.detail}")
    assert set(acknowledged.PARLIAMENT) <= used, "acknowledged parliament issues that no longer occur"
    assert not found, "parliament findings to fix or acknowledge:\n" + "\n".join(found)
