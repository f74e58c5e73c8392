"""`backlog-scaler admission-token`: the path token operators put into the admission webhook URL."""

from __future__ import annotations

import io

import pytest

from shared.local.cli import main
from shared.webhook_auth import admission_path_token

SECRET = "whsec-0123456789abcdef0123456789abcdef"


def test_prints_the_token_the_webhook_accepts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the SecretString on stdin, in its JSON form
    monkeypatch.setattr("sys.stdin", io.StringIO(f'{{"secret": "{SECRET}"}}\n'))
    # When asking for the token
    assert main(["admission-token"]) == 0
    # Then it is the HMAC the webhook checks, not the secret itself
    token = capsys.readouterr().out.strip()
    assert token == admission_path_token(SECRET)
    assert SECRET not in token and len(token) == 64


@pytest.mark.parametrize("stdin", ["", "short"])
def test_missing_or_weak_secret_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: str
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(["admission-token"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
