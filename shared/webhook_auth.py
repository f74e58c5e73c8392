"""Credentials of the webhook, shared by the webhook function, the CLI and the local run.

Pure HMAC-SHA256 helpers (standard library only):

- `sign(secret, timestamp, body)`: the headers a forwarder sends (signature over "<ts>." + body);
- `admission_path_token(secret)`: the token the admission webhook URL carries in its path. The
  Kubernetes API server cannot sign or, on EKS, send a bearer token to an admission webhook, and a
  webhook URL may hold neither user info nor a query; so the URL ends in `/admission/<token>`. The
  token is an HMAC of a fixed label under the webhook secret: it is not the secret, it only lets a
  caller say "a GPU pod was created", and it changes when the secret is rotated.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from shared.constants import HEADER_SIGNATURE, HEADER_TIMESTAMP
from shared.domain.errors import ConfigError

SIGNATURE_PREFIX = "sha256="
MIN_SECRET_BYTES = 16  # refuse to run with an empty or trivially guessable secret
ADMISSION_TOKEN_LABEL = b"backlog-scaler/admission-path-token/v1"


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def signature(secret: str | bytes, timestamp: int | str, body: str | bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `f"{timestamp}."` + body under `secret`."""
    message = f"{timestamp}.".encode("ascii") + _bytes(body)
    return SIGNATURE_PREFIX + hmac.new(_bytes(secret), message, hashlib.sha256).hexdigest()


def sign(secret: str | bytes, timestamp: int, body: str | bytes) -> dict[str, str]:
    """The headers that authenticate `body` sent at `timestamp` (unix seconds)."""
    return {HEADER_TIMESTAMP: str(timestamp), HEADER_SIGNATURE: signature(secret, timestamp, body)}


def secret_value(secret_string: str) -> bytes:
    """The shared secret in a SecretString: the string itself or JSON `{"secret": ...}`.

    ConfigError when it is shorter than MIN_SECRET_BYTES.
    """
    text = secret_string.strip()
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


def admission_path_token(secret: str | bytes) -> str:
    """The admission webhook's path token for `secret` (64 hex characters)."""
    return hmac.new(_bytes(secret), ADMISSION_TOKEN_LABEL, hashlib.sha256).hexdigest()
