"""Trace loaders (Philly, ITP/ElasticFlow, Alibaba openb, generic CSV) and jobs as pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.domain.errors import ConfigError, InputError
from shared.domain.resources import CPU, GPU, MEMORY
from shared.local.sim.trace import (
    TRACE_ORIGIN,
    Job,
    detect_format,
    load_trace,
    parse_timestamp,
    parse_trace_time,
)
from shared.local.sim.workload import MIB, Sizing, default_sizing
from tests.builders import config

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
ORIGIN = int(TRACE_ORIGIN.timestamp())


def test_philly_rows_become_jobs_in_submit_order() -> None:
    # Given the Philly columns timestamp,duration,num_gpus,gpu_time,cluster
    trace = load_trace(TRACES / "philly_small.csv", "philly")

    # Then every row is a job, times in UTC epoch seconds, durations rounded up to the second
    assert trace.format == "philly"
    assert [j.gpus for j in trace.jobs] == [1, 8, 2, 16, 4]
    assert trace.jobs[0].submit == parse_timestamp("2017-10-01T00:00:30Z")
    assert trace.jobs[2].duration == 61  # 60.5 s
    assert trace.jobs[1].cluster == "bbb222"
    assert trace.has_clusters


def test_philly_cluster_window_and_limit_filters() -> None:
    # When one virtual cluster, a window and a limit are asked for
    one_cluster = load_trace(TRACES / "philly_small.csv", cluster="aaa111")
    window = load_trace(
        TRACES / "philly_small.csv",
        start=parse_trace_time("2017-10-01T00:01:00Z"),
        end=parse_trace_time("2017-10-01 01:00:00"),
    )
    limited = load_trace(TRACES / "philly_small.csv", limit=2)

    # Then the cluster filter keeps its jobs, the window is [start, end), the limit the first N
    assert [j.gpus for j in one_cluster.jobs] == [1, 2, 4]
    assert [j.gpus for j in window.jobs] == [8, 2]
    assert [j.gpus for j in limited.jobs] == [1, 8]


def test_limit_keeps_the_earliest_jobs_whatever_the_row_order(tmp_path: Path) -> None:
    # Given a Philly trace whose rows are not in submit order (the real one is not either)
    path = tmp_path / "shuffled.csv"
    path.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,60,1,60,a\n"
        "2017-10-01 00:00:00,60,2,120,a\n"
        "2017-10-20 00:00:00,60,4,240,a\n"
        "2017-10-01 00:05:00,60,8,480,a\n",
        encoding="utf-8",
    )
    # When two jobs are asked for, Then they are the two submitted first, in submit order
    limited = load_trace(path, limit=2)
    assert [j.gpus for j in limited.jobs] == [2, 8]
    assert [j.submit for j in limited.jobs] == sorted(j.submit for j in load_trace(path).jobs)[:2]


def test_unknown_cluster_names_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"no jobs of cluster 'zzz'; clusters: aaa111, bbb222"):
        load_trace(TRACES / "philly_small.csv", cluster="zzz")


def test_cluster_filter_on_a_trace_without_clusters_is_an_error() -> None:
    with pytest.raises(InputError, match="has no cluster column"):
        load_trace(TRACES / "itp_small.csv", cluster="a")


def test_itp_times_are_seconds_from_the_trace_origin() -> None:
    # Given an ElasticFlow trace (submit_time column, extra columns ignored)
    trace = load_trace(TRACES / "itp_small.csv")

    assert trace.format == "itp"
    assert [(j.job_id, j.submit - ORIGIN, j.duration, j.gpus) for j in trace.jobs] == [
        ("0", 0, 1800, 1),
        ("1", 120, 7200, 8),
        ("2", 125, 301, 4),  # submit rounded down, duration up
    ]


def test_openb_skips_pods_without_times_and_cpu_only_pods_and_rounds_fractional_gpus() -> None:
    trace = load_trace(TRACES / "openb_small.csv")

    # Then duration = deletion - scheduled, submit = creation, cpu/memory come from the trace
    assert trace.format == "openb"
    assert [(j.job_id, j.submit - ORIGIN, j.duration, j.gpus) for j in trace.jobs] == [
        ("openb-pod-0000", 0, 3600, 1),
        ("openb-pod-0001", 60, 600, 1),
        ("openb-pod-0004", 300, 3600, 8),
    ]
    assert trace.jobs[0].cpu_millicores == 12000 and trace.jobs[0].memory_mib == 16384
    assert [j.fractional for j in trace.jobs] == [False, True, False]
    assert trace.notes == (
        "1 pod(s) without creation/scheduled/deletion time skipped",
        "1 CPU-only pod(s) skipped",
        "1 fractional-GPU pod(s) (gpu_milli < 1000) rounded up to 1 GPU",
    )


def test_generic_csv_reads_iso_times_groups_selectors_and_resources() -> None:
    trace = load_trace(TRACES / "generic_full.csv")

    assert trace.format == "csv"
    eval_b, tiny, pinned = trace.jobs[1:]
    assert trace.jobs[0].submit == parse_timestamp("2026-01-05T08:00:00Z")
    assert (eval_b.cpu_millicores, eval_b.memory_mib) == (4000, 32768)
    assert tiny.group == "l4"
    assert pinned.selector == (("gpu", "a100"),)
    assert pinned.submit == parse_timestamp("2026-01-05T08:07:30Z")  # naive means UTC


@pytest.mark.parametrize(
    ("header", "row", "message"),
    [
        (
            "timestamp,duration,num_gpus,gpu_time,cluster",
            "2017-10-01 00:00:31,abc,1,1,a",
            "row 3: duration: not a number: 'abc'",
        ),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster",
            "yesterday,60,1,60,a",
            "row 3: timestamp: not a timestamp: 'yesterday'",
        ),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster",
            "2017-10-01 00:00:31,60,,60,a",
            "row 3: num_gpus: missing value",
        ),
        ("job_id,num_gpu,submit_time,duration", "7,1.5,10,60", "row 3: num_gpu: not a whole number: '1.5'"),
        ("job_id,num_gpu,submission_time,duration", "7,1,later,60", "row 3: submission_time: not a number"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time",
            "p,1000,1024,1,1000,,LS,Succeeded,0,50,100",
            "row 3: deletion_time: before scheduled_time: 50 < 100",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time",
            "p,lots,1024,1,1000,,LS,Succeeded,0,500,100",
            "row 3: cpu_milli: not a number: 'lots'",
        ),
        (
            "submit_time,duration_seconds,gpus",
            "soon,60,1",
            "row 3: submit_time: neither seconds nor an ISO 8601 timestamp: 'soon'",
        ),
        ("submit_time,duration_seconds,gpus", "0,-5,1", "row 3: duration_seconds: negative: '-5'"),
        ("submit_time,duration_seconds,gpus,selector", "0,5,1,gpu", "row 3: selector: expected key=value"),
        ("submit_time,duration_seconds,gpus", "0,5,0", "row 3: gpus: 0 GPUs needs cpu_millicores"),
        ("submit_time,duration_seconds,gpus", "inf,5,1", "row 3: submit_time: more than a century"),
        ("submit_time,duration_seconds,gpus", "1e15,5,1", "row 3: submit_time: more than a century"),
        ("submit_time,duration_seconds,gpus", "9999-01-01T00:00:00Z,5,1", "row 3: submit_time: after 2200"),
        ("submit_time,duration_seconds,gpus", "0,1e15,1", "row 3: duration_seconds: more than a century"),
        ("job_id,num_gpu,submit_time,duration", "7,1,1e15,60", "row 3: submit_time: more than a century"),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster",
            "2300-01-01 00:00:00,60,1,60,a",
            "row 3: timestamp: after 2200-01-01",
        ),
        # The replay's clock is a datetime the planner steps back from: year 1 overflowed it
        ("submit_time,duration_seconds,gpus", "0001-01-01T00:00:00Z,5,1", "row 3: submit_time: before 1900"),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster",
            "0001-01-01 00:00:00,60,1,60,a",
            "row 3: timestamp: before 1900-01-01",
        ),
        # A job is replayed as pods of at most a node each: 1e20 GPUs overflowed the pod count
        ("submit_time,duration_seconds,gpus", "0,5,1e20", "row 3: gpus: more than 100,000: '1e20'"),
        ("submit_time,duration_seconds,gpus,memory_mib", "0,5,1,1e300", "row 3: memory_mib: more than"),
    ],
    ids=[
        "philly-duration",
        "philly-timestamp",
        "philly-gpus",
        "itp-gpus",
        "itp-submit",
        "openb-times",
        "openb-cpu",
        "csv-submit",
        "csv-duration",
        "csv-selector",
        "csv-zero-gpus",
        "csv-infinite-submit",
        "csv-huge-submit",
        "csv-year-9999",
        "csv-huge-duration",
        "itp-huge-submit",
        "philly-far-future",
        "csv-year-1",
        "philly-year-1",
        "csv-1e20-gpus",
        "csv-huge-memory",
    ],
)
def test_malformed_rows_are_rejected_with_file_row_and_column(
    tmp_path: Path, header: str, row: str, message: str
) -> None:
    # Given a good first row (row 2; the header is row 1) and a bad second row
    good = {
        "timestamp": "2017-10-01 00:00:30,60,1,60,a",
        "job_id,num_gpu,submit_time": "6,1,0,60",
        "job_id,num_gpu,submission_time": "6,1,0,60",
        "name": "q,1000,1024,1,1000,,LS,Succeeded,0,500,100",
        "submit_time": "0,60,1" + (",gpu=a" if header.endswith("selector") else ""),
    }
    first = next(v for k, v in good.items() if header.startswith(k))
    path = tmp_path / "bad.csv"
    path.write_text(f"{header}\n{first}\n{row}\n", encoding="utf-8")

    # When it is loaded, Then the error names the file, the row and the column
    with pytest.raises(InputError) as caught:
        load_trace(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_trace_that_is_not_utf8_is_refused_naming_its_row(tmp_path: Path) -> None:
    # Given a trace whose third line holds bytes that are not UTF-8
    path = tmp_path / "latin.csv"
    path.write_bytes(b"submit_time,duration_seconds,gpus\n0,3600,1\n5,100,\xff\xfe\n")
    # When it is loaded, Then the error names the file and the row
    with pytest.raises(InputError, match=r"latin.csv: row 3: not UTF-8 text \(byte 0xff\)"):
        load_trace(path)


def test_missing_columns_and_unknown_headers_are_named(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("timestamp,num_gpus\n2017-10-01 00:00:00,1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"t.csv: philly trace: missing column\(s\): duration"):
        load_trace(path, "philly")
    with pytest.raises(InputError, match="cannot tell the trace format from the header") as caught:
        load_trace(path)
    assert "give --trace-format (" in str(caught.value)  # the simulate flag; --format is the output's
    with pytest.raises(InputError, match="cannot read"):
        load_trace(tmp_path / "absent.csv")


def test_format_detection_from_headers() -> None:
    assert detect_format(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]) == "philly"
    assert detect_format(["job_id", "num_gpu", "submit_time", "duration"]) == "itp"
    assert detect_format(["submit_time", "duration_seconds", "gpus"]) == "csv"
    assert detect_format(["a", "b"]) is None


def test_window_bounds_accept_iso_or_seconds_from_the_origin() -> None:
    assert parse_trace_time("3600") == ORIGIN + 3600
    assert parse_trace_time("2020-01-01T01:00:00Z") == ORIGIN + 3600
    with pytest.raises(InputError, match="--start: neither seconds nor an ISO 8601 timestamp: 'x'"):
        parse_trace_time("x", "--start")
    with pytest.raises(InputError, match=r"--start: more than a century .* from the trace origin: 'inf'"):
        parse_trace_time("inf", "--start")


def _job(gpus: int, **kwargs: object) -> Job:
    return Job("j", 0, 60, gpus, **kwargs)  # type: ignore[arg-type]


def test_jobs_larger_than_a_node_become_whole_node_pods_plus_the_remainder() -> None:
    sizing = Sizing(cpu_per_gpu=10_000, memory_per_gpu=100 * MIB)

    assert [p.gpus for p in sizing.split(_job(64), 8)] == [8] * 8
    assert [p.gpus for p in sizing.split(_job(12), 8)] == [8, 4]
    assert [p.gpus for p in sizing.split(_job(5), 8)] == [5]
    # cpu and memory follow the GPUs of each pod
    assert [p.cpu_millicores for p in sizing.split(_job(12), 8)] == [80_000, 40_000]
    # a job's own cpu/memory are split in proportion to each pod's GPUs
    own = sizing.split(_job(12, cpu_millicores=12_000, memory_mib=1200), 8)
    assert [(p.cpu_millicores, p.memory_bytes) for p in own] == [(8000, 800 * MIB), (4000, 400 * MIB)]


def test_default_sizing_is_ninety_percent_of_the_per_gpu_share_of_the_node() -> None:
    # Given 8-GPU nodes with 95 cores and 1100Gi
    sizing = default_sizing(config())

    # Then a GPU comes with 95/8 * 0.9 = 10.6875 -> 10.6 cores and 1100Gi/8 * 0.9 = 126720 MiB
    assert sizing.cpu_per_gpu == 10_600
    assert sizing.memory_per_gpu == 126_720 * MIB
    pod = sizing.split(_job(8), 8)[0].resources()
    assert (pod.get(GPU), pod.get(CPU), pod.get(MEMORY)) == (8, 84_800, 8 * 126_720 * MIB)


def test_default_sizing_needs_a_gpu_shape() -> None:
    cpu_only = config(
        node_groups=[{"name": "cpu", "asg_name": "cpu", "allocatable": {"cpu": "16", "memory": "64Gi"}}]
    )
    with pytest.raises(ConfigError, match=r"no node group has an allocatable with nvidia\.com/gpu"):
        default_sizing(cpu_only)


def test_default_sizing_names_the_group_without_an_allocatable() -> None:
    # Given the one group of a config, without `allocatable` (the simulator reads no EC2 data)
    shapeless = config(node_groups=[{"name": "a100", "asg_name": "a", "instance_type": "p4d.24xlarge"}])
    # Then the error names it, as it does when another group has a shape
    with pytest.raises(ConfigError, match="node group 'a100' needs `allocatable`"):
        default_sizing(shapeless)
