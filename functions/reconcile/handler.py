"""Reconcile Lambda: one level-triggered reconcile per invocation (see triggers.py for the events).

SQS batches: every record is validated through Powertools' BatchProcessor (a malformed one is a
partial failure: retried, then parked in the dead-letter queue) and one reconcile answers them all.
If that reconcile fails (a read failed, nothing was changed), every record goes back to the queue.
Schedule and direct invokes return the reconcile's result; a failed reconcile raises.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch import BatchProcessor
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.collector import gc_paused

with gc_paused():  # a cold start's objects are all long-lived: see shared/collector.py
    from functions.common.dependencies import Dependencies
    from functions.common.powertools import CORRELATION_ID_PATH, logger, tracer
    from functions.common.wiring import controller_from_environment
    from functions.reconcile.triggers import SQS, all_failed, trigger_of, validate_wake_up
    from shared.controller import Controller
    from shared.domain.errors import ScalerError

dependencies: Dependencies[Controller] = Dependencies(controller_from_environment)
set_dependencies = dependencies.override


@cache
def processor() -> BatchProcessor:
    """The SQS batch processor, loaded on the first SQS batch: scheduled runs never need it."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    validate_wake_up(record.body, dependencies.get().config.cluster_name)


@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    trigger = trigger_of(event)
    controller = dependencies.get()
    if trigger != SQS:
        return controller.reconcile(trigger).to_json()
    from aws_lambda_powertools.utilities.batch import process_partial_response

    response = process_partial_response(event, record_handler, processor(), context)
    if len(response["batchItemFailures"]) == len(event["Records"]):
        return dict(response)  # nothing valid asked for a reconcile
    try:
        controller.reconcile(SQS)
    except ScalerError:
        logger.exception("reconcile failed: the whole batch goes back to the queue")
        return all_failed(event)
    return dict(response)
