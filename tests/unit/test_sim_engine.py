"""The discrete-event replay, checked against timelines computed by hand from the policy.

Common setting unless a test says otherwise: one group of 8-GPU nodes (95 cores, 1100Gi, max 16),
traces start at 2020-01-01T00:00:00Z (a multiple of the 60 s tick, so t=0 is a scheduled
reconcile), boot 300 s, webhook reconcile 10 s after an arrival (deployment default), policy
idle_seconds 600, scale_down_delay_after_add 600, cordon_settle 30, delete delay 30.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shared.config import ScalerConfig, parse_config
from shared.domain.errors import ConfigError
from shared.local.sim.engine import Replay, SimOptions, SimResult, simulate
from shared.local.sim.entities import SimJob
from shared.local.sim.report import build_report
from shared.local.sim.scheduler import Scoring
from shared.local.sim.trace import TRACE_ORIGIN, Job, Trace, load_trace
from shared.local.sim.workload import default_sizing
from tests.builders import config

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
T0 = int(TRACE_ORIGIN.timestamp())
HOUR = 3600


def scaler(**policy: Any) -> ScalerConfig:
    return config(policy={"cordon_settle_seconds": 30, **policy})


def jobs(*specs: tuple[int, int, int]) -> Trace:
    """(submit offset, duration, gpus) per job."""
    return Trace("inline", "csv", tuple(Job(f"j{i}", T0 + s, d, g) for i, (s, d, g) in enumerate(specs)))


def run(trace: Trace, cfg: ScalerConfig | None = None, **options: Any) -> SimResult:
    return simulate(trace, cfg or scaler(), SimOptions(**options))


def test_two_whole_node_jobs_wait_one_boot_and_cost_exactly_their_idle_tail() -> None:
    # Given two 8-GPU jobs of 1 h submitted at t=0, and a scale-in limit that allows both nodes at once
    trace = load_trace(TRACES / "two_whole_node_jobs.csv")
    cfg = scaler(max_scale_in_fraction=1.0)

    # When replayed
    result = run(trace, cfg)

    # Then: the reconcile at t=0 (a scheduled tick) sets desired 0 -> 2; both instances launch at 0
    # and register at 300, where the scheduler binds both jobs: each waits exactly the boot time.
    assert result.waits == [300, 300]
    # Both finish at 3900 (the tick at 3900 records idle-since 3900); idle 600 s -> cordoned at the
    # tick of 4500 (the last scale-up, t=0, is older than 600 s); cordon settle 30 s -> terminated
    # (desired decremented) at the next tick, 4560. Each node ran 0 -> 4560 s, boot included.
    group = result.groups[0]
    assert group.node_seconds == 2 * 4560
    assert result.provisioned_gpu_seconds == 2 * 4560 * 8  # 20.27 GPU-hours
    assert result.used_gpu_seconds == result.ideal_gpu_seconds == 16 * HOUR
    assert (group.scale_ups, group.launched, group.terminated, group.cordons) == (1, 2, 2, 2)
    # Waste: 300 s booting and 660 s empty (3900 -> 4560) per node, nothing fragmented.
    assert group.booting_gpu_seconds == 2 * 300 * 8
    assert group.empty_gpu_seconds == 2 * 660 * 8
    assert group.fragmented_gpu_seconds == 0
    assert result.end - result.start == 4560
    report = build_report(result)
    assert report["gpu_hours"] == {
        "provisioned": 20.27,
        "used": 16.0,
        "ideal": 16.0,
        "idle": 4.27,
        "idle_booting": 1.33,
        "idle_empty_nodes": 2.93,
        "idle_fragmented": 0.0,
        "idle_held_by_marks": 0.0,
    }
    assert report["cost"] == round(2 * 4560 / HOUR * 32.77, 2)  # 83.02


def test_default_scale_in_limit_removes_one_node_per_run() -> None:
    # Given the same two jobs with the default max_scale_in_fraction 0.1:
    # the budget is max(1, floor(0.1 * 2)) = 1 node in progress, and a node cordoned but not yet
    # terminated uses it up.
    result = run(load_trace(TRACES / "two_whole_node_jobs.csv"))

    # Then node 1 is cordoned at 4500 (node 2 must wait: the budget is used) and terminated at 4560,
    # the run that frees the budget and cordons node 2; node 2 is terminated at 4620 (cordoned 60 s
    # before, >= the 30 s settle; the last termination 60 s before, >= the 30 s delay after delete).
    assert result.groups[0].node_seconds == 4560 + 4620
    assert result.provisioned_gpu_seconds == (4560 + 4620) * 8  # 20.40 GPU-hours
    assert result.waits == [300, 300]


def test_shorter_idle_threshold_provisions_less() -> None:
    # Given idle_seconds 120 instead of 600: cordon at 3900 + 120 = 4020, terminate at 4080
    trace = load_trace(TRACES / "two_whole_node_jobs.csv")
    short = run(trace, scaler(idle_seconds=120, max_scale_in_fraction=1.0))
    default = run(trace, scaler(max_scale_in_fraction=1.0))

    assert short.provisioned_gpu_seconds == 2 * 4080 * 8  # 18.13 GPU-hours
    assert short.provisioned_gpu_seconds < default.provisioned_gpu_seconds


@pytest.mark.parametrize(
    ("options", "wait"),
    [
        ({}, 310),  # the webhook reconcile runs 10 s after the arrival (queue delay), before the tick at 60
        ({"webhook_delay_seconds": 0}, 300),  # reconcile at the arrival itself
        ({"webhook": False}, 330),  # schedule only: the next tick is at 60
    ],
)
def test_wait_is_boot_plus_the_time_to_the_first_reconcile(options: dict[str, Any], wait: int) -> None:
    # Given one 8-GPU job submitted at t=30
    result = run(jobs((30, 600, 8)), **options)

    assert result.waits == [wait]


def test_no_duplicate_node_while_the_device_plugin_starts() -> None:
    # Given GPUs advertised 45 s after the node registers (the planner sees a booting node meanwhile)
    result = run(jobs((0, 600, 8)), gpu_delay_seconds=45)

    # Then the job waits boot + 45 s and a single node was bought
    assert result.waits == [345]
    assert result.groups[0].launched == 1


def test_gangs_and_remainders_are_placed_whole() -> None:
    # Given a 16-GPU job (2 pods of 8) and a 12-GPU job (8 + 4), both at t=0
    result = run(load_trace(TRACES / "gang_and_remainder.csv"))

    # Then four nodes are bought at t=0 (2 + 1 + 1: the 4-GPU pod does not fit the full nodes)
    # and both gangs start together when they register at 300
    assert result.pods == 4
    assert result.waits == [300, 300]
    assert result.groups[0].launched == 4
    assert result.used_gpu_seconds == 16 * 3600 + 12 * 1800
    # The 4-GPU pod leaves 4 GPUs of its node free for its 1800 s
    assert result.groups[0].fragmented_gpu_seconds == 4 * 1800


def test_a_gang_is_never_started_partially() -> None:
    # Given room for two nodes, an 8-GPU job A and then a 16-GPU gang B (2 x 8), both at t=0,
    # and a long idle threshold so no node is removed while B waits
    base = scaler(idle_seconds=7200)
    cfg = config(
        node_groups=[{**base.node_groups[0].model_dump(mode="json"), "max_size": 2}],
        policy=base.policy.model_dump(mode="json"),
    )
    result = run(jobs((0, HOUR, 8), (0, HOUR, 16)), cfg)

    # Then at t=0 the planner buys 2 nodes (for B, the larger unit; A is at max size). At 300 the
    # scheduler binds A (older) to the first node; B needs both nodes, so none of its pods starts
    # and the second node stays empty until A finishes at 3900, when B starts whole.
    assert result.waits == [300, 3900]
    series = result.series
    assert series is not None
    waiting = [busy[0] for t, busy in zip(series.times, series.busy, strict=True) if 300 <= t - T0 < 3900]
    assert waiting and max(waiting) == 8


def test_capacity_shortage_backs_off_exponentially_and_waits_for_room() -> None:
    # Given EC2 runs only one instance of the group, and two 8-GPU jobs of 1 h at t=0
    result = run(jobs((0, HOUR, 8), (0, HOUR, 8)), capacity={"a100": 1})

    # Then at 0 desired goes to 2, the second launch fails: backoff 300 s. Each time the backoff
    # ends the planner asks again and the launch fails again: at 300 (backoff 600 s, to 900), at 900
    # (1200 s, to 2100), at 2100 (capped at 1800 s, to 3900). The second job starts on the first
    # node when the first job finishes at 3900.
    group = result.groups[0]
    assert result.waits == [300, 3900]
    assert group.launch_failures == 4
    assert group.peak_nodes == 1
    assert result.not_started == {}


def test_jobs_no_group_can_run_are_reported_and_the_replay_ends() -> None:
    # Given a 24-GPU job (3 nodes) and a group of at most 2 nodes
    base = scaler()
    cfg = config(node_groups=[{**base.node_groups[0].model_dump(mode="json"), "max_size": 2}])

    result = run(jobs((0, 60, 24), (0, 60, 1)), cfg)

    assert result.started == 1
    assert result.not_started == {"GangDoesNotFit": 1}
    assert not result.stalled


def test_instances_that_never_register_stop_the_replay_after_the_stall_limit() -> None:
    # Given a boot longer than the provisioning deadline: every instance is replaced before it registers
    cfg = scaler(max_node_provision_seconds=120)

    result = run(jobs((0, 60, 8)), cfg, boot_seconds=900, stall_seconds=2 * HOUR)

    assert result.stalled
    assert result.started == 0
    assert result.groups[0].replaced > 0


@pytest.mark.parametrize("gap", [10 * HOUR, 10 * 24 * HOUR])
def test_a_job_after_a_quiet_spell_longer_than_the_stall_limit_is_planned_and_started(gap: int) -> None:
    # Given a job, then nothing for longer than the 6 h stall limit, then another job
    result = run(jobs((0, HOUR, 1), (gap, 100, 2)))

    # Then the late job is planned and started like the first one, and the replay does not stall
    assert result.started == 2
    assert result.not_started == {}
    assert not result.stalled
    assert result.end > T0 + gap


def test_a_late_job_no_node_can_hold_is_reported_by_the_planners_reason_not_as_never_planned() -> None:
    # Given a late job whose cpu no node has (100 cores per GPU on 95-core nodes)
    cfg = scaler()
    sizing = replace(default_sizing(cfg), cpu_per_gpu=100_000)

    result = run(jobs((0, 60, 1), (10 * HOUR, 100, 1)), cfg, sizing=sizing)

    # Then both are reported with the planner's reason, and the replay ends without a stall
    assert result.not_started == {"LargerThanAnyNode": 2}
    assert not result.stalled


def test_right_size_routes_each_job_to_the_smallest_nodes_that_hold_it() -> None:
    # Given 1-GPU and 8-GPU groups at the same price per GPU, told apart by a label
    def group(gpus: int, cpu: str, memory: str) -> dict[str, Any]:
        return {
            "name": f"x{gpus}",
            "asg_name": f"pool-x{gpus}",
            "allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)},
            "labels": {"pool": f"x{gpus}"},
            "price_per_hour": 3.06 * gpus,
        }

    cfg = parse_config(
        {"cluster_name": "pools", "node_groups": [group(1, "7.5", "58Gi"), group(8, "63", "480Gi")]}
    )

    # When a 1-, an 8- and a 12-GPU job are replayed with --right-size
    result = run(jobs((0, 600, 1), (0, 600, 8), (0, 600, 12)), cfg, right_size=True)

    # Then the 1-GPU job gets a 1-GPU node; the 8-GPU job and the 12-GPU gang (8 + 4) get 8-GPU nodes
    x1, x8 = result.groups
    assert (x1.launched, x8.launched) == (1, 3)
    assert result.waits == [300, 300, 300]
    assert x8.fragmented_gpu_seconds == 4 * 600  # the 4-GPU remainder pod


def test_headroom_that_ec2_cannot_provide_does_not_replay_forever() -> None:
    # Given a group that wants one spare node but EC2 gives none: launches fail after every backoff
    base = scaler()
    cfg = config(node_groups=[{**base.node_groups[0].model_dump(mode="json"), "headroom_nodes": 1}])

    result = run(jobs((0, 60, 1)), cfg, capacity={"a100": 0}, stall_seconds=HOUR)

    # Then the replay gives up once nothing progresses (and says so)
    assert result.stalled
    assert result.groups[0].launch_failures > 1


def test_a_long_idle_threshold_is_waited_out_not_taken_for_a_stall() -> None:
    # Given idle_seconds of 8 hours, longer than the default stall limit of 6 hours
    result = run(jobs((0, 60, 8)), scaler(idle_seconds=8 * HOUR))

    # Then the idle node is still scaled down: registered 300, idle from 360, cordoned at
    # 360 + 28800 = 29160, terminated at the next tick, 29220
    assert not result.stalled
    assert result.groups[0].terminated == 1
    assert result.groups[0].node_seconds == 29220


def test_unknown_group_in_the_trace_and_groups_without_a_shape_are_config_errors() -> None:
    trace = Trace("t.csv", "csv", (Job("x", T0, 60, 1, group="h100"),))
    with pytest.raises(ConfigError, match="job x: unknown node group 'h100'; configured: a100"):
        Replay(trace, scaler())
    no_shape = config(
        node_groups=[{"name": "a100", "asg_name": "a", "instance_type": "p4d.24xlarge", "labels": {}}]
    )
    with pytest.raises(ConfigError, match="needs `allocatable`"):
        Replay(jobs((0, 60, 1)), no_shape)


def _mixed_config(rng: random.Random, migration: dict[str, Any] | None = None) -> ScalerConfig:
    shape = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"}
    return parse_config(
        {
            "cluster_name": "mixed",
            "node_groups": [
                {
                    "name": "a100",
                    "asg_name": "mixed-a100",
                    "allocatable": shape,
                    "labels": {"gpu": "a100"},
                    "price_per_hour": 32.77,
                    "max_size": rng.choice([3, 6]),
                    "headroom_nodes": rng.choice([0, 1]),
                },
                {
                    "name": "l4",
                    "asg_name": "mixed-l4",
                    "allocatable": {"cpu": "47", "memory": "180Gi", "nvidia.com/gpu": "4"},
                    "labels": {"gpu": "l4"},
                    "price_per_hour": 8.0,
                    "max_size": 4,
                    "priority": 1,
                },
            ],
            "policy": {
                "idle_seconds": rng.choice([0, 120, 600]),
                "scale_down_delay_after_add_seconds": rng.choice([0, 600]),
                "new_pod_delay_seconds": rng.choice([0, 20]),
                "max_scale_in_fraction": rng.choice([0.1, 1.0]),
                "migration": migration or {},
            },
        }
    )


def _mixed_trace(
    rng: random.Random, count: int = 40, durations: tuple[int, ...] = (30, 200, 900, 3600)
) -> Trace:
    specs: list[Job] = []
    t = T0 + 20
    for i in range(count):
        t += rng.choice([0, 5, 30, 90, 400, 1200])
        gpus = rng.choice([1, 1, 2, 4, 8, 12, 16])
        selector = rng.choice([(), (("gpu", "a100"),), (("gpu", "l4"),)]) if gpus <= 4 else ()
        specs.append(Job(f"j{i}", t, rng.choice(durations), gpus, selector=selector))
    return Trace("mixed", "csv", tuple(specs))


@pytest.mark.parametrize("seed", [3, 8])
def test_skipping_reconciles_gives_the_same_replay_as_running_every_tick(seed: int) -> None:
    # Given a mixed trace (gangs, selectors, two groups, headroom, capacity shortage, GPU delay)
    rng = random.Random(seed)
    cfg = _mixed_config(rng)
    trace = _mixed_trace(rng)
    options = {
        "gpu_delay_seconds": rng.choice([0, 45]),
        "webhook": rng.choice([True, False]),
        "capacity": rng.choice([{}, {"a100": 2}]),
    }

    # When replayed with and without skipping
    fast = Replay(trace, cfg, SimOptions(**options)).run()
    slow = Replay(trace, cfg, SimOptions(every_tick=True, **options)).run()

    # Then every figure is the same, with fewer planner runs
    fast_report, slow_report = build_report(fast), build_report(slow)
    assert fast_report.pop("simulation")["planner_runs"] < slow_report.pop("simulation")["planner_runs"]
    assert fast_report == slow_report
    assert fast.series == slow.series


@pytest.mark.parametrize(
    ("seed", "estimates", "stamps"), [(1, False, False), (3, True, False), (1, False, True), (3, True, True)]
)
def test_skipping_reconciles_gives_the_same_replay_as_running_every_tick_with_migration(
    seed: int, estimates: bool, stamps: bool
) -> None:
    # Given the mixed trace with longer jobs, most of them checkpointing, and migration on: moves
    # wait for a group's delay after a scale-up, a job's first checkpoint, the per-hour budget and
    # the saving to beat min_gain x the loss, all of which time crosses without any event
    rng = random.Random(seed)
    migration = {
        "enabled": True,
        "restart_seconds": 60,
        "min_gain": rng.choice([1.1, 2.0]),
        "max_nodes_per_hour": rng.choice([1, 4]),
    }
    cfg = _mixed_config(rng, migration)
    trace = _mixed_trace(rng, 50, durations=(200, 900, 3600, 4 * HOUR, 12 * HOUR))
    options = {
        "checkpointable": 0.7,
        "checkpoint_interval_seconds": 600,
        "restart_seconds": 60,
        "runtime_estimates": estimates,
        "gpu_delay_seconds": rng.choice([0, 45]),
        "last_checkpoint": stamps,  # the jobs write their last save: the loss drops at each save
    }

    # When replayed with and without skipping
    fast = Replay(trace, cfg, SimOptions(**options)).run()
    slow = Replay(trace, cfg, SimOptions(every_tick=True, **options)).run()

    # Then every figure is the same, with fewer planner runs, and jobs did move
    fast_report, slow_report = build_report(fast), build_report(slow)
    assert fast_report.pop("simulation")["planner_runs"] < slow_report.pop("simulation")["planner_runs"]
    assert fast_report["migration"]["migrations"] > 0
    assert fast_report == slow_report
    assert fast.series == slow.series


@pytest.mark.parametrize(
    ("min_gain", "interval", "delay_after_add"),
    [(50.0, 900, 600), (2.0, 5000, 600), (2.0, 900, 4500)],
    ids=["the saving passes min_gain", "the first checkpoint", "the delay after a scale-up ends"],
)
def test_a_move_that_time_alone_allows_is_made_when_running_every_tick_would_make_it(
    min_gain: float, interval: int, delay_after_add: int
) -> None:
    # Given a checkpointing 1-GPU job of 20 h alone on a node (job 0, the only one that checkpoints at
    # 0.2), and from 4000 a 7-GPU job on the other node: the 1-GPU job's move empties a node, but only
    # once its saving beats min_gain x the loss (8 GPUs x its age > 50 x 960 GPU-seconds: at 6001), it
    # has saved once (at 5000), or the group's delay after its scale-up at 0 ended (at 4500): instants
    # with no event near them
    trace = jobs((0, 20 * HOUR, 1), (0, HOUR, 8), (4000, 20 * HOUR, 7))
    migration = {"enabled": True, "min_gain": min_gain, "restart_seconds": 60}
    cfg = scaler(
        attrition={"enabled": False, "spare_gpus": 0},
        migration=migration,
        scale_down_delay_after_add_seconds=delay_after_add,
    )
    options = {"checkpointable": 0.2, "checkpoint_interval_seconds": interval, "restart_seconds": 60}

    # When replayed with and without skipping
    fast = Replay(trace, cfg, SimOptions(**options)).run()
    slow = Replay(trace, cfg, SimOptions(every_tick=True, **options)).run()

    # Then the move is made at the same tick: the same figures
    fast_report, slow_report = build_report(fast), build_report(slow)
    fast_report.pop("simulation")
    slow_report.pop("simulation")
    assert fast_report["migration"]["migrations"] == 1
    assert fast_report == slow_report


def test_a_job_that_writes_its_last_checkpoint_is_moved_right_after_a_save() -> None:
    # Given a checkpointing 1-GPU job of 20 h alone on a node (saving every 900 s) and from 4000 a
    # 7-GPU job on the other node, min_gain 200: from the interval alone the move is worth it once
    # 8 GPUs x its age > 200 x (900 + 60) GPU-seconds (age 24,000 s); knowing when the job saved,
    # right after a save, when 8 x its age > 200 x (the seconds since + 60): no event near it
    trace = jobs((0, 20 * HOUR, 1), (0, HOUR, 8), (4000, 20 * HOUR, 7))
    migration = {"enabled": True, "min_gain": 200.0, "restart_seconds": 60}
    cfg = scaler(attrition={"enabled": False, "spare_gpus": 0}, migration=migration)
    options = {"checkpointable": 0.2, "checkpoint_interval_seconds": 900, "restart_seconds": 60}

    # When replayed with the job writing backlog-scaler/last-checkpoint, with and without skipping,
    # and with the interval alone
    fast = Replay(trace, cfg, SimOptions(last_checkpoint=True, **options)).run()
    slow = Replay(trace, cfg, SimOptions(last_checkpoint=True, every_tick=True, **options)).run()
    blind = Replay(trace, cfg, SimOptions(**options)).run()

    # Then the move is made at the same tick with and without skipping
    fast_report, slow_report = build_report(fast), build_report(slow)
    assert fast_report.pop("simulation")["last_checkpoint"] is True
    slow_report.pop("simulation")
    assert fast_report["migration"]["migrations"] == 1
    assert fast_report == slow_report
    # And hours before the interval alone allows it, losing little more than the restart
    assert build_report(blind)["migration"]["migrations"] == 1
    assert fast.provisioned_gpu_seconds < blind.provisioned_gpu_seconds
    lost = sum(g.migration_lost_gpu_seconds for g in fast.groups)
    assert lost < 1 * (60 + 60), lost


def test_a_job_saves_every_interval_of_work_from_the_start_of_its_run() -> None:
    saver = SimJob(0, Job("j", 0, 10 * HOUR, 1))
    assert saver.last_save(5000, 900, 60) is None  # not running
    saver.start = 300
    assert saver.last_save(300 + 899, 900, 60) is None and saver.saved_seconds(300 + 899, 900, 60) == 0
    assert saver.last_save(300 + 900, 900, 60) == 1200
    assert saver.last_save(300 + 2000, 900, 60) == 2100 and saver.saved_seconds(2300, 900, 60) == 1800
    saver.moves = 1  # a moved job's run begins with its restart
    assert saver.last_save(300 + 959, 900, 60) is None
    assert saver.last_save(300 + 960, 900, 60) == 1260


def test_provisioned_gpu_time_is_used_plus_booting_empty_and_fragmented() -> None:
    rng = random.Random(5)
    result = Replay(_mixed_trace(rng, 60), _mixed_config(rng), SimOptions(gpu_delay_seconds=30)).run()

    waste = sum(
        g.booting_gpu_seconds + g.empty_gpu_seconds + g.fragmented_gpu_seconds + g.held_gpu_seconds
        for g in result.groups
    )
    assert result.provisioned_gpu_seconds == result.used_gpu_seconds + waste
    assert result.used_gpu_seconds == result.ideal_gpu_seconds  # every job ran


def _node_lifetimes(scoring: Scoring) -> int:
    # Jobs: A 8 GPUs and B 2 GPUs for 2 h at t=0 (A: 1 h), then C 1 GPU for 2 h at t=3910
    trace = jobs((0, HOUR, 8), (0, 2 * HOUR, 2), (3910, 2 * HOUR, 1))
    result = run(trace, scaler(attrition={"enabled": False}), scoring=scoring)
    return result.groups[0].node_seconds


def test_scorings_place_the_same_pod_where_kube_scheduler_would() -> None:
    # Given two nodes bought at t=0 (registered at 300): A takes the first (a tie between two empty
    # nodes goes to the older), B the second. A ends at 3900, so when C arrives at 3910 the first
    # node is empty and the second runs B (2 of 8 GPUs).
    # LeastAllocated (and first-fit, the older node) put C on the empty node: it lives until C ends
    # (11110; idle since the tick at 11160, cordoned at 11760, terminated at 11820); the second node
    # ends with B (7500; idle 600 s -> cordoned at 8100, terminated at 8160).
    assert _node_lifetimes(Scoring.LEAST_ALLOCATED) == 11820 + 8160
    assert _node_lifetimes(Scoring.FIRST_FIT) == 11820 + 8160
    # MostAllocated puts C beside B: the empty node is cordoned at 4500 and terminated at 4560,
    # the other lives until C ends.
    assert _node_lifetimes(Scoring.MOST_ALLOCATED) == 4560 + 11820


def _fragmented_pair() -> Trace:
    """An 8-GPU job of 1 h and a 1-GPU job of 20 h at t=0 (two nodes), then a 7-GPU job of 20 h at
    t=4000, after the first ended: least-allocated puts it on the emptied node, so two nodes run 1
    and 7 GPUs for 20 hours."""
    return jobs((0, HOUR, 8), (0, 20 * HOUR, 1), (4000, 20 * HOUR, 7))


def test_a_moved_job_loses_the_work_since_its_last_checkpoint_and_restarts_after_the_delay() -> None:
    # Given every job checkpointing every 30 minutes, migration on, no spare room kept and no marks
    # (attrition would mark both nodes: no room to move onto)
    cfg = scaler(attrition={"enabled": False, "spare_gpus": 0}, migration={"enabled": True})
    options = {"checkpointable": 1.0, "scoring": Scoring.LEAST_ALLOCATED}
    moved = run(_fragmented_pair(), cfg, **options)
    still = run(_fragmented_pair(), scaler(attrition={"enabled": False}), **options)

    # Then one node is emptied by a move and given back: fewer GPU-hours than without migration
    report = build_report(moved)["migration"]
    assert report["migrations"] >= 1 and report["evicted_not_movable"] == 0
    assert moved.provisioned_gpu_seconds < still.provisioned_gpu_seconds
    # And the moved work is paid for: the lost work and the restart are GPU time used beyond the ideal
    lost = sum(g.migration_lost_gpu_seconds for g in moved.groups)
    assert moved.used_gpu_seconds == moved.ideal_gpu_seconds + lost
    assert report["restart_delay_p95"] >= 300 and report["most_moves_of_a_job"] <= 3
    # And every job finished, each counted once as started
    assert moved.started == 3 and len(moved.waits) == 3
