"""Who may call the webhook: an HMAC-SHA256 signature, or the bearer secret for senders that cannot sign.

Headers for event forwarders and scripts (preferred; `sign` builds them):

    x-backlog-scaler-timestamp: <unix seconds, an integer>
    x-backlog-scaler-signature: sha256=<hex of HMAC-SHA256(secret, "<timestamp>." + raw body bytes)>

The timestamp must be within 5 minutes of the webhook's clock, in either direction (clock skew), so a
captured request cannot be replayed later; inside the window a replay only re-sends a trigger the
queue coalesces anyway. The signature covers the exact bytes sent (after base64 decoding, if the
platform encoded them), so the body must not be re-serialised after signing.

For senders that cannot sign, above all the Kubernetes API server calling the admission webhook:

    Authorization: Bearer <secret>

The API server sends it when its `--admission-control-config-file` points (`kubeConfigFile`) at a
kubeconfig whose user entry, named after the webhook's host, holds `token: <secret>`. Note: EKS does
not let you set API-server flags, so on EKS the admission webhook reaches us without this header and
gets 401 (harmless: the webhook's `failurePolicy: Ignore` admits the pod and the 1-minute schedule
still runs).

When both are present the signature decides. Comparisons use `hmac.compare_digest`. The secret is the
SecretString of the Secrets Manager secret (the value itself, or JSON `{"secret": "..."}`), read once
per cold start and re-read after a failed check when the cached copy is older than
`SECRET_REFRESH_SECONDS`, so a rotation is picked up within a minute while a flood of bad requests
costs at most one read a minute.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from functions.webhook.errors import ServiceUnavailableError, UnauthorizedError
from shared.constants import HEADER_SIGNATURE, HEADER_TIMESTAMP, WEBHOOK_REPLAY_WINDOW_SECONDS
from shared.domain.errors import ConfigError, ScalerError

SIGNATURE_PREFIX = "sha256="
AUTHORIZATION_HEADER = "authorization"
BEARER_SCHEME = "bearer"
SECRET_REFRESH_SECONDS = 60.0
MIN_SECRET_BYTES = 16  # refuse to run with an empty or trivially guessable secret
_TIMESTAMP = re.compile(r"[0-9]{1,12}")

Scheme = Literal["signature", "bearer"]


def signature(secret: str | bytes, timestamp: int | str, body: str | bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `f"{timestamp}."` + body under `secret`."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    data = body.encode("utf-8") if isinstance(body, str) else body
    digest = hmac.new(key, f"{timestamp}.".encode("ascii") + data, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def sign(secret: str | bytes, timestamp: int, body: str | bytes) -> dict[str, str]:
    """The headers that authenticate `body` sent at `timestamp` (unix seconds)."""
    return {HEADER_TIMESTAMP: str(timestamp), HEADER_SIGNATURE: signature(secret, timestamp, body)}


def secret_bytes(value: str) -> bytes:
    """The shared secret in a SecretString: the string itself or JSON `{"secret": ...}`."""
    text = value.strip()
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError:
            document = None  # a plain secret that happens to start with "{"
        if isinstance(document, dict):
            text = str(document.get("secret") or "").strip()
    secret = text.encode("utf-8")
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"the webhook secret must hold at least {MIN_SECRET_BYTES} bytes")
    return secret


@dataclass(frozen=True)
class Credentials:
    """What a request presents: a signature over (timestamp, body) or a bearer secret."""

    scheme: Scheme
    value: bytes
    timestamp: str = ""

    def verify(self, secret: bytes, body: bytes) -> bool:
        """True when the credentials were made with `secret` (constant-time comparison)."""
        expected = (
            signature(secret, self.timestamp, body).encode("ascii") if self.scheme == "signature" else secret
        )
        return hmac.compare_digest(expected, self.value)


def _encoded(value: str) -> bytes:
    # Header values are text; "replace" keeps any odd character comparable instead of raising.
    return value.strip().encode("utf-8", errors="replace")


def read_credentials(
    headers: Mapping[str, str], now: float, window: int = WEBHOOK_REPLAY_WINDOW_SECONDS
) -> Credentials:
    """The credentials in `headers`; UnauthorizedError when absent, malformed or outside the window."""
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
    raise UnauthorizedError(f"missing credentials: send {HEADER_SIGNATURE} + {HEADER_TIMESTAMP} or a bearer")


class SecretCache:
    """The webhook secret, read on first use and re-read (rate-limited) after a failed check."""

    def __init__(
        self,
        read: Callable[[], str],
        clock: Callable[[], float],
        refresh_after_seconds: float = SECRET_REFRESH_SECONDS,
    ) -> None:
        self._read = read
        self._clock = clock
        self._refresh_after = refresh_after_seconds
        self._value: bytes | None = None
        self._read_at = 0.0

    def get(self) -> bytes:
        """The cached secret (read now if never read). ServiceUnavailableError when it cannot be read."""
        if self._value is None:
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

    def authenticate(self, headers: Mapping[str, str], body: bytes) -> Scheme:
        """The scheme that authenticated the request; UnauthorizedError or ServiceUnavailableError."""
        credentials = read_credentials(headers, self._clock())
        if credentials.verify(self._secrets.get(), body):
            return credentials.scheme
        if self._secrets.refresh() and credentials.verify(self._secrets.get(), body):
            return credentials.scheme
        raise UnauthorizedError(
            f"invalid {'signature' if credentials.scheme == 'signature' else 'bearer token'}"
        )
