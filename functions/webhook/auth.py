"""Who may call the webhook: an HMAC-SHA256 signature, or the bearer secret for senders that cannot sign.

Headers for event forwarders and scripts (preferred; `sign` builds them):

    x-backlog-scaler-timestamp: <unix seconds, an integer>
    x-backlog-scaler-signature: sha256=<hex of HMAC-SHA256(secret, "<timestamp>." + raw body bytes)>

The timestamp must be within 5 minutes of the webhook's clock, in either direction (clock skew), so a
captured request cannot be replayed later; inside the window a replay only re-sends a trigger the
queue coalesces anyway. The signature covers the exact bytes sent (after base64 decoding, if the
platform encoded them), so the body must not be re-serialised after signing.

For senders that cannot sign:

    Authorization: Bearer <secret>

The Kubernetes API server calling the admission webhook can do neither on EKS (no API-server flags,
so no `--admission-control-config-file`), and a webhook URL may carry no user info or query. Its URL
therefore ends in `/admission/<token>`, where the token is `shared.webhook_auth.admission_path_token`
of the secret (an HMAC, not the secret; `backlog-scaler admission-token` prints it). The path token
is accepted on the admission route only, and only when the request carries no other credentials.

When both are present the signature decides. Comparisons use `hmac.compare_digest`. The secret is the
SecretString of the Secrets Manager secret (the value itself, or JSON `{"secret": "..."}`), read once
per cold start, re-read after a failed check when the cached copy is older than
`SECRET_REFRESH_SECONDS` (a new key works within a minute, while a flood of bad requests costs at
most one read a minute), and re-read once older than `SECRET_MAX_AGE_SECONDS` (an old key rotated
out stops working within five minutes on every warm instance).
"""

from __future__ import annotations

import contextlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from functions.webhook.errors import ServiceUnavailableError, UnauthorizedError
from shared.constants import HEADER_SIGNATURE, HEADER_TIMESTAMP, WEBHOOK_REPLAY_WINDOW_SECONDS
from shared.domain.errors import ScalerError
from shared.webhook_auth import admission_path_token, secret_value, sign, signature

__all__ = ["Authenticator", "SecretCache", "admission_path_token", "read_credentials", "sign", "signature"]

AUTHORIZATION_HEADER = "authorization"
BEARER_SCHEME = "bearer"
SECRET_REFRESH_SECONDS = 60.0
# A warm instance re-reads the secret at least this often even while every request passes: a key
# rotated out because it leaked must stop working everywhere, not only where a request with the new
# key happened to fail first (Secrets Manager's own caching client refreshes on a TTL the same way).
SECRET_MAX_AGE_SECONDS = 300.0
_TIMESTAMP = re.compile(r"[0-9]{1,12}")

Scheme = Literal["signature", "bearer", "path-token"]


def secret_bytes(value: str) -> bytes:
    """The shared secret in a SecretString: the string itself or JSON `{"secret": ...}`."""
    return secret_value(value)


@dataclass(frozen=True)
class Credentials:
    """What a request presents: a signature over (timestamp, body) or a bearer secret."""

    scheme: Scheme
    value: bytes
    timestamp: str = ""

    def verify(self, secret: bytes, body: bytes) -> bool:
        """True when the credentials were made with `secret` (constant-time comparison)."""
        if self.scheme == "signature":
            expected = signature(secret, self.timestamp, body).encode("ascii")
        elif self.scheme == "path-token":
            expected = admission_path_token(secret).encode("ascii")
        else:
            expected = secret
        return hmac.compare_digest(expected, self.value)


def _encoded(value: str) -> bytes:
    # Header values are text; "replace" keeps any odd character comparable instead of raising.
    return value.strip().encode("utf-8", errors="replace")


def read_credentials(
    headers: Mapping[str, str],
    now: float,
    window: int = WEBHOOK_REPLAY_WINDOW_SECONDS,
    path_token: str | None = None,
) -> Credentials:
    """The credentials in `headers` (or the admission URL's path token when the headers have none);
    UnauthorizedError when absent, malformed or outside the window."""
    lowered = {str(name).lower(): str(value) for name, value in headers.items()}
    if HEADER_SIGNATURE in lowered:
        timestamp = lowered.get(HEADER_TIMESTAMP, "").strip()
        if not timestamp:
            raise UnauthorizedError(f"missing {HEADER_TIMESTAMP} header")
        if not _TIMESTAMP.fullmatch(timestamp):
            raise UnauthorizedError(f"{HEADER_TIMESTAMP} must be integer unix seconds")
        if abs(int(now) - int(timestamp)) > window:  # whole seconds, the timestamp's resolution
            raise UnauthorizedError(f"{HEADER_TIMESTAMP} is more than {window} s away from the server clock")
        return Credentials("signature", _encoded(lowered[HEADER_SIGNATURE]).lower(), timestamp)
    if AUTHORIZATION_HEADER in lowered:
        scheme, _, token = lowered[AUTHORIZATION_HEADER].strip().partition(" ")
        if scheme.lower() != BEARER_SCHEME:
            raise UnauthorizedError("unsupported Authorization scheme: use Bearer or sign the request")
        if not token.strip():
            raise UnauthorizedError("empty bearer token")
        return Credentials("bearer", _encoded(token))
    if path_token:
        return Credentials("path-token", _encoded(path_token).lower())
    raise UnauthorizedError(f"missing credentials: send {HEADER_SIGNATURE} + {HEADER_TIMESTAMP} or a bearer")


class SecretCache:
    """The webhook secret, read on first use and re-read (rate-limited) after a failed check."""

    def __init__(
        self,
        read: Callable[[], str],
        clock: Callable[[], float],
        refresh_after_seconds: float = SECRET_REFRESH_SECONDS,
        max_age_seconds: float = SECRET_MAX_AGE_SECONDS,
    ) -> None:
        self._read = read
        self._clock = clock
        self._refresh_after = refresh_after_seconds
        self._max_age = max_age_seconds
        self._value: bytes | None = None
        self._read_at = 0.0

    def get(self) -> bytes:
        """The cached secret: read now if never read, or read again once older than the max age
        (the cached one is kept if that read fails). ServiceUnavailableError when none can be read."""
        if self._value is None:
            self._value = self._load()
        elif self._clock() - self._read_at >= self._max_age:
            # A failed read keeps the secret we have; _load set the time: the next try is a max age away.
            with contextlib.suppress(ServiceUnavailableError):
                self._value = self._load()
        return self._value

    def refresh(self) -> bool:
        """Re-read after a failed check; True only when a read was due and the secret changed."""
        if self._value is None or self._clock() - self._read_at < self._refresh_after:
            return False
        try:
            value = self._load()
        except ServiceUnavailableError:
            return False  # keep the secret we have; the next refresh is due after the interval
        changed = not hmac.compare_digest(value, self._value)
        self._value = value
        return changed

    def _load(self) -> bytes:
        self._read_at = self._clock()
        try:
            return secret_bytes(self._read())
        except ScalerError as exc:
            raise ServiceUnavailableError("the webhook secret cannot be read; retry later") from exc


class Authenticator:
    """Checks every request against the cached secret (one re-read on a mismatch, rate-limited)."""

    def __init__(self, secrets: SecretCache, clock: Callable[[], float]) -> None:
        self._secrets = secrets
        self._clock = clock

    def authenticate(self, headers: Mapping[str, str], body: bytes, path_token: str | None = None) -> Scheme:
        """The scheme that authenticated the request; UnauthorizedError or ServiceUnavailableError."""
        credentials = read_credentials(headers, self._clock(), path_token=path_token)
        if credentials.verify(self._secrets.get(), body):
            return credentials.scheme
        if self._secrets.refresh() and credentials.verify(self._secrets.get(), body):
            return credentials.scheme
        what = {"signature": "signature", "bearer": "bearer token", "path-token": "admission path token"}
        raise UnauthorizedError(f"invalid {what[credentials.scheme]}")
