"""A replay's inputs and figures cross to other processes (`simulate --compare`, bench/sim_bench.py
--jobs) by pickle; compiled by mypyc, frozen dataclasses refuse the ordinary unpickling, so the
replay's modules register them to be rebuilt by their constructors (shared/local/sim/pickling.py)."""

from __future__ import annotations

import copyreg
import dataclasses
import multiprocessing
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from shared.local.sim.engine import SimOptions, SimResult, simulate
from shared.local.sim.pickling import register
from shared.local.sim.trace import Trace, load_trace
from tests.builders import config

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _replay(trace: Trace) -> SimResult:
    return simulate(trace, config(), SimOptions())


def test_a_trace_and_its_replay_come_back_from_a_pickle_equal() -> None:
    # Given a trace and the figures of its replay
    trace = load_trace(TRACES / "two_whole_node_jobs.csv")
    result = _replay(trace)

    # When both make the round trip a worker process makes
    trace_back = pickle.loads(pickle.dumps(trace))
    result_back = pickle.loads(pickle.dumps(result))

    # Then they are what was sent
    assert trace_back == trace
    assert result_back.waits == result.waits
    assert result_back.groups == result.groups


def test_a_replay_runs_in_a_worker_process_as_in_this_one() -> None:
    # Given a trace sent to a worker process, as bench/sim_bench.py --jobs does; a spawned one (the
    # default on macOS, and no fork of this threaded test process), which registers for itself
    trace = load_trace(TRACES / "two_whole_node_jobs.csv")
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = pool.submit(_replay, trace).result()

    # Then its figures are the ones replayed here
    here = _replay(trace)
    assert remote.waits == here.waits
    assert remote.groups == here.groups


def test_every_dataclass_of_the_loaded_modules_is_rebuilt_by_its_constructor() -> None:
    # Given the registration run (the engine runs it when imported: modules loaded later in this
    # test process, by other tests, are registered here)
    register()

    # When the dataclasses of the loaded modules of `shared` are listed, Then each is pickled through
    # its constructor (the domain's nested ones included)
    loaded = [
        value
        for name, module in list(sys.modules.items())
        if module is not None and name.startswith(("shared.domain", "shared.planner", "shared.local.sim"))
        for value in list(vars(module).values())
        if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)
    ]
    assert len(loaded) > 50
    assert [cls for cls in loaded if cls not in copyreg.dispatch_table] == []
