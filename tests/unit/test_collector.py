"""`gc_paused`: the collector paused over a block (a handler's imports, a list's decode), and back as
it was afterwards."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.collector import gc_paused

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_enabled")
def test_the_collector_is_paused_inside_and_enabled_again_after() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_a_failed_import_still_turns_the_collector_back_on() -> None:
    with pytest.raises(ImportError), gc_paused():
        import shared.no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


PROBE = """
import gc, functions.{name}.handler
print(gc.isenabled(), gc.get_freeze_count() > 10_000, gc.get_count()[0] < 1_000)
"""


@pytest.mark.parametrize("name", ["reconcile", "aws_events", "force_scale_down"])
def test_after_a_handler_is_imported_the_collector_runs(name: str) -> None:
    # Given a fresh interpreter, when a handler module is imported
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "POWERTOOLS_TRACE_DISABLED": "true"},
    )
    # Then the collector is on again for the invocations, the import's objects are out of its
    # reach (frozen: no collection walks them) and the young generation starts almost empty
    assert done.stdout.strip() == "True True True"


def test_kept_objects_leave_the_collectors_reach_and_the_rest_do_not() -> None:
    gc.unfreeze()
    try:
        with gc_paused():
            plain = [[] for _ in range(100)]
        assert gc.get_freeze_count() == 0
        with gc_paused(keep=True):
            kept = [[] for _ in range(100)]
        # Every object alive then is frozen (the import's and whatever was there before it)
        assert gc.get_freeze_count() >= len(kept) + len(plain)
    finally:
        gc.unfreeze()
