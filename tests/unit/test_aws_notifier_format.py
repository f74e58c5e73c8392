"""Pure parts of the notifiers: size limits, SNS subjects, the Slack webhook secret."""

from __future__ import annotations

import pytest

from shared.adapters.aws.notifier import (
    CompositeNotifier,
    NullNotifier,
    render,
    slack_text,
    sns_subject,
    truncate_bytes,
    truncate_chars,
    webhook_url_from_secret,
)
from shared.domain.errors import ConfigError


def test_render_puts_the_subject_first_then_one_line_per_decision() -> None:
    # Given a subject and decision lines
    # When rendered
    text = render("scale-up in c1", ["gpu-a: 2 -> 4", "gpu-b: 0 -> 1"])

    # Then the subject is the first line
    assert text == "scale-up in c1\ngpu-a: 2 -> 4\ngpu-b: 0 -> 1"


def test_truncate_bytes_respects_the_limit_without_splitting_characters() -> None:
    # Given a text of multi-byte characters over the limit
    text = "é" * 100  # 200 bytes

    # When cut to 51 bytes
    cut = truncate_bytes(text, 51, marker="~")

    # Then it fits, ends with the marker and is valid text
    assert len(cut.encode("utf-8")) <= 51
    assert cut.endswith("~")
    assert cut.startswith("é" * 25)


def test_slack_text_escapes_only_the_three_control_characters() -> None:
    # Given text from a user and the cluster: a mention, a hidden link, an ampersand, and mrkdwn marks
    text = "by <!channel> see <https://evil.example|docs> & *all* of n1's pods"
    # When escaped / Then no control sequence survives, and nothing else is touched
    assert (
        slack_text(text)
        == "by &lt;!channel&gt; see &lt;https://evil.example|docs&gt; &amp; *all* of n1's pods"
    )


def test_truncate_keeps_short_texts() -> None:
    # Given texts under the limits / When truncated / Then unchanged
    assert truncate_bytes("short", 100) == "short"
    assert truncate_chars("short", 100) == "short"


def test_sns_subject_is_one_ascii_line_of_at_most_100_characters() -> None:
    # Given a long subject with a line break and non-ASCII characters
    subject = "Scale-up\nin cluster ünïcode " + "x" * 200

    # When made SNS-safe
    safe = sns_subject(subject)

    # Then it is printable ASCII on one line, cut to 100 characters
    assert len(safe) == 100
    assert "\n" not in safe
    assert all(" " <= c <= "~" for c in safe)
    assert safe.startswith("Scale-up in cluster ?n?code")
    assert safe.endswith("...")


@pytest.mark.parametrize(
    "secret",
    [
        "https://hooks.slack.com/services/T0/B0/xyz",
        '{"url": "https://hooks.slack.com/services/T0/B0/xyz"}',
        '{"webhook_url": "https://hooks.slack.com/services/T0/B0/xyz"}',
    ],
)
def test_webhook_url_is_read_from_a_plain_or_json_secret(secret: str) -> None:
    # Given the secret in any accepted form / When read / Then the URL comes out
    assert webhook_url_from_secret(secret) == "https://hooks.slack.com/services/T0/B0/xyz"


@pytest.mark.parametrize(
    "secret",
    ["http://hooks.slack.com/services/x", "file:///etc/passwd", "not a url", '{"token": "x"}', "{broken"],
)
def test_webhook_url_must_be_https(secret: str) -> None:
    # Given a secret without an https URL / When read / Then ConfigError (plain http only to loopback)
    with pytest.raises(ConfigError):
        webhook_url_from_secret(secret)


def test_plain_http_is_accepted_for_loopback_only() -> None:
    # Given a local test server URL / When read / Then it is accepted
    assert webhook_url_from_secret("http://127.0.0.1:8080/hook") == "http://127.0.0.1:8080/hook"


class RecordingNotifier:
    def __init__(self, result: bool = True, error: Exception | None = None) -> None:
        self.result = result
        self.error = error
        self.sent: list[tuple[str, tuple[str, ...]]] = []

    def notify(self, subject: str, lines: object) -> bool:
        self.sent.append((subject, tuple(lines)))  # type: ignore[arg-type]
        if self.error is not None:
            raise self.error
        return self.result


def test_composite_sends_to_all_and_reports_any_failure() -> None:
    # Given a failing, a raising and a working notifier
    failing, raising, working = (
        RecordingNotifier(False),
        RecordingNotifier(error=RuntimeError("x")),
        RecordingNotifier(),
    )

    # When the composite notifies
    ok = CompositeNotifier(failing, raising, working).notify("s", ["a"])

    # Then each got the message, nothing raised, and the result is False
    assert not ok
    assert failing.sent == raising.sent == working.sent == [("s", ("a",))]


def test_null_notifier_always_succeeds() -> None:
    # Given no notifications configured / When notified / Then success
    assert NullNotifier().notify("s", ["a"])
    assert CompositeNotifier().notify("s", [])
