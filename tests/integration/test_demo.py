"""`make demo` in its shortened form: the real handlers, invoked like Lambda, against a moto server and
the fake Kubernetes API server, while the simulated world boots nodes and runs the quick workload.

The demo runs in its own process, exactly as `make demo` starts it (`python -m shared.local.demo`): the
handlers read their environment at import and the demo patches moto's launches, neither of which
may leak into the other tests of a pytest worker.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from functions.aws_events.events import LaunchUnsuccessful, parse_aws_event
from functions.reconcile.triggers import SCHEDULE, SQS, trigger_of
from shared.adapters.aws.fleet import classify_failure
from shared.domain.operations import FailureKind
from shared.local.demo.cli import main as demo_main
from shared.local.demo.driver import _logging_to
from shared.local.demo.lambda_events import launch_unsuccessful, scheduled_event, sqs_event
from shared.local.demo.timeline import brief, offset, relative

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def run_quick_demo(out: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "shared.local.demo",
        "--scenario",
        "quick",
        "--speed",
        "0",
        "--out",
        str(out),
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.slow
def test_quick_demo_runs_every_job_scales_both_ways_and_spills_after_a_capacity_failure(
    tmp_path: Path,
) -> None:
    # Given the quick scenario (7 jobs incl. a gang and an MPIJob-shaped one; v100, the cheaper group,
    # has EC2 capacity for one node)
    # When the demo runs as fast as it can
    result = run_quick_demo(tmp_path)

    # Then it exits 0, and its report says why
    assert result.returncode == 0, f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] and report["failures"] == []
    # (plus the Kueue-style job whose ProvisioningRequest was admitted: 2 pods once Provisioned)
    requests = report["provisioning_requests"]
    admitted = [name for name, answer in requests.items() if answer["state"] == "admitted"]
    assert admitted == ["kueue-llm-2x8-prov"]
    assert report["jobs"] == {"total": 8, "ran": 8, "lost": 0, "never_started": 0}
    assert report["safety"]["busy_terminations"] == []
    assert report["invocation_errors"] == []
    # scaled up, and gave every node back
    assert report["scale"]["scale_ups"] >= 1
    assert report["scale"]["cordons"] >= 1
    assert report["scale"]["terminations"] == report["safety"]["instances_terminated"] >= 1
    # the launch failure reached the aws_events function, backed v100 off, and the backlog spilled to a100
    assert report["capacity"]["launch_failures"] >= 1
    assert report["capacity"]["backoffs"] >= 1
    assert report["scale"]["desired_set_back"] >= 1
    assert report["groups"]["v100"]["peak_instances"] == 1
    assert report["groups"]["a100"]["nodes_launched"] >= 1
    # every trigger path ran: webhook -> queue -> reconcile, the schedule, the AWS event
    invocations = report["invocations"]
    # one per pod (the gang has two, the MPIJob three), one per ProvisioningRequest, one per pod of
    # the admitted one
    assert invocations["webhook/admission"] == 10 + len(requests) + 2
    assert invocations["reconcile/sqs"] >= 1
    assert invocations["reconcile/schedule"] >= 1
    assert invocations["aws_events/launch-failed"] >= 1
    # and it left its traces
    timeline = (tmp_path / "timeline.txt").read_text()
    assert "backoff v100: InsufficientInstanceCapacity" in timeline
    # the 2 x 8-GPU request was bought whole, then consumed; the one too big for a100 bought nothing
    # and stays pending with why, as cluster-autoscaler leaves it
    assert requests["kueue-llm-2x8-prov"]["answer"].startswith("Provisioned=True (CapacityIsProvisioned)")
    too_big = requests["kueue-too-big-prov"]
    assert too_big["state"] == "pending"
    assert too_big["answer"].startswith("Provisioned=False (CapacityIsNotFound)")
    assert "needs 6 a100 nodes" in too_big["answer"]
    assert "BookingExpired=True (CapacityIsConsumed)" in timeline
    # the MPIJob-shaped gang ran whole: its CPU launcher on a cpu node beside its GPU workers
    assert report["groups"]["cpu"]["nodes_launched"] == 1
    assert report["groups"]["cpu"]["jobs"] == 1
    # consolidation by attrition marked an idle node (new pods steered elsewhere) through the real
    # functions, and nothing was evicted for it
    assert report["scale"]["marks"] >= 1
    assert "reconcile/schedule       mark ip-" in timeline and "runs no job" in timeline
    # one node's GPU failed (AcceleratedHardwareReady=False, a GPU dropped from allocatable) and the
    # scaler's node repair replaced it through the real functions; no busy node went for it
    faults = report["gpu_faults"]
    assert faults["injected"] == faults["repaired"] == 1
    (broken,) = faults["nodes"]
    assert f"GPU fault on {broken}: AcceleratedHardwareReady=False" in timeline
    assert any(
        line.split()[1:3] == ["reconcile/schedule", "terminate"]
        and broken in line
        and "AcceleratedHardwareReady=False" in line
        for line in timeline.splitlines()
    )
    summary = next(line for line in result.stdout.splitlines() if "GPU faults repaired" in line)
    assert summary.split()[3:6] == ["1", "of", "1"]
    assert "PASSED" in result.stdout
    assert (tmp_path / "plot.png").stat().st_size > 0
    log = (tmp_path / "functions.log").read_text()
    assert '"message":"reconcile finished"' in log
    # every line of functions.log is JSON (the functions' and the libraries' alike): jq reads it
    assert all(isinstance(json.loads(line), dict) for line in log.splitlines())
    # and the run ends with the status the functions left in the cluster, as `backlog-scaler status` reads it
    assert "status (backlog-scaler status --kubeconfig" in result.stdout
    assert "GROUP   DESIRED   READY   BOOTING" in result.stdout


def test_scheduled_event_is_a_schedule_trigger_of_reconcile() -> None:
    assert trigger_of(scheduled_event(START, "us-east-1", "backlog-scaler-schedule")) == SCHEDULE


def test_sqs_event_from_received_messages_is_an_sqs_batch_of_reconcile() -> None:
    # Given a message as ReceiveMessage(AttributeNames=["All"]) returns it from a FIFO queue
    message = {
        "MessageId": "5fea7756-0ea4-451a-a703-a558b933e274",
        "ReceiptHandle": "handle",
        "MD5OfBody": "d41d8cd98f00b204e9800998ecf8427e",
        "Body": json.dumps(
            {"source": "admission", "cluster": "demo", "reason": "pod", "at": "2026-12-02T12:00:00Z"}
        ),
        "Attributes": {
            "SenderId": "AIDAIT2UOQQY3AUEKVGXU",
            "SentTimestamp": "1796212800000",
            "ApproximateReceiveCount": "1",
            "ApproximateFirstReceiveTimestamp": "1796212800000",
            "MessageDeduplicationId": "demo-359242560",
            "MessageGroupId": "demo",
            "SequenceNumber": "1",
        },
    }
    # When it becomes a Lambda SQS event
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:q.fifo", "us-east-1")
    # Then reconcile reads it as an SQS batch
    assert trigger_of(event) == SQS
    assert event["Records"][0]["messageId"] == message["MessageId"]


def test_launch_unsuccessful_event_is_parsed_and_classified_as_insufficient_capacity() -> None:
    event = launch_unsuccessful(
        asg_name="demo-v100",
        region="us-east-1",
        now=START,
        availability_zone="us-east-1a",
        instance_type="p3.16xlarge",
        desired=3,
        running=2,
    )
    parsed = parse_aws_event(event)
    assert isinstance(parsed, LaunchUnsuccessful)
    assert parsed.detail.asg_name == "demo-v100"
    assert parsed.failed_at == START
    assert (
        classify_failure(parsed.detail.status_message, parsed.detail.cause)
        is FailureKind.INSUFFICIENT_CAPACITY
    )


def test_timeline_shows_times_as_offsets_from_the_start() -> None:
    assert offset(START + timedelta(minutes=4, seconds=5), START) == "+04:05"
    assert offset(START + timedelta(hours=1, seconds=1), START) == "+1:00:01"
    assert relative("backoff until 2026-12-02T12:07:05+00:00", START) == "backoff until +07:05"
    assert relative("idle since 2026-12-02T12:01:00.000Z", START) == "idle since +01:00"


def test_long_reasons_are_cut_at_a_word() -> None:
    text = "We currently do not have sufficient p3.16xlarge capacity in the Availability Zone you requested"
    assert brief(text, 40) == "We currently do not have sufficient..."
    assert brief("short", 40) == "short"


@pytest.mark.slow
def test_hold_keeps_the_fake_kubernetes_api_up_for_kubectl_until_ctrl_c(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    # Given the quick demo run with --hold
    command = [sys.executable, "-m", "shared.local.demo", "--scenario", "quick", "--speed", "0"]
    command += ["--out", str(tmp_path), "--hold"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    demo = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    printed: list[str] = []
    holding = threading.Event()

    def read_stdout() -> None:
        assert demo.stdout is not None
        for text in demo.stdout:
            printed.append(text)
            if text.startswith("  kubectl") and "events" in text:  # the last line before it holds
                holding.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        assert holding.wait(timeout=180), "the demo did not hold:\n" + "".join(printed[-40:])
        # When kubectl reads the world through the kubeconfig the demo wrote
        base = [kubectl, "--kubeconfig", str(tmp_path / "kubeconfig"), "--request-timeout=10s"]
        listed = subprocess.run(
            [*base, "get", "nodes,pods", "-A"], capture_output=True, text=True, timeout=30
        )
        events = subprocess.run([*base, "get", "events", "-A"], capture_output=True, text=True, timeout=30)
        namespaces = subprocess.run([*base, "get", "ns"], capture_output=True, text=True, timeout=30)
        left = next(line for line in printed if line.startswith("left for kubectl")).split(": ", 1)[1]
        node = left.split(",")[0].split(".")[0].strip()
        cordon = subprocess.run([*base, "cordon", node], capture_output=True, text=True, timeout=30)
        drain = subprocess.run(
            [*base, "drain", node, "--ignore-daemonsets", "--timeout=30s"],  # as docs/demo.md says
            capture_output=True,
            text=True,
            timeout=60,
        )
        after = subprocess.run(
            [*base, "get", "pods", "-A", "-o", "wide"], capture_output=True, text=True, timeout=30
        )
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=300)  # a hang guard, not a speed bound: a loaded machine unwinds slowly
        finally:
            if demo.poll() is None:  # never leave the demo (and its servers) running after the test
                demo.kill()
                demo.wait()
        reader.join(timeout=10)
    stdout = "".join(printed)
    stderr = demo.stderr.read() if demo.stderr is not None else ""
    # Then both work (every node was given back by the end; the scaler's events are there), and Ctrl-C
    # ends the hold with the run's own exit status
    assert listed.returncode == 0, listed.stderr
    assert events.returncode == 0, events.stderr
    assert events.stdout.split()[:6] == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT"]
    assert "TriggeredScaleUp" in events.stdout
    # the namespaces a cluster has, with ages on the demo's clock; a node left to cordon and drain
    assert {"default", "kube-system", "research"} <= {
        line.split()[0] for line in namespaces.stdout.splitlines()[1:]
    }
    assert cordon.returncode == 0 and "cordoned" in cordon.stdout, cordon.stderr
    assert drain.returncode == 0, drain.stderr
    assert f"{node}-job" in drain.stdout + drain.stderr  # its job was evicted
    assert f"{node}-job" not in after.stdout
    assert demo.returncode == 0, f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}"
    assert "holding: the Kubernetes API (fake) stays up" in stdout


def test_library_logging_goes_to_the_log_file_as_json_lines() -> None:
    # Given the demo's log file set-up, When a library (botocore) logs, Then the line is JSON
    log = io.StringIO()
    with _logging_to(log):
        logging.getLogger("botocore.credentials").info("Found credentials in environment variables.")
    [line] = log.getvalue().splitlines()
    record = json.loads(line)
    assert (record["level"], record["name"]) == ("INFO", "botocore.credentials")
    assert record["message"] == "Found credentials in environment variables."


def test_no_plot_without_out_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # Given / When --no-plot is asked for without an output folder
    code = demo_main(["--no-plot"])
    # Then the demo does not start: a stale plot.png would sit in the default folder
    assert code == 2
    assert "--no-plot needs --out" in capsys.readouterr().err
