"""AWS-events Lambda: EventBridge events about the cluster's groups and instances (see events.py).

A failed launch backs its group off at once (the same run then spills the backlog to other groups);
a spot interruption warning cordons the instance's node; a rebalance recommendation just reconciles.
Events about other groups or instances are ignored, and so are shapes this function does not handle
(one info line). A handled event with fields of the wrong type or size is refused: one warning line
names them, nothing is done, and the error is raised, so that after Lambda's retries the event lands
in the on-failure queue (whose alarm tells an operator) rather than being dropped. Failures of the
controller raise too: Lambda retries them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.collector import gc_paused

with gc_paused(keep=True):  # a cold start's objects are all long-lived: see shared/collector.py
    from functions.aws_events.events import (
        LaunchUnsuccessful,
        MalformedEventError,
        RebalanceRecommendation,
        ReservationInterruption,
        SpotInterruption,
        UnsupportedEventError,
        parse_aws_event,
    )
    from functions.common.dependencies import Dependencies
    from functions.common.powertools import CORRELATION_ID_PATH, logger, tracer
    from functions.common.wiring import controller_from_environment
    from shared.adapters.aws.fleet import classify_failure
    from shared.controller import Controller, InterruptionKind

if TYPE_CHECKING:  # typing only: the module costs import time at every cold start
    from aws_lambda_powertools.utilities.typing import LambdaContext

dependencies: Dependencies[Controller] = Dependencies(controller_from_environment)
# Which interruption each instance event is: a spot or reservation warning holds the node and buys
# ahead, a rebalance recommendation marks it for rotation.
_KINDS = {
    SpotInterruption: InterruptionKind.SPOT_INTERRUPTION,
    ReservationInterruption: InterruptionKind.RESERVATION_INTERRUPTION,
    RebalanceRecommendation: InterruptionKind.REBALANCE_RECOMMENDATION,
}
set_dependencies = dependencies.override


@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        parsed = parse_aws_event(event)
    except UnsupportedEventError as exc:
        logger.info("event ignored", extra={"detail": str(exc)})
        return {"ok": True, "status": "ignored", "detail": str(exc)}
    except MalformedEventError as exc:
        logger.warning("malformed event refused", extra={"error": str(exc), "fields": list(exc.fields)})
        raise  # kept: the on-failure queue holds it (and the error) for an operator
    controller = dependencies.get()
    if isinstance(parsed, LaunchUnsuccessful):
        detail = parsed.detail
        kind = classify_failure(detail.status_message, detail.cause)
        result = controller.handle_capacity_event(
            detail.asg_name, parsed.failed_at, kind, detail.status_message, parsed.region
        )
    else:
        result = controller.handle_interruption(parsed.detail.instance_id, parsed.time, _KINDS[type(parsed)])
    return result.to_json()
