"""GPU faults in the replay (`simulate --gpu-failures-per-gpu-day`), repaired by the real planner.

Setting as test_sim_engine: one group of 8-GPU nodes (max 16), boot 300 s, ticks every 60 s,
policy.repair defaults (AcceleratedHardwareReady toleration 600 s), cordon settle 30 s. Fault times
are the nodes' own seeded draws: at 1 fault per GPU-day, seed 1, the first node (registered at
300) fails 3,036 s after it registered, at 3336, and the second one 5,023 s after it did.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from shared.config import load_config
from shared.formats.kubernetes import nodes_from_list
from shared.local.cli import main
from shared.local.sim.engine import Replay, SimOptions, SimResult, simulate
from shared.local.sim.faults import FAULT_CONDITION, fault_rng, reports_fault
from shared.local.sim.report import build_report, report_table
from shared.local.sim.scheduler import Scoring
from tests.builders import a100_group, config, node
from tests.unit.test_sim_engine import HOUR, _fragmented_pair, _mixed_config, _mixed_trace, jobs, scaler

ROOT = Path(__file__).resolve().parents[2]
BASELINE = str(ROOT / "examples" / "sim-config.yaml")
NO_REPAIR = str(ROOT / "examples" / "sim-config-no-repair.yaml")
FAULTY = SimOptions(gpu_failures_per_gpu_day=1.0, fault_seed=1)
FAULT_AT = 3336


def test_the_draws_are_the_nodes_own_and_reproducible() -> None:
    # The first node's draw at 1 fault/GPU-day (8 GPUs): the time the module docstring states
    assert int(fault_rng(1, "ip-0000001.a100").expovariate(8 / 86400)) == FAULT_AT - 300
    assert fault_rng(1, "n").random() == fault_rng(1, "n").random() != fault_rng(2, "n").random()


@pytest.mark.parametrize("seed", [3, 8])
def test_rate_zero_is_the_replay_without_faults(seed: int) -> None:
    # Given a mixed trace replayed without fault options, and with rate 0 and another seed
    rng = random.Random(seed)
    cfg, trace = _mixed_config(rng), _mixed_trace(rng)
    plain = build_report(Replay(trace, cfg, SimOptions()).run())
    zero = build_report(Replay(trace, cfg, SimOptions(fault_seed=42)).run())
    # Then the reports are the same, with no faults section
    for report in (plain, zero):
        report["simulation"].pop("wall_seconds")
        report["simulation"].pop("jobs_per_second")
    assert plain == zero
    assert "faults" not in plain


def test_a_fault_restarts_the_job_and_repair_replaces_the_idle_broken_node() -> None:
    # Given one 8-GPU job of 1 h, started at 300 on the first node, which fails at 3336
    result = simulate(jobs((0, 3600, 8)), scaler(), FAULTY)
    faults = result.faults
    assert faults is not None
    # Then the job fails and is resubmitted: the broken node (7 GPUs left, room not counted) is no
    # place for it, a second node is bought at the tick of 3360 and it starts again there at 3660
    assert faults.faults == 1
    assert faults.jobs_restarted == 1
    assert result.waits == [3660]
    assert faults.lost_work_gpu_seconds == 8 * (FAULT_AT - 300)
    # The idle broken node is replaced once its AcceleratedHardwareReady=False is 600 s old: at the
    # tick of 3960 (the group no longer needs it: desired lowered)
    assert faults.repaired == 1
    assert faults.broken_gpu_seconds == 8 * (3960 - FAULT_AT)
    assert result.started == result.jobs == 1
    assert result.groups[0].pods_lost == 0


def test_a_busy_broken_node_is_cordoned_for_health_and_replaced_once_empty() -> None:
    # Given the same fault, and a 1-GPU job of 2 h arriving at 3400, which kube-scheduler puts on the
    # broken node's 7 remaining GPUs (the only room until the second node registers at 3660)
    result = simulate(jobs((0, 3600, 8), (3400, 7200, 1)), scaler(), FAULTY)
    faults = result.faults
    assert faults is not None
    # Then at the tick of 3960 the busy broken node is cordoned and tainted, never terminated busy
    assert faults.repair_cordons == 1
    assert result.groups[0].pods_lost == 0
    assert result.waits == [0, 3660]
    # and it is replaced at the first tick after the job finished (10600): 10620
    assert faults.repaired == 1
    assert faults.broken_gpu_seconds == 8 * (10620 - FAULT_AT)
    # Its GPUs the job does not use are idle on a broken node (the withdrawn one included), not
    # held by an attrition mark: 8 from the fault to 3400, 7 beside the job to 10600, 8 to 10620
    group = result.groups[0]
    assert group.broken_idle_gpu_seconds == 8 * (3400 - FAULT_AT) + 7 * 7200 + 8 * 20
    assert group.held_gpu_seconds == 0


def test_without_repair_the_broken_node_stays_to_the_end() -> None:
    # Given the same fault with policy.repair.enabled false
    result = simulate(jobs((0, 3600, 8)), scaler(repair={"enabled": False}), FAULTY)
    faults = result.faults
    assert faults is not None
    # Then the job still restarts on a new node (the broken node's room is not counted, and its
    # dropped GPU does not shrink the group's template), but the broken node is never replaced
    assert result.waits == [3660]
    assert faults.repaired == 0
    assert faults.broken_gpu_seconds == 8 * (result.end - result.start - FAULT_AT)
    repaired = simulate(jobs((0, 3600, 8)), scaler(), FAULTY)
    assert repaired.faults is not None
    assert repaired.faults.broken_gpu_seconds < faults.broken_gpu_seconds
    assert repaired.provisioned_gpu_seconds < result.provisioned_gpu_seconds


def test_a_job_a_fault_killed_and_that_never_ran_again_needs_no_ideal_gpu_hour() -> None:
    # Given a group of at most one node, repair off, and a 100-hour whole-node job whose node fails
    # (its GPU dropped: the broken node stays and the job never fits anywhere again)
    cfg = config(
        node_groups=[a100_group(price_per_hour=32.77, max_size=1)],
        policy={"cordon_settle_seconds": 30, "repair": {"enabled": False}},
    )
    result = simulate(jobs((0, 360_000, 8), (100, 600, 1)), cfg, FAULTY)
    # Then it counts as a job that never started (its wait is gone from the waits), and the ideal
    # holds only the small job's GPU-hours: the killed job must not make the replay look efficient
    assert result.faults is not None and result.faults.jobs_restarted == 1
    assert result.started == 1
    assert result.ideal_gpu_seconds == 600


def test_the_same_seed_gives_the_same_faults() -> None:
    # Given a mixed trace with frequent faults, replayed twice with one seed and once with another
    rng = random.Random(5)
    cfg, trace = _mixed_config(rng), _mixed_trace(rng)
    runs = [
        build_report(simulate(trace, cfg, SimOptions(gpu_failures_per_gpu_day=2.0, fault_seed=seed)))
        for seed in (1, 1, 2)
    ]
    # Then the two replays with seed 1 agree figure for figure; every job still starts
    for report in runs:
        report["simulation"].pop("wall_seconds")
        report["simulation"].pop("jobs_per_second")
        assert report["safety"]["pods_lost"] == 0
    assert runs[0] == runs[1]
    assert runs[0]["faults"]["faults"] > 0
    assert runs[0]["faults"] != runs[2]["faults"]


def test_a_faulty_node_reports_the_condition_and_a_dropped_gpu() -> None:
    # Given a healthy 8-GPU node, as its GPU fails at 3336
    healthy = nodes_from_list({"kind": "NodeList", "items": [node("n1", "i-1")]})[0]
    broken = reports_fault(healthy, FAULT_AT)
    # Then AcceleratedHardwareReady is False since the fault, and one GPU left allocatable
    condition = next(c for c in broken.conditions if c.type == FAULT_CONDITION)
    assert condition.status == "False"
    assert broken.lost_devices.gpus == 1
    assert broken.allocatable.gpus == 7


def test_cli_compare_repair_on_and_off_shows_what_repair_saves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a trace of one long whole-node job and a fault rate high enough for its node to fail
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_time,duration_seconds,gpus\n0,3600,8\n0,86400,8\n", encoding="utf-8")
    args = ["simulate", "--trace", str(trace), "--config", BASELINE, "--compare", NO_REPAIR]
    fault_args = ["--gpu-failures-per-gpu-day", "1", "--fault-seed", "1"]
    # When simulated as JSON, then as a table
    assert main([*args, *fault_args, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main([*args, *fault_args]) == 0
    table = capsys.readouterr().out
    # Then both reports count faults, and repair on leaves fewer GPU-hours on broken nodes
    baseline, candidate = document["baseline"]["faults"], document["candidate"]["faults"]
    assert baseline["faults"] >= 1 and baseline["repaired"] >= 1 and candidate["repaired"] == 0
    broken = document["difference"]["gpu_hours_on_broken_nodes"]
    assert broken["candidate"] > broken["baseline"]
    assert any(line.startswith("GPU-h on broken nodes") for line in table.splitlines())
    assert any(line.startswith("nodes repaired") for line in table.splitlines())


def test_cli_rejects_a_negative_rate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--trace", "t.csv", "--config", BASELINE, "--gpu-failures-per-gpu-day", "-1"])
    assert "expected a number >= 0" in capsys.readouterr().err


def test_skipping_reconciles_gives_the_same_faults_and_repairs_as_every_tick() -> None:
    # Given a mixed trace with frequent faults
    rng = random.Random(5)
    cfg, trace = _mixed_config(rng), _mixed_trace(rng)
    options = {"gpu_failures_per_gpu_day": 2.0, "fault_seed": 3}
    # When replayed with and without skipping reconciles that cannot change anything
    fast = build_report(Replay(trace, cfg, SimOptions(**options)).run())
    slow = build_report(Replay(trace, cfg, SimOptions(every_tick=True, **options)).run())
    # Then every figure is the same: the toleration's end wakes the planner like any threshold
    fast.pop("simulation")
    slow.pop("simulation")
    assert fast["faults"]["repaired"] > 0
    assert fast == slow


def _idle_gpu_seconds(result: SimResult) -> int:
    return sum(
        g.booting_gpu_seconds
        + g.empty_gpu_seconds
        + g.fragmented_gpu_seconds
        + g.held_gpu_seconds
        + g.broken_idle_gpu_seconds
        for g in result.groups
    )


@pytest.mark.parametrize("seed", [1, 4])
def test_gpu_time_adds_up_with_faults(seed: int) -> None:
    # Given a mixed trace with frequent faults (runs killed, busy broken nodes cordoned, GPUs withdrawn)
    rng = random.Random(5)
    cfg, trace = _mixed_config(rng), _mixed_trace(rng)
    result = simulate(trace, cfg, SimOptions(gpu_failures_per_gpu_day=2.0, fault_seed=seed))
    faults = result.faults
    assert faults is not None and faults.jobs_restarted > 0 and faults.repair_cordons > 0
    assert result.started == result.jobs
    # Then the GPU time used is the groups' and holds the lost work beyond the ideal
    assert result.used_gpu_seconds == sum(g.busy_gpu_seconds for g in result.groups)
    assert result.used_gpu_seconds == result.ideal_gpu_seconds + faults.lost_work_gpu_seconds
    # and provisioned is used plus every idle cause, the withdrawn GPUs of broken nodes included
    assert result.provisioned_gpu_seconds == result.used_gpu_seconds + _idle_gpu_seconds(result)
    assert sum(g.broken_idle_gpu_seconds for g in result.groups) > 0
    report = build_report(result)["gpu_hours"]
    idle = sum(v for k, v in report.items() if k.startswith("idle_"))
    assert abs(report["idle"] - idle) < 0.05  # rounding of each figure to 0.01


def test_a_moved_job_that_a_fault_kills_starts_again_and_counts_one_start() -> None:
    # Given every job checkpointing and migration on; at 0.5 faults per GPU-day, seed 1, a node
    # fails under a job that was moved there (its run's start is its restart, not its first start)
    cfg = scaler(attrition={"enabled": False, "spare_gpus": 0}, migration={"enabled": True})
    options = SimOptions(
        checkpointable=1.0, scoring=Scoring.LEAST_ALLOCATED, gpu_failures_per_gpu_day=0.5, fault_seed=1
    )
    result = simulate(_fragmented_pair(), cfg, options)
    faults = result.faults
    assert faults is not None and faults.jobs_restarted >= 1
    assert result.moves_per_job
    # Then every job ran to its end, each started once and with one wait
    assert result.started == result.jobs == len(result.waits) == 3
    # and the GPU time used is the ideal, the moves' losses and the runs the fault killed
    moved = sum(g.migration_lost_gpu_seconds for g in result.groups)
    assert result.used_gpu_seconds == result.ideal_gpu_seconds + moved + faults.lost_work_gpu_seconds


def test_a_repair_paused_by_too_many_unhealthy_nodes_is_reported_with_its_reason() -> None:
    # Given a 1-GPU job of 10 days (its node fails at 22 h; kube-scheduler restarts the job on the
    # broken node's other GPUs, so repair cordons it and waits for the job), then hourly 8-GPU jobs
    # whose nodes come and go; the tenth node fails idle at 56 h: 2 of 3 nodes unhealthy, above
    # policy.repair.max_unhealthy_fraction (20 %, rounded up: 1 node)
    trace = jobs((0, 240 * HOUR, 1), *((48 * HOUR + i * HOUR, HOUR, 8) for i in range(20)))
    result = simulate(trace, load_config(BASELINE), SimOptions(gpu_failures_per_gpu_day=0.1))
    report = build_report(result)
    faults = report["faults"]
    # Then no broken node is repaired, and the report says why and for how long
    assert (faults["faults"], faults["repaired"]) == (2, 0)
    assert faults["repair_paused_nodes"] == 2
    assert faults["repair_paused_seconds"] > 8 * 24 * HOUR
    reason = faults["repair_paused"]["v100"]["reason"]
    assert "repair paused: more than 1 of the group's 3 node(s) are unhealthy" in reason
    table = report_table([("c", report)]).splitlines()
    row = next(line for line in table if line.startswith("repair paused"))
    assert "2 broken node(s) kept: more than 20% of the group's nodes unhealthy" in row
    assert "policy.repair.max_unhealthy_fraction" in row
