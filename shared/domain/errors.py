"""The project's one exception tree.

    ScalerError
    ├── ConfigError                 the scaler config or the Lambda environment is invalid
    ├── InputError                  a file, event or payload is malformed (names the source)
│   └── InvalidRequestError     a forced scale-down request the group refuses (names the fields)
    ├── ReadError                   gathering state failed; nothing destructive may follow
    │   ├── ClusterReadError        the Kubernetes API could not be listed/read
    │   └── FleetReadError          the Auto Scaling / EC2 APIs could not be read
    ├── ActionError                 an action against the world failed
    │   ├── ClusterActionError      cordon / patch / event / delete failed
    │   │   ├── ConflictError       optimistic-concurrency conflict (409); re-read and retry
    │   │   ├── NotFoundError       the object does not exist (404)
    │   │   └── EvictionBlockedError  a PodDisruptionBudget refused the eviction (429); retry later
    │   └── FleetActionError        SetDesiredCapacity / TerminateInstance failed
    ├── AuthError                   credentials rejected (401/403, AccessDenied); never retried
    ├── ThrottledError              the API asked us to slow down; retried by the caller
    └── LeaseHeldError              another run holds the cluster lease

Adapters map third-party errors (botocore ClientError codes, HTTP statuses) into these at the
boundary with ``raise ... from exc``; nothing branches on message text.
"""

from __future__ import annotations


class ScalerError(Exception):
    """Base of every error the scaler raises on purpose."""


class ConfigError(ScalerError):
    """The scaler config or the Lambda environment is invalid."""


class InputError(ScalerError):
    """An input document (file, event, payload, API response) is malformed."""


# Errors about rejected input name this many problems (fields, nodes): a million bad items never print.
MAX_ERRORS_SHOWN = 5


class InvalidRequestError(InputError):
    """A forced scale-down payload is invalid; `fields` names the offending fields."""

    def __init__(self, message: str, fields: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


class ReadError(ScalerError):
    """Gathering state failed: the run must not take destructive actions."""


class ClusterReadError(ReadError):
    """The Kubernetes API could not be read."""


class FleetReadError(ReadError):
    """The Auto Scaling or EC2 APIs could not be read."""


class ActionError(ScalerError):
    """An action against the cluster or the fleet failed."""


class ClusterActionError(ActionError):
    """A Kubernetes write (patch, eviction, event, delete) failed."""


class ConflictError(ClusterActionError):
    """The object changed since it was read (HTTP 409)."""


class NotFoundError(ClusterActionError):
    """The object does not exist (HTTP 404)."""


class EvictionBlockedError(ClusterActionError):
    """A PodDisruptionBudget refused the eviction (HTTP 429); retry later."""


class FleetActionError(ActionError):
    """An Auto Scaling mutation failed."""


class AuthError(ScalerError):
    """Credentials were rejected (401/403 or AccessDenied); retrying will not help."""


class ThrottledError(ScalerError):
    """The API throttled us after the client's own retries."""


class LeaseHeldError(ScalerError):
    """Another run holds the cluster lease."""
