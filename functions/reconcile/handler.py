"""Reconcile Lambda: one level-triggered reconcile per invocation (see triggers.py for the events).

SQS batches come from a FIFO queue (one message group per cluster), so they go through Powertools'
SqsFifoPartialProcessor: it stops at the first record that fails and hands that record and every
later one back to the queue, which keeps the group's order. A message that is not a wake-up for this
cluster is acknowledged with an error log line and the DiscardedWakeUps metric (triggers.discard says
why it is not retried). One reconcile answers the valid wake-ups; if it fails (a read failed, nothing
was changed), they and every later record go back to the queue.
Schedule and direct invokes return the reconcile's result; a failed reconcile raises.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.collector import gc_paused

with gc_paused(keep=True):  # a cold start's objects are all long-lived: see shared/collector.py
    from functions.common.dependencies import Dependencies
    from functions.common.powertools import CORRELATION_ID_PATH, logger, tracer
    from functions.common.wiring import controller_from_environment
    from functions.reconcile.triggers import SQS, discard, failed_from, trigger_of, validate_wake_up
    from shared.controller import Controller
    from shared.domain.errors import InputError, ScalerError

dependencies: Dependencies[Controller] = Dependencies(controller_from_environment)
set_dependencies = dependencies.override


@cache
def processor() -> SqsFifoPartialProcessor:
    """The SQS FIFO batch processor, loaded on the first SQS batch: scheduled runs never need it."""
    from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor

    fifo = SqsFifoPartialProcessor()
    # A batch whose every record failed is answered with all of them in batchItemFailures, not raised
    # (a function error): the constructor does not take the option in Powertools 3.37
    # (aws-powertools/powertools-lambda-python#7596), the attribute is what BatchProcessor reads.
    fifo.raise_on_entire_batch_failure = False
    return fifo


def record_handler(record: SQSRecord) -> bool:
    """True for a wake-up of this cluster; False for a message acknowledged as invalid (discarded)."""
    controller = dependencies.get()
    try:
        validate_wake_up(record.body, controller.config.cluster_name)
    except InputError as exc:
        discard(controller.deps.reporter, record.message_id, record.body, exc)
        return False
    return True


@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    trigger = trigger_of(event)
    controller = dependencies.get()
    if trigger != SQS:
        return controller.reconcile(trigger).to_json()
    batch = processor()
    with batch(event["Records"], record_handler, context):
        outcomes = batch.process()
    controller.deps.reporter.flush()  # the discarded messages' metric, whether a reconcile runs or not
    valid = [i for i, (status, woke, _) in enumerate(outcomes) if status == "success" and woke]
    if not valid:
        return dict(batch.response())  # nothing valid asked for a reconcile
    try:
        controller.reconcile(SQS)
    except ScalerError:
        logger.exception("reconcile failed: its wake-ups and every later message go back to the queue")
        return failed_from(event, valid[0])
    return dict(batch.response())
