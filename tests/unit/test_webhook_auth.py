"""Webhook authentication: signatures, bearer secrets, the replay window and the secret cache."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from functions.webhook import auth
from functions.webhook.auth import (
    SECRET_MAX_AGE_SECONDS,
    SECRET_REFRESH_SECONDS,
    Authenticator,
    SecretCache,
    read_credentials,
    secret_bytes,
    sign,
)
from functions.webhook.errors import ServiceUnavailableError, UnauthorizedError
from shared.constants import HEADER_SIGNATURE, HEADER_TIMESTAMP
from shared.domain.errors import ReadError

SECRET = "whsec-0123456789abcdef0123456789abcdef"
NOW = 1_796_212_800
BODY = b'{"reason": "test"}'


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class SecretSource:
    """Counts reads; can be rotated or broken."""

    def __init__(self, value: str = SECRET) -> None:
        self.value = value
        self.reads = 0
        self.error: Exception | None = None

    def __call__(self) -> str:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.value


def authenticator(source: SecretSource | None = None, now: float = NOW) -> tuple[Authenticator, FakeClock]:
    clock = FakeClock(now)
    return Authenticator(SecretCache(source or SecretSource(), clock), clock), clock


def test_sign_gives_the_documented_headers() -> None:
    # Given a secret, a timestamp and a body
    # When the body is signed
    headers = sign(SECRET, NOW, BODY)

    # Then the headers carry the timestamp and HMAC-SHA256 over "<timestamp>.<body>"
    digest = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert headers == {HEADER_TIMESTAMP: str(NOW), HEADER_SIGNATURE: f"sha256={digest}"}
    assert sign(SECRET, NOW, BODY.decode()) == headers  # text bodies are signed as UTF-8


def test_signature_is_accepted_case_insensitively_and_over_exact_bytes() -> None:
    # Given a webhook and a body signed with its secret (header names and hex in upper case)
    webhook, _ = authenticator()
    headers = {name.upper(): value.upper() for name, value in sign(SECRET, NOW, BODY).items()}

    # When the request is checked with the same bytes and with one byte changed
    scheme = webhook.authenticate(headers, BODY)

    # Then the same bytes pass and the changed bytes do not
    assert scheme == "signature"
    with pytest.raises(UnauthorizedError, match="invalid signature"):
        webhook.authenticate(headers, BODY + b" ")


@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
def test_timestamps_within_the_replay_window_pass(offset: int) -> None:
    # Given a request signed `offset` seconds from the webhook clock (clock skew either way)
    webhook, _ = authenticator()
    headers = sign(SECRET, NOW + offset, BODY)

    # When it is checked
    # Then it passes
    assert webhook.authenticate(headers, BODY) == "signature"


@pytest.mark.parametrize("offset", [-301, 301, -NOW, 10**11])
def test_timestamps_outside_the_replay_window_are_refused(offset: int) -> None:
    # Given a request correctly signed, but too old or too far in the future
    webhook, _ = authenticator()
    headers = sign(SECRET, NOW + offset, BODY)

    # When it is checked
    # Then it is refused as a possible replay, before the signature is even compared
    with pytest.raises(UnauthorizedError, match="more than 300 s away"):
        webhook.authenticate(headers, BODY)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing credentials"),
        ({HEADER_SIGNATURE: "sha256=00"}, f"missing {HEADER_TIMESTAMP}"),
        ({HEADER_SIGNATURE: "sha256=00", HEADER_TIMESTAMP: "1.5"}, "must be integer unix seconds"),
        ({HEADER_SIGNATURE: "sha256=00", HEADER_TIMESTAMP: "-5"}, "must be integer unix seconds"),
        ({HEADER_SIGNATURE: "sha256=00", HEADER_TIMESTAMP: "١٢٣"}, "must be integer unix seconds"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "unsupported Authorization scheme"),
        ({"Authorization": "Bearer "}, "empty bearer token"),
        ({"Authorization": "Bearer"}, "empty bearer token"),
    ],
)
def test_malformed_credentials_are_refused(headers: dict[str, str], message: str) -> None:
    # Given headers without usable credentials
    # When they are read
    # Then the refusal names the problem
    with pytest.raises(UnauthorizedError, match=message):
        read_credentials(headers, NOW)


@pytest.mark.parametrize("header", [f"Bearer {SECRET}", f"bearer {SECRET}", f"BEARER   {SECRET}  "])
def test_bearer_secret_is_accepted(header: str) -> None:
    # Given a sender that cannot sign, sending the secret as a bearer token
    webhook, _ = authenticator()

    # When it is checked
    # Then it passes
    assert webhook.authenticate({"Authorization": header}, BODY) == "bearer"


def test_wrong_bearer_is_refused() -> None:
    webhook, _ = authenticator()
    with pytest.raises(UnauthorizedError, match="invalid bearer token"):
        webhook.authenticate({"authorization": f"Bearer {SECRET}x"}, BODY)


def test_signature_decides_when_both_are_sent() -> None:
    # Given a valid bearer but a wrong signature
    webhook, _ = authenticator()
    headers = {"authorization": f"Bearer {SECRET}", **sign("another-secret-0123456789", NOW, BODY)}

    # When it is checked
    # Then the signature is what counts
    with pytest.raises(UnauthorizedError, match="invalid signature"):
        webhook.authenticate(headers, BODY)


def test_comparisons_are_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a spy on hmac.compare_digest
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    webhook, _ = authenticator()

    # When a signature and a bearer are checked
    webhook.authenticate(sign(SECRET, NOW, BODY), BODY)
    webhook.authenticate({"authorization": f"Bearer {SECRET}"}, BODY)

    # Then both went through compare_digest
    assert len(calls) == 2


def test_secret_is_read_once_per_cold_start() -> None:
    # Given a fresh webhook
    source = SecretSource()
    webhook, _ = authenticator(source)

    # When many requests are checked
    for _ in range(50):
        webhook.authenticate(sign(SECRET, NOW, BODY), BODY)

    # Then the secret was read once
    assert source.reads == 1


def test_a_secret_rotated_out_stops_working_on_a_warm_instance_within_the_max_age() -> None:
    # Given a warm webhook that read its secret, and the secret rotated (the old key leaked)
    source = SecretSource()
    webhook, clock = authenticator(source)
    webhook.authenticate(sign(SECRET, NOW, BODY), BODY)
    source.value = "a-new-secret-a-new-secret-a-new-secret"
    # When the old key keeps signing requests that pass, until the cached secret is a max age old
    clock.now = NOW + int(SECRET_MAX_AGE_SECONDS) - 1
    webhook.authenticate(sign(SECRET, clock.now, BODY), BODY)
    # Then past the max age the secret is read again and the old key is refused, with no failed
    # request needed to trigger the re-read
    clock.now = NOW + int(SECRET_MAX_AGE_SECONDS)
    with pytest.raises(UnauthorizedError):
        webhook.authenticate(sign(SECRET, clock.now, BODY), BODY)
    assert source.reads == 2


def test_failed_checks_reread_the_secret_at_most_once_per_interval() -> None:
    # Given a webhook that read its secret, and a flood of wrong signatures
    source = SecretSource()
    webhook, clock = authenticator(source)
    webhook.authenticate(sign(SECRET, NOW, BODY), BODY)
    wrong = {"authorization": "Bearer wrong-wrong-wrong-wrong"}

    # When they keep failing for a little over two intervals
    for step in range(int(2 * SECRET_REFRESH_SECONDS) + 2):
        clock.now = NOW + step
        with pytest.raises(UnauthorizedError):
            webhook.authenticate(wrong, BODY)

    # Then the secret was re-read twice, not once per request
    assert source.reads == 3


def test_rotation_is_picked_up_by_the_reread() -> None:
    # Given a webhook that read the old secret long enough ago
    source = SecretSource()
    webhook, clock = authenticator(source)
    webhook.authenticate(sign(SECRET, NOW, BODY), BODY)
    source.value = "whsec-rotated-fedcba9876543210fedcba98"
    clock.now += SECRET_REFRESH_SECONDS

    # When a sender signs with the new secret
    scheme = webhook.authenticate(sign(source.value, int(clock.now), BODY), BODY)

    # Then the re-read secret accepts it, and the old one no longer does
    assert scheme == "signature"
    with pytest.raises(UnauthorizedError):
        webhook.authenticate(sign(SECRET, int(clock.now), BODY), BODY)


def test_unreadable_secret_is_service_unavailable_and_a_failed_reread_keeps_the_old_one() -> None:
    # Given a secret store that fails
    source = SecretSource()
    source.error = ReadError("Secrets Manager is down")
    webhook, clock = authenticator(source)

    # When a request arrives before the secret was ever read
    # Then the webhook cannot authenticate: 503, not 401
    with pytest.raises(ServiceUnavailableError):
        webhook.authenticate(sign(SECRET, NOW, BODY), BODY)

    # And once read, a failing re-read keeps the cached secret working
    source.error = None
    webhook.authenticate(sign(SECRET, NOW, BODY), BODY)
    source.error = ReadError("down again")
    clock.now += SECRET_REFRESH_SECONDS
    with pytest.raises(UnauthorizedError):
        webhook.authenticate({"authorization": "Bearer wrong-wrong-wrong-wrong"}, BODY)
    assert webhook.authenticate(sign(SECRET, int(clock.now), BODY), BODY) == "signature"


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (SECRET, SECRET),
        (f"  {SECRET}\n", SECRET),
        (f'{{"secret": "{SECRET}"}}', SECRET),
        ("{not-json-but-a-long-secret}", "{not-json-but-a-long-secret}"),
    ],
)
def test_secret_string_forms(stored: str, expected: str) -> None:
    assert secret_bytes(stored) == expected.encode()


@pytest.mark.parametrize(
    "stored", ["", "   ", "short", '{"secret": ""}', '{"other": "0123456789abcdef0123"}']
)
def test_empty_or_short_secret_fails_closed(stored: str) -> None:
    # Given a misconfigured secret (an empty bearer must never match an empty secret)
    source = SecretSource(stored)
    webhook, _ = authenticator(source)

    # When a request arrives
    # Then nothing is accepted: the webhook reports itself unavailable
    with pytest.raises(ServiceUnavailableError):
        webhook.authenticate(sign(stored, NOW, BODY), BODY)
