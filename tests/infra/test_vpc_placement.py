"""Functions placed in the configured VPC (imported by id: no lookups at synth time)."""

from __future__ import annotations

from shared.constants import ALL_FUNCTIONS, ENV_SLACK_SECRET_ARN, FUNCTION_RECONCILE, FUNCTION_WEBHOOK
from tests.infra.conftest import VPC_DEPLOYMENT, Synthesized


def test_functions_run_in_the_configured_subnets_and_groups(vpc_synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        assert vpc_synthesized.function(name)["VpcConfig"] == {
            "SubnetIds": VPC_DEPLOYMENT["subnet_ids"],
            "SecurityGroupIds": VPC_DEPLOYMENT["security_group_ids"],
        }
    vpc_synthesized.template.resource_count_is("AWS::EC2::SecurityGroup", 0)


def test_roles_may_manage_their_network_interfaces(vpc_synthesized: Synthesized) -> None:
    (policy,) = [
        p["Properties"]
        for p in vpc_synthesized.resources("AWS::IAM::Policy").values()
        if any(
            "ec2:CreateNetworkInterface" in s["Action"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    assert len(policy["Roles"]) == 4


def test_runtime_architecture_and_access_entries_follow_the_config(vpc_synthesized: Synthesized) -> None:
    for name in ALL_FUNCTIONS:
        assert vpc_synthesized.function(name)["Runtime"] == "python3.13"
        assert vpc_synthesized.function(name)["Architectures"] == ["x86_64"]
    vpc_synthesized.template.resource_count_is("AWS::EKS::AccessEntry", 0)


def test_slack_secret_is_readable_by_the_notifying_functions_only(vpc_synthesized: Synthesized) -> None:
    arn = vpc_synthesized.config.notifications.slack_webhook_secret_arn
    assert (
        vpc_synthesized.function(FUNCTION_RECONCILE)["Environment"]["Variables"][ENV_SLACK_SECRET_ARN] == arn
    )
    assert ENV_SLACK_SECRET_ARN not in vpc_synthesized.function(FUNCTION_WEBHOOK)["Environment"]["Variables"]


def test_no_lookups_were_needed(vpc_synthesized: Synthesized) -> None:
    assert not (vpc_synthesized.assembly_dir.parent / "cdk.context.json").exists()
    manifest = (vpc_synthesized.assembly_dir / "manifest.json").read_text()
    assert "missing" not in manifest
