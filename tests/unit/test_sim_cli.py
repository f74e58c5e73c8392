"""`backlog-scaler simulate`: report.json schema, --compare, plot, errors, progress line."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.config import load_config
from shared.local.cli import build_parser, main
from shared.local.sim.cli import Progress, _sizing, eta_seconds, replay_all
from shared.local.sim.compare_table import compare_table
from shared.local.sim.engine import SimResult
from shared.local.sim.report import build_report, compare_document, report_table
from shared.local.sim.trace import load_trace
from tests.native import needs_sources

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "fixtures" / "traces"
BASELINE = str(ROOT / "examples" / "sim-config.yaml")
CANDIDATE = str(ROOT / "examples" / "sim-config-fast-scale-in.yaml")
TWO_JOBS = str(TRACES / "two_whole_node_jobs.csv")

REPORT_KEYS = {
    "jobs",
    "jobs_started",
    "jobs_not_started",
    "pods",
    "fractional_gpu_jobs",
    "wait_seconds",
    "gpu_hours",
    "provisioned_over_ideal",
    "node_hours",
    "cost",
    "scale_ups",
    "nodes_launched",
    "scale_downs",
    "attrition",
    "migration",
    "safety",
    "groups",
    "span",
    "simulation",
    "trace",
}
GROUP_KEYS = {
    "gpus_per_node",
    "price_per_hour",
    "node_hours",
    "gpu_hours_provisioned",
    "gpu_hours_used",
    "cost",
    "nodes_launched",
    "scale_ups",
    "scale_downs",
    "replaced",
    "cordons",
    "uncordons",
    "peak_nodes",
    "launch_failures",
    "backoffs",
    "marks",
    "unmarks",
}


def test_report_json_has_the_documented_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # When a trace is replayed with --out (no plot)
    code = main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(tmp_path), "--no-plot"])

    # Then report.json holds the documented figures
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) == REPORT_KEYS
    assert report["jobs"] == 2
    assert set(report["wait_seconds"]) == {"mean", "p50", "p95", "p99", "max"}
    assert report["wait_seconds"]["p95"] == 300
    assert {"provisioned", "used", "ideal"} <= set(report["gpu_hours"])
    assert report["gpu_hours"]["used"] == report["gpu_hours"]["ideal"] == 16.0
    assert report["provisioned_over_ideal"] == pytest.approx(
        report["gpu_hours"]["provisioned"] / report["gpu_hours"]["ideal"], rel=1e-3
    )
    assert set(report["groups"]["v100"]) == GROUP_KEYS
    assert report["simulation"]["boot_seconds"] == 300
    assert report["trace"]["format"] == "csv"
    assert not (tmp_path / "plot.png").exists()
    # And the table was printed
    out = capsys.readouterr().out
    assert "provisioned / ideal" in out and "wait p50 / p95" in out


def test_compare_replays_both_configs_and_reports_them_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "simulate",
            "--trace",
            TWO_JOBS,
            "--config",
            BASELINE,
            "--compare",
            CANDIDATE,
            "--out",
            str(tmp_path),
            "--no-plot",
        ]
    )

    assert code == 0
    document = json.loads((tmp_path / "report.json").read_text())
    assert set(document) == {"baseline", "candidate", "difference"}
    baseline, candidate = document["baseline"], document["candidate"]
    assert set(baseline) == set(candidate) == REPORT_KEYS
    assert baseline["simulation"]["config"] == BASELINE
    assert candidate["simulation"]["config"] == CANDIDATE
    # the candidate gives idle nodes back sooner (idle 120 s instead of 600 s)
    assert candidate["gpu_hours"]["provisioned"] < baseline["gpu_hours"]["provisioned"]
    # And each figure has its difference and percent, in the JSON and in the table
    provisioned = document["difference"]["gpu_hours_provisioned"]
    assert provisioned["difference"] == pytest.approx(
        candidate["gpu_hours"]["provisioned"] - baseline["gpu_hours"]["provisioned"], abs=0.01
    )
    assert provisioned["percent"] == pytest.approx(
        100 * provisioned["difference"] / baseline["gpu_hours"]["provisioned"], abs=0.1
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["baseline: sim-config.yaml", "candidate: sim-config-fast-scale-in.yaml"]
    assert lines[3].split() == ["baseline", "candidate", "change"]
    row = next(line for line in lines if line.startswith("GPU-h provisioned"))
    assert f"{provisioned['difference']:+,.2f} ({provisioned['percent']:+.1f}%)" in row
    # one figure a row, in 120 columns, waits as durations
    assert max(len(line) for line in lines) <= 120
    wait = next(line for line in lines if line.startswith("wait p50")).split()
    assert all(re.fullmatch(r"[+-]?\d+(s|m\d\ds|h\d\dm|d\d\dh)", cell) for cell in wait[2:5])


def test_json_output_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "--trace",
            str(TRACES / "philly_small.csv"),
            "--format",
            "philly",
            "--cluster",
            "bbb222",
            "--config",
            BASELINE,
            "--output",
            "json",
            "--speed",
            "10",
            "--out",
            str(tmp_path),
        ]
    )

    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["jobs"] == 2
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_malformed_trace_exits_2_naming_the_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "philly.csv"
    trace.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,abc,1,1,x\n", encoding="utf-8"
    )

    code = main(["simulate", "--trace", str(trace), "--config", BASELINE])

    assert code == 2
    assert f"backlog-scaler: error: {trace}: row 2: duration: not a number: 'abc'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--capacity", "v100"], "--capacity: expected GROUP=N"),
        (["--capacity", "h100=2"], "--capacity names unknown group(s): h100"),
        (["--cpu-per-gpu", "lots"], "--cpu-per-gpu/--memory-per-gpu"),
        (["--start", "2030-01-01T00:00:00Z"], "no jobs to replay"),
    ],
)
def test_bad_options_exit_2(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, *extra])

    assert code == 2
    assert message in capsys.readouterr().err


def test_progress_line_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--progress"])

    assert code == 0
    err = capsys.readouterr().err
    assert err.startswith("\rsimulate sim-config.yaml [") and "100%" in err and err.endswith("\n")


def test_progress_shows_the_time_left_at_the_rate_so_far() -> None:
    # Given a progress line on a clock the test moves (wall seconds)
    wall = [100.0]
    out = io.StringIO()
    progress = Progress(out, "simulate t.csv", interval=0, clock=lambda: wall[0])

    # When 250 of 1,000 jobs have started after 30 s, then all of them after 120 s
    wall[0] = 130.0
    progress(1_506_816_000, 250, 1000)
    first = out.getvalue()
    wall[0] = 220.0
    progress(1_506_902_400, 1000, 1000)

    # Then the first line says 30 s went and 90 s are left at that rate; the last has no ETA
    assert "250/1,000 jobs started  30s  ETA 1m30s" in first
    assert out.getvalue()[len(first) :].rstrip().endswith("1,000/1,000 jobs started  2m00s")
    assert eta_seconds(10.0, 5, 1000) is None  # under 1 %: no estimate yet
    assert eta_seconds(10.0, 0, 0) is None


def test_simulate_without_a_plot_never_imports_matplotlib() -> None:
    # The Lambda functions share this package: matplotlib must stay an optional, lazy import.
    code = (
        "import sys; from shared.local.cli import main; "
        f"main(['simulate', '--trace', {TWO_JOBS!r}, '--config', {BASELINE!r}]); "
        "assert 'matplotlib' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


class _RecordingSimulate:
    """Stands in for the replay: records that it was started."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        raise AssertionError("the replay must not start")


def test_trace_format_flag_and_its_hidden_old_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the Philly trace, When replayed with --trace-format and with the old --format philly
    runs = []
    for flag in ("--trace-format", "--format"):
        args = ["simulate", "--trace", str(TRACES / "philly_small.csv"), flag, "philly", "--config", BASELINE]
        assert main([*args, "--cluster", "bbb222", "--format", "json"]) == 0
        captured = capsys.readouterr()
        runs.append(json.loads(captured.out))
        if flag == "--format":
            assert "--format philly is now --trace-format philly" in captured.err
    # Then both read the trace as Philly
    assert runs[0]["jobs"] == runs[1]["jobs"] == 2
    assert runs[0]["trace"]["format"] == runs[1]["trace"]["format"] == "philly"
    # And --format is the output format, as for plan; the old --output still works, unlisted
    args = [
        "simulate",
        "--trace",
        str(TRACES / "philly_small.csv"),
        "--config",
        BASELINE,
        "--cluster",
        "bbb222",
    ]
    assert main([*args, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 2
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    help_text = capsys.readouterr().out
    assert "--trace-format" in help_text and "--format {table,json}" in help_text
    assert "--output" not in help_text


@needs_sources
@pytest.mark.parametrize("layout", ["a file", "under a file"])
def test_out_is_validated_before_the_replay_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    # Given --out naming a regular file, or a directory that cannot be created under one
    blocker = tmp_path / "report"
    blocker.write_text("not a directory")
    out = blocker if layout == "a file" else blocker / "run1"
    replay = _RecordingSimulate()
    monkeypatch.setattr("shared.local.sim.cli.simulate", replay)
    # When simulating
    code = main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(out)])
    # Then it fails at once naming --out, and no replay ran
    assert code == 2
    assert f"backlog-scaler: error: --out {out}: " in capsys.readouterr().err
    assert replay.calls == 0


@needs_sources
def test_out_whose_plot_is_a_directory_is_refused_before_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given --out holding a directory named plot.png
    (tmp_path / "plot.png").mkdir()
    replay = _RecordingSimulate()
    monkeypatch.setattr("shared.local.sim.cli.simulate", replay)
    # When simulating, Then it fails at once naming the file, and no replay ran
    assert main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path}: plot.png is a directory" in capsys.readouterr().err
    assert replay.calls == 0
    # And without the plot it is no obstacle
    monkeypatch.undo()
    args = ["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(tmp_path), "--no-plot"]
    assert main(args) == 0


def test_a_reader_that_stops_reading_ends_the_process_quietly() -> None:
    # Given `simulate ... | head`: the reader of its output is gone before it prints
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.local.cli", "simulate", "--trace", TWO_JOBS, "--config", BASELINE],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    # Then it exits as CPython does when stdout cannot be flushed, without a traceback
    assert proc.wait() == 120
    assert err == ""


def test_out_that_does_not_exist_yet_is_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given --out two levels below an existing directory
    out = tmp_path / "runs" / "one"
    # When simulating without a plot
    assert main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(out), "--no-plot"]) == 0
    # Then the report is there
    assert json.loads((out / "report.json").read_text())["jobs"] == 2


@needs_sources
def test_no_plot_without_out_is_an_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given --no-plot and no --out
    replay = _RecordingSimulate()
    monkeypatch.setattr("shared.local.sim.cli.simulate", replay)
    # When simulating
    code = main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--no-plot"])
    # Then it is refused before the replay, saying --no-plot needs --out
    assert code == 2
    assert "backlog-scaler: error: --no-plot: only with --out" in capsys.readouterr().err
    assert replay.calls == 0


def test_the_compare_table_fits_120_columns_with_long_names_and_large_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two replays as JSON, blown up to a long trace's figures and a long group name
    assert main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for section in ("gpu_hours", "wait_seconds"):
        report[section] = {
            k: (v * 100_000 if isinstance(v, int | float) else v) for k, v in report[section].items()
        }
    report["cost"] = 12_345_678.91
    report["groups"] = {"a-very-long-group-name-of-forty-characters": next(iter(report["groups"].values()))}
    long_title = "a-config-file-name-that-goes-on-and-on-" * 4 + ".yaml"

    # When they are compared
    table = compare_table((long_title, report), (long_title, report))

    # Then no line is wider than 120 columns, and the waits read as durations
    assert max(len(line) for line in table.splitlines()) <= 120
    assert re.fullmatch(
        r"\d+d\d\dh", next(line for line in table.splitlines() if line.startswith("wait max")).split()[2]
    )


def test_checkpointable_jobs_are_reported_with_migration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # When every job checkpoints (the config leaves migration off: nothing moves, and it says so)
    args = ["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--out", str(tmp_path), "--no-plot"]
    code = main(
        [*args, "--checkpointable", "1", "--checkpoint-interval-seconds", "600", "--restart-seconds", "60"]
    )

    # Then a note says that no job moves, the settings are recorded, and the report has the figures
    assert code == 0
    assert (
        f"backlog-scaler: note: --checkpointable 1: policy.migration.enabled is off in {BASELINE}, "
        "so no job is moved"
    ) in capsys.readouterr().err
    report = json.loads((tmp_path / "report.json").read_text())
    simulation = report["simulation"]
    assert (simulation["checkpointable"], simulation["checkpoint_interval_seconds"]) == (1.0, 600)
    assert simulation["restart_seconds"] == 60
    moved = report["migration"]
    assert moved == {
        "enabled": False,
        "migrations": 0,
        "gpu_hours_lost": 0.0,
        "lost_over_used": 0.0,
        "jobs_moved": 0,
        "jobs_moved_more_than_once": 0,
        "most_moves_of_a_job": 0,
        "restart_delay_p95": None,
        "evicted_not_movable": 0,
    }


def test_a_replay_that_starts_no_job_has_no_efficiency_and_compares_its_jobs_not_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a candidate whose group EC2 never gives an instance: no job starts, and it stalls
    args = ["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--format", "json", "--capacity", "v100=0"]
    assert main(args) == 0
    alone = json.loads(capsys.readouterr().out)
    # Then its provisioned/ideal is unknown, not 0 (better than perfect), and the table says it stalled
    assert alone["jobs_started"] == 0 and alone["provisioned_over_ideal"] is None
    assert alone["simulation"]["stalled"]
    table = report_table([("c", alone)]).splitlines()
    assert next(line for line in table if line.startswith("stalled")).split()[1] == "yes:"
    # And against a baseline that ran both jobs, the compare shows the jobs not started and no -100 %
    assert main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--format", "json"]) == 0
    base = json.loads(capsys.readouterr().out)
    document = compare_document(base, alone)["difference"]
    assert document["jobs_not_started"] == {"baseline": 0, "candidate": 2, "difference": 2, "percent": None}
    assert document["provisioned_over_ideal"]["percent"] is None
    lines = compare_table(("base", base), ("cand", alone)).splitlines()

    def row(label: str) -> list[str]:
        return next(line for line in lines if line.startswith(label)).split()

    assert row("jobs not started")[-3:] == ["0", "2", "+2"]
    assert row("provisioned / ideal")[-2:] == ["-", "-"]
    assert row("stalled")[1:] == ["no", "yes", "-"]


def test_a_checkpointable_share_outside_0_to_1_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--checkpointable", "1.5"])
    assert exited.value.code == 2
    assert "expected a fraction from 0 to 1, got '1.5'" in capsys.readouterr().err


def test_a_compare_replays_its_second_config_in_another_process_with_the_same_figures() -> None:
    # Given the two configs of a compare on a trace slice
    args = build_parser("simulate").parse_args(
        ["simulate", "--trace", TWO_JOBS, "--config", BASELINE, "--compare", CANDIDATE]
    )
    trace = load_trace(TWO_JOBS, "auto")
    configs = [(BASELINE, load_config(BASELINE)), (CANDIDATE, load_config(CANDIDATE))]
    sizing = _sizing(args, configs[0][1])

    # When they are replayed one after the other, and side by side on two CPUs
    sequential = replay_all(args, trace, configs, sizing, cpus=1)
    parallel = replay_all(args, trace, configs, sizing, cpus=2)

    # Then every figure is the same, in the same order (how long each took aside)
    def figures(result: SimResult) -> dict[str, Any]:
        report = build_report(result, trace)
        for key in ("wall_seconds", "jobs_per_second"):
            report["simulation"].pop(key)
        return report

    assert [figures(r) for r in parallel] == [figures(r) for r in sequential]
    assert [r.config_name for r in parallel] == [BASELINE, CANDIDATE]
