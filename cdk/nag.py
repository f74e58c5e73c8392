"""cdk-nag (AwsSolutions) wiring: the checks run on every synth; acknowledgements carry a reason."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

NAG_PACK_PREFIX = "AwsSolutions-"


def add_nag_checks(app: cdk.App) -> None:
    """Run the AwsSolutions pack during synthesis; an unacknowledged error fails the synth.

    Acknowledgements are also written into the template Metadata (`cdk_nag.rules_to_suppress`) so the
    reasons travel with the deployed stack.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (e.g. `AwsSolutions-IAM5[Resource::*]`) on a construct subtree."""
    if not rule.startswith(NAG_PACK_PREFIX):
        rule = f"{NAG_PACK_PREFIX}{rule}"
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))
