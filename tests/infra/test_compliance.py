"""cdk-nag (AwsSolutions) and cfn-lint accept the synthesized template."""

from __future__ import annotations

import json
from pathlib import Path

from cfnlint.api import ManualArgs, lint_file

from tests.infra.conftest import Synthesized

CFN_LINT_IGNORED = ["W3005"]  # CDK adds explicit DependsOn next to GetAtt (role -> function); harmless


def test_cdk_nag_has_no_unacknowledged_findings(synthesized: Synthesized) -> None:
    assert synthesized.nag_findings == ()


def test_cdk_nag_has_no_unacknowledged_findings_with_vpc_placement(vpc_synthesized: Synthesized) -> None:
    assert vpc_synthesized.nag_findings == ()


def test_every_acknowledgement_has_a_reason(synthesized: Synthesized) -> None:
    acknowledged = []
    for resource in synthesized.template_json["Resources"].values():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            acknowledged.append(rule["id"])
            assert len(rule["reason"]) > 40, rule
    assert {rule.split("[")[0] for rule in acknowledged} == {
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
        "AwsSolutions-SMG4",
        "AwsSolutions-APIG4",
        "AwsSolutions-SQS3",  # the failed-invocations queue is itself a dead-letter queue
    }


def test_validation_report_has_no_errors(synthesized: Synthesized) -> None:
    report_path = synthesized.assembly_dir / "validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"pluginReports": []}
    errors = [
        v
        for plugin in report["pluginReports"]
        for v in plugin.get("violations", [])
        if v.get("severity") in ("error", "fatal")
    ]
    assert errors == []


def _lint(template_path: Path) -> list[str]:
    matches = lint_file(
        template_path, config=ManualArgs(ignore_checks=CFN_LINT_IGNORED, regions=["us-west-2"])
    )
    return [f"{m.rule.id} {m.message} ({m.path})" for m in matches]


def test_cfn_lint_is_clean(synthesized: Synthesized) -> None:
    assert _lint(synthesized.assembly_dir / f"{synthesized.stack_name}.template.json") == []


def test_cfn_lint_is_clean_with_vpc_placement(vpc_synthesized: Synthesized) -> None:
    assert _lint(vpc_synthesized.assembly_dir / f"{vpc_synthesized.stack_name}.template.json") == []
