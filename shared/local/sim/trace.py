"""Job traces to `Job`s: Philly, ITP/ElasticFlow, Alibaba openb pod lists and a generic CSV.

Times are whole seconds since the Unix epoch (UTC): submit times are rounded down and durations up
to the second, so the simulated clock is exact. Formats with relative times (seconds from the start
of the trace) are placed at `TRACE_ORIGIN`. Every malformed row is an InputError naming the file,
the row (its line number, the header being row 1) and the column:
`philly.csv: row 17: duration: not a number: 'abc'`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from shared.domain.errors import InputError

FORMATS = ("philly", "itp", "openb", "csv")
TRACE_ORIGIN = datetime(2020, 1, 1, tzinfo=UTC)  # where relative trace times start
_ORIGIN_SECONDS = int(TRACE_ORIGIN.timestamp())
# The replay's clock is a datetime (years 1 to 9999): a duration, or a time from the origin, is at most
# a century, and no job is submitted after LATEST_SUBMIT, so every instant of a replay is a datetime.
MAX_TRACE_SECONDS = 100 * 365 * 86400
LATEST_SUBMIT = datetime(2200, 1, 1, tzinfo=UTC)
_LATEST_SECONDS = int(LATEST_SUBMIT.timestamp())
EARLIEST_SUBMIT = datetime(1900, 1, 1, tzinfo=UTC)  # the planner steps back from its clock (deadlines)
_EARLIEST_SECONDS = int(EARLIEST_SUBMIT.timestamp())
# A job's GPUs (the largest Philly job asks 128): a job is replayed as pods of at most a node each,
# so a count of 1e20 would be that many pods.
MAX_JOB_GPUS = 100_000
# Counts beyond this are not whole numbers a float holds exactly (2^53).
_MAX_COUNT = 2**53

# Columns that identify a format (auto-detection) and that it needs.
_REQUIRED: Mapping[str, tuple[str, ...]] = {
    "philly": ("timestamp", "duration", "num_gpus"),
    "itp": ("job_id", "duration", "num_gpu"),  # plus submission_time or submit_time
    "openb": ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"),
    "csv": ("submit_time", "duration_seconds", "gpus"),
}


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a trace: when it was submitted, how long it runs once placed, what it asks for."""

    job_id: str
    submit: int  # seconds since the Unix epoch
    duration: int  # seconds of run time once all its pods are placed
    gpus: int
    cpu_millicores: int | None = None  # for the whole job; None: in proportion to GPUs
    memory_mib: int | None = None  # for the whole job; None: in proportion to GPUs
    group: str | None = None  # a node group name from the config (its labels become a selector)
    selector: tuple[tuple[str, str], ...] = ()  # node labels the job's pods require
    cluster: str = ""  # virtual cluster (Philly), or the generic CSV's optional `cluster`
    fractional: bool = False  # asked for a fraction of a GPU (openb); rounded up to one

    @property
    def gpu_seconds(self) -> int:
        return self.gpus * self.duration


@dataclass(frozen=True, slots=True)
class Trace:
    """Jobs sorted by submit time (then row order), with what the loader noticed on the way."""

    source: str
    format: str
    jobs: tuple[Job, ...]
    notes: tuple[str, ...] = ()
    has_clusters: bool = False

    @property
    def start(self) -> int | None:
        return self.jobs[0].submit if self.jobs else None


@dataclass
class _Rows:
    """Row-numbered access to one CSV file, raising InputError that names file, row and column."""

    source: str
    header: Sequence[str]
    reader: Iterator[list[str]]
    line: Callable[[], int]
    index: dict[str, int] = field(default_factory=dict)
    row: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {name.strip(): i for i, name in enumerate(self.header)}

    def __iter__(self) -> Iterator[_Rows]:
        for row in self.reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            self.row = row
            yield self

    def error(self, column: str, problem: str) -> InputError:
        return InputError(f"{self.source}: row {self.line()}: {column}: {problem}")

    def has(self, column: str) -> bool:
        return column in self.index

    def text(self, column: str) -> str:
        """The stripped cell ('' when the column is absent or the row is short)."""
        position = self.index.get(column)
        if position is None or position >= len(self.row):
            return ""
        return self.row[position].strip()

    def required(self, column: str) -> str:
        value = self.text(column)
        if not value:
            raise self.error(column, "missing value")
        return value

    def number(self, column: str, *, optional: bool = False) -> float | None:
        raw = self.text(column) if optional else self.required(column)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"not a number: {raw!r}") from None
        if not math.isfinite(value):
            raise self.error(column, f"not a finite number: {raw!r}")
        if value < 0:
            raise self.error(column, f"negative: {raw!r}")
        return value

    def count(self, column: str, *, optional: bool = False, limit: int = _MAX_COUNT) -> int | None:
        value = self.number(column, optional=optional)
        if value is None:
            return None
        if value > limit:
            raise self.error(column, f"more than {limit:,}: {self.text(column)!r}")
        if value != int(value):
            raise self.error(column, f"not a whole number: {self.text(column)!r}")
        return int(value)

    def seconds(self, column: str) -> int:
        """A duration in whole seconds, rounded up (at most a century)."""
        value = self.number(column)
        assert value is not None
        return math.ceil(self.bounded(column, value))

    def bounded(self, column: str, seconds: float) -> float:
        """`seconds` (a duration, or a time from the origin) when within MAX_TRACE_SECONDS."""
        if seconds > MAX_TRACE_SECONDS:
            raise self.error(column, f"more than a century ({MAX_TRACE_SECONDS:,} s): {self.text(column)!r}")
        return seconds

    def offset(self, column: str) -> int:
        """Seconds from the start of the trace (a number), as epoch seconds."""
        value = self.number(column)
        assert value is not None
        return _ORIGIN_SECONDS + math.floor(self.bounded(column, value))

    def time(self, column: str) -> int:
        """ISO 8601 (naive = UTC) or seconds from the start of the trace; whole seconds."""
        try:
            return parse_time(self.required(column))
        except ValueError as exc:
            raise self.error(column, str(exc)) from None


def parse_time(raw: str) -> int:
    """ISO 8601 (naive = UTC) or seconds from the trace origin, as epoch seconds; ValueError saying why
    (not a time, nan or infinite, more than a century from the origin, or after LATEST_SUBMIT)."""
    try:
        value: float | None = float(raw)
    except ValueError:
        value = None
    if value is None or math.isnan(value):
        try:
            seconds = parse_timestamp(raw)
        except ValueError:
            raise ValueError(f"neither seconds nor an ISO 8601 timestamp: {raw!r}") from None
    elif abs(value) > MAX_TRACE_SECONDS:
        raise ValueError(f"more than a century ({MAX_TRACE_SECONDS:,} s) from the trace origin: {raw!r}")
    else:
        seconds = _ORIGIN_SECONDS + math.floor(value)
    return _in_era(seconds, raw)


def _in_era(seconds: int, raw: str) -> int:
    """Epoch `seconds` when from EARLIEST_SUBMIT to before LATEST_SUBMIT; ValueError otherwise."""
    if seconds >= _LATEST_SECONDS:
        raise ValueError(f"after {LATEST_SUBMIT:%Y-%m-%d}: {raw!r}")
    if seconds < _EARLIEST_SECONDS:
        raise ValueError(f"before {EARLIEST_SUBMIT:%Y-%m-%d}: {raw!r}")
    return seconds


def parse_timestamp(raw: str) -> int:
    """ISO 8601 (`2017-10-09 07:01:55`, `...T...Z`; naive means UTC) to epoch seconds; ValueError."""
    value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return math.floor(value.timestamp())


def parse_trace_time(raw: str, what: str = "time") -> int:
    """A window bound (`--start/--end`): ISO 8601, or seconds from the trace origin; InputError."""
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None


def _philly(rows: _Rows) -> Iterator[Job]:
    for row in rows:
        try:
            submit = parse_timestamp(row.required("timestamp"))
        except ValueError:
            raise row.error("timestamp", f"not a timestamp: {row.text('timestamp')!r}") from None
        try:
            _in_era(submit, row.text("timestamp"))
        except ValueError as exc:
            raise row.error("timestamp", str(exc)) from None
        gpus = row.count("num_gpus", limit=MAX_JOB_GPUS)
        assert gpus is not None
        if gpus == 0:
            raise row.error("num_gpus", "a GPU trace job needs at least one GPU")
        yield Job(f"r{row.line()}", submit, row.seconds("duration"), gpus, cluster=row.text("cluster"))


def _itp(rows: _Rows) -> Iterator[Job]:
    column = "submission_time" if rows.has("submission_time") else "submit_time"
    for row in rows:
        submit = row.offset(column)
        gpus = row.count("num_gpu", limit=MAX_JOB_GPUS)
        assert gpus is not None
        if gpus == 0:
            raise row.error("num_gpu", "a GPU trace job needs at least one GPU")
        yield Job(row.required("job_id"), submit, row.seconds("duration"), gpus)


@dataclass
class _OpenbCounts:
    no_times: int = 0
    cpu_only: int = 0
    fractional: int = 0


def _openb(rows: _Rows, counts: _OpenbCounts) -> Iterator[Job]:
    for row in rows:
        name = row.required("name")
        gpus = row.count("num_gpu", limit=MAX_JOB_GPUS)
        milli = row.count("gpu_milli", optional=True) or 0
        created = row.number("creation_time", optional=True)
        scheduled = row.number("scheduled_time", optional=True)
        deleted = row.number("deletion_time", optional=True)
        if created is None or scheduled is None or deleted is None:
            counts.no_times += 1  # still pending or running when the trace was taken
            continue
        if deleted < scheduled:
            raise row.error("deletion_time", f"before scheduled_time: {deleted:g} < {scheduled:g}")
        if not gpus:
            counts.cpu_only += 1
            continue
        fractional = gpus == 1 and 0 < milli < 1000
        counts.fractional += fractional
        yield Job(
            name,
            _ORIGIN_SECONDS + math.floor(row.bounded("creation_time", created)),
            math.ceil(row.bounded("deletion_time", deleted - scheduled)),
            gpus,
            cpu_millicores=row.count("cpu_milli", optional=True),
            memory_mib=row.count("memory_mib", optional=True),
            fractional=fractional,
        )


def _selector(row: _Rows) -> tuple[tuple[str, str], ...]:
    raw = row.text("selector")
    if not raw:
        return ()
    pairs: dict[str, str] = {}
    for part in raw.replace(";", ",").split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key.strip():
            raise row.error("selector", f"expected key=value[;key=value...]: {raw!r}")
        pairs[key.strip()] = value.strip()
    return tuple(sorted(pairs.items()))


def _generic(rows: _Rows) -> Iterator[Job]:
    for row in rows:
        gpus = row.count("gpus", limit=MAX_JOB_GPUS)
        assert gpus is not None
        cpu = row.count("cpu_millicores", optional=True)
        if gpus == 0 and not cpu:
            raise row.error("gpus", "0 GPUs needs cpu_millicores")
        yield Job(
            row.text("job_id") or f"r{row.line()}",
            row.time("submit_time"),
            row.seconds("duration_seconds"),
            gpus,
            cpu_millicores=cpu,
            memory_mib=row.count("memory_mib", optional=True),
            group=row.text("group") or None,
            selector=_selector(row),
            cluster=row.text("cluster"),
        )


def detect_format(header: Sequence[str]) -> str | None:
    """The format whose identifying columns the header has (None when none matches)."""
    names = {h.strip() for h in header}
    if {"submission_time", "submit_time"} & names and set(_REQUIRED["itp"]) <= names:
        return "itp"
    for name in ("philly", "openb", "csv"):
        if set(_REQUIRED[name]) <= names:
            return name
    return None


def load_trace(
    path: str | Path,
    fmt: str = "auto",
    *,
    cluster: str | None = None,
    start: int | None = None,
    end: int | None = None,
    limit: int | None = None,
) -> Trace:
    """Read a trace, keep one virtual cluster and the window [start, end), then the first `limit` jobs.

    Every row is validated, also those the filters drop. Raises InputError.
    """
    source = str(path)
    try:
        handle = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        with handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{source}: empty file (expected a CSV header)")
            fmt = _format_of(source, header, fmt)
            rows = _Rows(source, header, reader, lambda: reader.line_num)
            counts = _OpenbCounts()
            parsed = _parse(fmt, rows, counts)
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: {_undecodable(path)}") from exc
    has_clusters = "cluster" in {h.strip() for h in header}
    jobs = _select(source, fmt, parsed, has_clusters, cluster, start, end, limit)
    return Trace(source, fmt, tuple(jobs), tuple(_notes(counts)), has_clusters)


def _undecodable(path: str | Path) -> str:
    """Where a trace is not UTF-8, as a row (line) number: the reader decodes ahead of the row it
    parses, so the line is found again, byte by byte, once decoding has failed."""
    with open(path, "rb") as raw:
        for line_number, line in enumerate(raw, start=1):
            try:
                line.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                byte = line[exc.start]
                return f"row {line_number}: not UTF-8 text (byte {byte:#04x}); save the trace as UTF-8"
    return "not UTF-8 text; save the trace as UTF-8"


def _format_of(source: str, header: list[str], fmt: str) -> str:
    """The trace's format (detected from the header for "auto"), its required columns checked."""
    detected = detect_format(header)
    if fmt == "auto":
        if detected is None:
            raise InputError(
                f"{source}: cannot tell the trace format from the header {','.join(header)!r}; "
                f"give --trace-format ({'|'.join(FORMATS)})"
            )
        fmt = detected
    if fmt not in _REQUIRED:
        raise InputError(f"{source}: unknown trace format {fmt!r} (one of {', '.join(FORMATS)})")
    names = {h.strip() for h in header}
    missing = [c for c in _REQUIRED[fmt] if c not in names]
    if fmt == "itp" and not {"submission_time", "submit_time"} & names:
        missing.append("submission_time")
    if missing:
        raise InputError(f"{source}: {fmt} trace: missing column(s): {', '.join(missing)}")
    return fmt


def _parse(fmt: str, rows: _Rows, counts: _OpenbCounts) -> list[Job]:
    if fmt == "philly":
        return list(_philly(rows))
    if fmt == "itp":
        return list(_itp(rows))
    if fmt == "openb":
        return list(_openb(rows, counts))
    return list(_generic(rows))


def _notes(counts: _OpenbCounts) -> list[str]:
    """What the reader skipped or rounded (OpenB pods)."""
    notes: list[str] = []
    if counts.no_times:
        notes.append(f"{counts.no_times} pod(s) without creation/scheduled/deletion time skipped")
    if counts.cpu_only:
        notes.append(f"{counts.cpu_only} CPU-only pod(s) skipped")
    if counts.fractional:
        notes.append(f"{counts.fractional} fractional-GPU pod(s) (gpu_milli < 1000) rounded up to 1 GPU")
    return notes


def _select(
    source: str,
    fmt: str,
    parsed: list[Job],
    has_clusters: bool,
    cluster: str | None,
    start: int | None,
    end: int | None,
    limit: int | None,
) -> list[Job]:
    """One virtual cluster's jobs in the window [start, end), by submit time, the first `limit`."""
    jobs = parsed
    if cluster is not None:
        if not has_clusters:
            raise InputError(f"{source}: --cluster given but the {fmt} trace has no cluster column")
        jobs = [j for j in jobs if j.cluster == cluster]
        if not jobs:
            known = sorted({j.cluster for j in parsed})
            raise InputError(f"{source}: no jobs of cluster {cluster!r}; clusters: {', '.join(known)}")
    if start is not None:
        jobs = [j for j in jobs if j.submit >= start]
    if end is not None:
        jobs = [j for j in jobs if j.submit < end]
    jobs.sort(key=lambda j: j.submit)  # stable: row order breaks ties
    if limit is not None:
        jobs = jobs[:limit]
    return jobs
