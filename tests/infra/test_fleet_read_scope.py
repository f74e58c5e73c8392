"""The fleet read statement: only the describe calls the planner needs, only in the groups' regions."""

from __future__ import annotations

from tests.infra.conftest import Synthesized

CAPACITY_READS = {"ec2:DescribeSubnets", "ec2:DescribeCapacityReservations"}


def test_capacity_reads_are_granted_only_in_the_regions_of_the_groups(synthesized: Synthesized) -> None:
    # Given the synthesized stack
    reads = [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "ReadFleet"
    ]
    # Then the read statement grants the zone and reservation reads, Resource "*" (they allow no
    # resource scoping), limited to the configured regions
    assert reads
    config = synthesized.config
    regions = sorted({config.region, *(config.region_of(g) for g in config.node_groups)})
    for statement in reads:
        assert set(statement["Action"]) >= CAPACITY_READS
        assert statement["Resource"] == "*"
        assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": regions}}


def test_lifecycle_reads_are_granted_in_the_same_read_only_region_scoped_statement(
    synthesized: Synthesized,
) -> None:
    # Given the synthesized stack
    reads = [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "ReadFleet"
    ]
    # Then the status checks and launch template reads of repair and rotation are there, and nothing
    # that writes EC2 is
    lifecycle = {"ec2:DescribeInstanceStatus", "ec2:DescribeLaunchTemplates"}
    assert reads
    for statement in reads:
        assert set(statement["Action"]) >= lifecycle
        assert all(":Describe" in action for action in statement["Action"])
