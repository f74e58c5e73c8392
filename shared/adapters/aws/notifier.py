"""Notifiers: one message per decision batch to SNS and/or Slack; best effort, never raising.

A failed notification must not fail a reconcile run that already changed the fleet, so every
failure is logged and reported as False.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shared.adapters.aws import clients
from shared.adapters.aws.clients import BOTO_ERRORS, AwsClient, error_code
from shared.adapters.aws.secrets import SecretsManagerSecrets, region_of_arn
from shared.domain.errors import ConfigError, ScalerError

if TYPE_CHECKING:
    from shared.config import NotificationsConfig
    from shared.ports import Notifier

logger = logging.getLogger(__name__)

# SNS: Subject at most 100 ASCII characters without line breaks; a message at most 256 KiB.
SNS_SUBJECT_MAX = 100
SNS_MESSAGE_MAX_BYTES = 256 * 1024 - 1024  # the limit covers the whole request: leave room for the rest
# Slack shows at most 4,000 characters of `text` before it truncates (or splits) a message.
SLACK_TEXT_MAX = 4000
SLACK_TIMEOUT_SECONDS = 3.0
# Everything in a notification is plain text, much of it from users or the cluster: no *bold* or
# _italics_ parsed out of names, no link previews fetched for a URL someone put in a pod message.
SLACK_PLAIN = {"mrkdwn": False, "unfurl_links": False, "unfurl_media": False}
WEBHOOK_GONE_STATUSES = frozenset({403, 404, 410})
TRUNCATED = "\n... (truncated)"


def render(subject: str, lines: Sequence[str]) -> str:
    """The plain-text body of a notification: the subject, then one line per decision."""
    return "\n".join([subject, *lines]) if lines else subject


def slack_text(text: str) -> str:
    """`text` with Slack's three control characters escaped, so a node name, a pod message or a
    forced scale-down's `requested_by` cannot mention `<!channel>`, hide a `<url|link>` or fake a
    user (Slack, "Formatting text for app surfaces": escape &, < and > as &amp;, &lt;, &gt;; only those
    three, or the entities show literally)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate_bytes(text: str, limit: int, marker: str = TRUNCATED) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, ending with `marker` when cut."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    room = max(0, limit - len(marker.encode("utf-8")))
    # errors="ignore" drops a multi-byte character split by the cut.
    return encoded[:room].decode("utf-8", errors="ignore") + marker


def truncate_chars(text: str, limit: int, marker: str = TRUNCATED) -> str:
    """`text` cut to at most `limit` characters, ending with `marker` when cut."""
    return text if len(text) <= limit else text[: max(0, limit - len(marker))] + marker


def sns_subject(subject: str) -> str:
    """A subject SNS accepts: printable ASCII on one line, at most 100 characters."""
    flat = " ".join(subject.split())
    ascii_only = "".join(c if " " <= c <= "~" else "?" for c in flat)
    return truncate_chars(ascii_only, SNS_SUBJECT_MAX, "...")


class NullNotifier:
    """Sends nothing (no notifications configured)."""

    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        """Always succeeds."""
        return True


class SnsNotifier:
    """Publishes each batch to an SNS topic (email, chat bots, other subscribers)."""

    def __init__(self, topic_arn: str, client: AwsClient | None = None) -> None:
        self._topic_arn = topic_arn
        self._client = client
        self._region = region_of_arn(topic_arn)

    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        """Publish one message; False (logged) on any failure."""
        params = {
            "TopicArn": self._topic_arn,
            "Message": truncate_bytes(render(subject, lines), SNS_MESSAGE_MAX_BYTES),
        }
        title = sns_subject(subject)
        if title:
            params["Subject"] = title
        try:
            client = self._client if self._client is not None else clients.client("sns", self._region)
            client.publish(**params)
        except BOTO_ERRORS as exc:
            logger.warning(
                "SNS notification to %s failed (%s)", self._topic_arn, error_code(exc) or type(exc).__name__
            )
            return False
        except Exception:
            logger.warning("SNS notification to %s failed", self._topic_arn, exc_info=True)
            return False
        return True


class SlackNotifier:
    """Posts each batch to a Slack incoming webhook whose URL is kept in Secrets Manager.

    The secret holds the URL itself, or JSON with a `url` / `webhook_url` key. It is read at the first
    notification and cached; a failed read is retried at the next one, and a webhook answering 403/404/410
    (revoked or rotated) makes the next notification read it again. The URL is a credential and is never
    logged.
    """

    def __init__(
        self,
        secret_arn: str,
        secrets: SecretsManagerSecrets | None = None,
        *,
        timeout: float = SLACK_TIMEOUT_SECONDS,
    ) -> None:
        self._secret_arn = secret_arn
        self._secrets = secrets if secrets is not None else SecretsManagerSecrets()
        self._timeout = timeout
        self._url: str | None = None

    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        """Post one message; False (logged) on any failure."""
        try:
            if self._url is None:
                self._url = webhook_url_from_secret(
                    self._secrets.secret_string(self._secret_arn), self._secret_arn
                )
            text = truncate_chars(slack_text(render(subject, lines)), SLACK_TEXT_MAX)
            request = urllib.request.Request(
                self._url,
                data=json.dumps({"text": text, **SLACK_PLAIN}).encode("utf-8"),
                method="POST",
                headers={"Content-Type": "application/json; charset=utf-8"},
            )
            # The URL passed webhook_url_from_secret: https (or loopback http), never file: or ftp:.
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            logger.warning("Slack notification failed: HTTP %s", exc.code)
            if exc.code in WEBHOOK_GONE_STATUSES:
                self._url = None
            return False
        except (urllib.error.URLError, OSError) as exc:
            logger.warning("Slack notification failed: %s", type(exc).__name__)
            return False
        except ScalerError as exc:
            logger.warning("Slack notification failed: %s", exc)
            return False
        except Exception:
            logger.warning("Slack notification failed", exc_info=True)
            return False
        return True


def webhook_url_from_secret(secret: str, source: str = "secret") -> str:
    """The webhook URL in a secret string (the URL, or JSON with `url` / `webhook_url`).

    Only https is accepted, except http to a loopback host (local runs and tests).
    """
    text = secret.strip()
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: not valid JSON") from exc
        text = (
            str(document.get("url") or document.get("webhook_url") or "")
            if isinstance(document, dict)
            else ""
        )
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme == "https" and parsed.hostname:
        return text
    if parsed.scheme == "http" and parsed.hostname and _is_loopback(parsed.hostname):
        return text
    raise ConfigError(f"{source}: expected an https webhook URL")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CompositeNotifier:
    """Sends every batch to all its notifiers; succeeds only if all of them did."""

    def __init__(self, *notifiers: Notifier) -> None:
        self._notifiers = notifiers

    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        """Notify each (a failure does not stop the others)."""
        results = []
        for notifier in self._notifiers:
            try:
                results.append(notifier.notify(subject, lines))
            except Exception:  # a third-party notifier breaking the never-raise contract
                logger.warning("notifier %s raised", type(notifier).__name__, exc_info=True)
                results.append(False)
        return all(results)


def notifier_from_config(notifications: NotificationsConfig) -> Notifier:
    """The notifier of a config: SNS and/or Slack, or a NullNotifier when neither is set."""
    notifiers: list[Notifier] = []
    if notifications.sns_topic_arn:
        notifiers.append(SnsNotifier(notifications.sns_topic_arn))
    if notifications.slack_webhook_secret_arn:
        notifiers.append(SlackNotifier(notifications.slack_webhook_secret_arn))
    if not notifiers:
        return NullNotifier()
    return notifiers[0] if len(notifiers) == 1 else CompositeNotifier(*notifiers)
