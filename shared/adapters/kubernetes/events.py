"""`EventRecorder`: core/v1 Events on the objects the scaler acts on, best effort.

Events of cluster-scoped objects (nodes) go to the `default` namespace, as kubectl and the kubelet put
them; names are the target's, cut to fit, plus a random suffix.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime

from shared import constants
from shared.adapters.kubernetes.calls import ApiCaller, api_path, body_of
from shared.domain.errors import AuthError, ClusterActionError, ScalerError, ThrottledError
from shared.domain.operations import ClusterEvent
from shared.formats.kubernetes import rfc3339

logger = logging.getLogger(__name__)

NODE_EVENT_NAMESPACE = "default"  # where kubectl and the kubelet put the events of cluster-scoped objects
_MAX_EVENT_NAME = 253 - 17  # a DNS subdomain, minus the ".<16 hex>" suffix


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: max(0, limit - 3)].decode("utf-8", errors="ignore") + "..."


class EventRecorder:
    """Creates Events through one `ApiCaller`, within the limits of `ClusterOptions`."""

    def __init__(self, caller: ApiCaller, clock: Callable[[], datetime]) -> None:
        self._caller = caller
        self._clock = clock

    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        """Create core/v1 Events, best effort: returns how many were written and never raises.

        At most `max_events_per_call` per call; stops at the first auth or throttling failure and after
        `max_consecutive_event_failures` failures in a row (the API server is unwell: do not pile on).
        """
        options = self._caller.options
        limit = options.max_events_per_call
        if len(events) > limit:
            logger.warning("recording %d of %d events; the rest are dropped", limit, len(events))
        written = 0
        failures = 0
        for event in events[:limit]:
            try:
                self._create_event(event)
            except (AuthError, ThrottledError) as exc:
                logger.warning("stopped recording events after %d: %s", written, exc)
                break
            except ScalerError as exc:
                failures += 1
                logger.warning(
                    "event %s on %s %s not recorded: %s",
                    event.reason,
                    event.target.kind,
                    event.target.name,
                    exc,
                )
                if failures >= options.max_consecutive_event_failures:
                    logger.warning("stopped recording events after %d failures in a row", failures)
                    break
            except Exception:  # best effort means best effort: a bug here must not fail the run
                logger.exception("event %s on %s not recorded", event.reason, event.target.name)
                failures += 1
                if failures >= options.max_consecutive_event_failures:
                    break
            else:
                written += 1
                failures = 0
        return written

    def _create_event(self, event: ClusterEvent) -> None:
        target = event.target
        cluster_scoped = not target.namespace
        namespace = NODE_EVENT_NAMESPACE if cluster_scoped else target.namespace
        now = self._clock().replace(microsecond=0)
        prefix = target.name[:_MAX_EVENT_NAME].rstrip("-.")  # each DNS label ends alphanumeric
        stamp = rfc3339(now)
        involved: dict[str, str] = {"apiVersion": "v1", "kind": target.kind, "name": target.name}
        if not cluster_scoped:
            involved["namespace"] = target.namespace
        if target.uid:
            involved["uid"] = target.uid
        body = {  # a core/v1 Event, as the CoreV1Event model would serialize it
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{prefix}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": involved,
            "reason": event.reason,
            "message": _truncate_utf8(event.message, self._caller.options.max_event_message_bytes),
            "type": event.type.value,
            "source": {"component": constants.EVENT_SOURCE},
            "reportingComponent": constants.EVENT_SOURCE,
            "reportingInstance": constants.EVENT_SOURCE,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        path = api_path("/api/v1/namespaces/{namespace}/events", namespace=namespace)
        self._caller.call(
            f"record event {event.reason} on {target.kind} {target.name}",
            lambda: body_of(self._caller.send("POST", path, body=body)),
            failure=ClusterActionError,
            retry_throttled=False,  # best effort: never wait for an event
        )
