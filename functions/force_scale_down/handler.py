"""Force-scale-down Lambda, invoked by hand:

    aws lambda invoke --function-name <fn> --cli-binary-format raw-in-base64-out \
        --payload '{"group": "a100", "target": 0, "grace_seconds": 600}' out.json

Payload: `group` and exactly one of `target` (node count) or `nodes` (node names); optional `dry_run`,
`grace_seconds` (default 300), `force` (delete pods PDBs still protect once the grace is over),
`requested_by`; strict JSON types, bounded sizes, no unknown fields (shared.controller.force_scale_down).
The response is the report (`"ok": true`, chosen/refused nodes, actions, what is still draining; a
target that removes nothing says "nothing to do" under `refused`; a write that failed on one node or
pod is in `failed`, with `"ok": false`). Mistakes and operational
refusals are answered, not raised, so the operator reads them in out.json: `{"ok": false, "error":
"...", "field": "target", "fields": [...], "retryable": false}`. Only bugs raise (a FunctionError).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.collector import gc_paused

with gc_paused(keep=True):  # a cold start's objects are all long-lived: see shared/collector.py
    from functions.common.dependencies import Dependencies
    from functions.common.powertools import CORRELATION_ID_PATH, logger, tracer
    from functions.common.wiring import controller_from_environment
    from shared.controller import Controller, InvalidRequestError
    from shared.domain.errors import LeaseHeldError, ReadError, ScalerError, ThrottledError

if TYPE_CHECKING:  # typing only: the module costs import time at every cold start
    from aws_lambda_powertools.utilities.typing import LambdaContext

dependencies: Dependencies[Controller] = Dependencies(controller_from_environment)
set_dependencies = dependencies.override


def error_response(exc: ScalerError) -> dict[str, Any]:
    fields = list(exc.fields) if isinstance(exc, InvalidRequestError) else []
    retryable = isinstance(exc, LeaseHeldError | ReadError | ThrottledError)
    return {
        "ok": False,
        "error": str(exc),
        "error_type": type(exc).__name__,
        "field": fields[0] if fields else None,
        "fields": fields,
        "retryable": retryable,
    }


@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        report = dependencies.get().force_scale_down(event)
    except ScalerError as exc:
        response = error_response(exc)  # bounded: errors echo at most a preview of a bad value
        logger.warning(
            "forced scale-down refused",
            extra={
                "error": response["error"],
                "error_type": response["error_type"],
                "fields": response["fields"],
            },
        )
        return response
    return report.to_json()
