"""The demo's readable output: decisions as the functions report them, the world's events, a live line.

`DecisionTap` sits between the controller and its real `PowertoolsReporter`: everything still goes
to Powertools (JSON logs and EMF, into the output folder's log file), and each action record is also
kept for the timeline. Times print as offsets from the start (`+03:05`), ISO timestamps inside reasons
too, so "capacity backoff until 2026-12-02T12:07:05+00:00" reads "... until +07:05".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from shared.reporting import ActionRecord, ActionStatus, LogLevel, MetricUnit, Reporter

SOURCE_WIDTH = 24
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")


def offset(at: datetime, start: datetime) -> str:
    """`+mm:ss` (or `+h:mm:ss`) of `at` after `start`."""
    seconds = int((at - start).total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours}:{minutes:02d}:{secs:02d}" if hours else f"{sign}{minutes:02d}:{secs:02d}"


def relative(text: str, start: datetime) -> str:
    """`text` with every ISO 8601 timestamp replaced by its offset from `start`."""

    def swap(match: re.Match[str]) -> str:
        raw = match.group(0).replace("Z", "+00:00")
        try:
            at = datetime.fromisoformat(raw)
        except ValueError:
            return match.group(0)
        if at.tzinfo is None:
            at = at.replace(tzinfo=start.tzinfo)
        return offset(at, start)

    return _ISO.sub(swap, text)


@dataclass(frozen=True)
class Decision:
    """One action a function reported, with when and in which invocation."""

    at: datetime
    source: str  # e.g. "reconcile (schedule)"
    action: ActionRecord


class DecisionTap:
    """A Reporter that forwards everything to `inner` and hands each action record to `sink`."""

    def __init__(self, inner: Reporter, sink: Callable[[ActionRecord], None]) -> None:
        self._inner = inner
        self._sink = sink

    def log(self, level: LogLevel, message: str, **fields: Any) -> None:
        self._inner.log(level, message, **fields)

    def log_action(self, action: ActionRecord) -> None:
        self._sink(action)
        self._inner.log_action(action)

    def metric(
        self, name: str, value: float, *, unit: MetricUnit = "Count", group: str | None = None
    ) -> None:
        self._inner.metric(name, value, unit=unit, group=group)

    def flush(self) -> None:
        self._inner.flush()


_STATUS_MARK = {
    ActionStatus.DONE: "",
    ActionStatus.DRY_RUN: " [dry run]",
    ActionStatus.SKIPPED: " [skipped]",
    ActionStatus.BLOCKED: " [blocked]",
    ActionStatus.FAILED: " [FAILED]",
}


def brief(text: str, limit: int = 130) -> str:
    """`text` cut at a word boundary before `limit` characters (AWS's capacity messages are long)."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 3)
    return text[: cut if cut > 0 else limit - 3].rstrip(" .,;:") + "..."


def decision_line(decision: Decision, start: datetime) -> str:
    """One timeline line for a decision."""
    action = decision.action
    text = f"{action.kind} {action.target}: {brief(relative(action.reason, start))}"
    if action.detail:
        text += f" ({brief(relative(action.detail, start), 80)})"
    return line(decision.at, start, decision.source, text + _STATUS_MARK[action.status])


def line(at: datetime, start: datetime, source: str, text: str) -> str:
    return f"{offset(at, start):>8}  {source:<{SOURCE_WIDTH}} {text}"


class Console:
    """Timeline lines on `stream`; on a terminal also one live progress line, redrawn in place."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self._stream = stream or sys.stdout
        self._live = self._stream.isatty() if live is None else live
        self._progress = ""
        self.lines: list[str] = []

    def print(self, text: str) -> None:
        self.lines.append(text)
        if self._live and self._progress:
            self._stream.write("\r\033[K")
        self._stream.write(text + "\n")
        if self._live and self._progress:
            self._stream.write(self._progress)
        self._stream.flush()

    def progress(self, text: str) -> None:
        if not self._live:
            return
        self._progress = text
        self._stream.write("\r\033[K" + text)
        self._stream.flush()

    def end_progress(self) -> None:
        if self._live and self._progress:
            self._stream.write("\r\033[K")
            self._stream.flush()
        self._progress = ""
