"""The trace argument and loading the benchmarks that replay a trace share (sim_bench, placement_bound)."""

from __future__ import annotations

import argparse
from pathlib import Path

from shared.domain.errors import InputError
from shared.local.sim.trace import Trace, load_trace

DEFAULT_TRACE = "../shared/traces/philly.csv"


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """The positional trace path (default the steering repo's Philly copy) and `--limit`."""
    parser.add_argument(
        "trace", nargs="?", default=DEFAULT_TRACE, help=f"Philly trace CSV (default {DEFAULT_TRACE})"
    )
    parser.add_argument("--limit", type=int, help="only the first N jobs")


def read_trace(path: Path, limit: int | None, program: str) -> Trace | None:
    """The Philly trace at `path`, or None after printing why it cannot be read."""
    if not path.exists():
        print(f"{program}: trace {path} not found (the Philly trace is not shipped; pass its path)")
        return None
    try:
        return load_trace(path, "philly", limit=limit)
    except InputError as exc:
        print(f"{program}: {exc}")
        return None
