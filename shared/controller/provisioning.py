"""ProvisioningRequests on the apply side: the plan's answers written through the applier.

Runs after desired capacity is set: a best-effort-atomic request is Provisioned once its scale-up
was asked for (cluster-autoscaler's besteffortatomic answers after the scale-up request), so an
answer whose group could not be grown this run is not written (the next run answers again). The
plan holds only updates that change something, so a repeated run writes nothing.
"""

from __future__ import annotations

from collections.abc import Set

from shared.controller.applier import Applier
from shared.domain.plan import Plan
from shared.domain.provisioning import RequestOutcome
from shared.reporting import ActionKind, ActionStatus


def answer_requests(applier: Applier, plan: Plan, failed_groups: Set[str]) -> None:
    """Write each changed request's conditions, but no Provisioned=True over a failed scale-up."""
    answers = {a.request: a for a in plan.provisioning_requests}
    for update in plan.provisioning_updates:
        answer = answers.get(update.key)
        group = answer.group if answer and answer.group else ""
        reason = f"{update.summary}: {answer.reason}" if answer else update.summary
        if answer and answer.outcome is RequestOutcome.PROVISIONED and group in failed_groups:
            detail = f"the scale-up of {group} failed: the request is answered again next run"
            applier.note(ActionKind.ANSWER_REQUEST, update.key, group, reason, ActionStatus.SKIPPED, detail)
            continue
        applier.answer_request(update, group, reason)
