"""The local run: the real functions, driven like AWS drives them, against moto and a fake Kubernetes API.

Set-up (what `cdk deploy` and the cluster would provide):
- a moto server on 127.0.0.1 with the groups, table, queue, topic and webhook secret (`aws.py`);
- the fake Kubernetes API server (../kube_api_server.py, real HTTP) requiring a bearer token and enforcing the
  ClusterRole generated from the adapter's permission table, and a kubeconfig for it in the output folder;
  kubectl sends no token over plain HTTP, so tokenless requests from loopback are let in unrestricted
  (the functions' token stays RBAC-enforced) and `kubectl --kubeconfig <out>/kubeconfig` works;
- the functions' environment in os.environ (shared.constants names, fake credentials, the endpoint);
- the handlers imported after that (their cold start).

Then simulated time runs in steps of `step_seconds`. Each step, in this order:
1. jobs due are submitted: their pods are created and each creation is POSTed to the webhook as a
   signed AdmissionReview (the webhook enqueues a wake-up on the SQS FIFO queue); a Kueue-like queue
   (`queue.py`) creates the ProvisioningRequests that are due, and the pods of those the scaler
   answered Provisioned;
2. the world advances (`world.py`): instances boot into Nodes, GPUs get advertised, jobs finish, the
   scheduler binds what fits and marks the rest Unschedulable, short groups fail launches;
3. each "EC2 Instance Launch Unsuccessful" event goes to the aws_events handler;
4. the queue is read (ReceiveMessage) and its messages go to the reconcile handler as one SQS batch;
   the records it does not report as failures are deleted, as the event source mapping does. The
   pods were tried by the scheduler in 2, which is what the production queue delay (10 s) waits for;
5. on the schedule (every `schedule_seconds`) the reconcile handler gets an EventBridge Scheduled Event;
6. the world re-reads the groups, so launches and terminations are stamped with this instant.

The functions run on the demo's clock (simulated time, paced against the wall clock by `speed`) and
the world only moves between invocations, so a run is the same story every time, whatever the
machine's speed; only instance ids and addresses differ.

With `hold`, the servers stay up after the summary (until Ctrl-C) for kubectl to look around.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO, cast

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.queue import clear_fast_clients
from shared.adapters.kubernetes.rbac import cluster_role, status_config_map, status_role
from shared.config import ScalerConfig, parse_config
from shared.domain.errors import InputError
from shared.local.demo.aws import FAKE_CREDENTIALS, CapacityShortage, DemoResources, MotoServer, provision
from shared.local.demo.faults import GpuFaults
from shared.local.demo.functions import Functions
from shared.local.demo.lambda_events import scheduled_event, sqs_event
from shared.local.demo.queue import DemoQueue, QueueKube
from shared.local.demo.report import DemoReport, build_report, summary_lines, write_plot
from shared.local.demo.scenario import DemoJob, Scenario
from shared.local.demo.timeline import SOURCE_WIDTH, Console, decision_line, line, offset
from shared.local.demo.world import NAMESPACE, SYSTEM_NAMESPACE, KubeApi, Sample, StepReport, World
from shared.local.kube_api_server import FakeKubeApiServer
from shared.local.status_cli import read_status, status_to_table

SQS_BATCH_SIZE = 10


class DemoClock:
    """Simulated time for the controllers and the world (the Clock port); `sleep` advances it."""

    def __init__(self, start: datetime) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def sleep(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def advance_to(self, at: datetime) -> None:
        self._now = max(self._now, at)


@dataclass(frozen=True)
class DemoOptions:
    scenario: Scenario
    out_dir: Path
    speed: float = 40.0  # simulated seconds per wall second; 0: as fast as possible
    plot: bool = True
    live: bool | None = None  # progress line: None = when stdout is a terminal
    stream: TextIO | None = None
    hold: bool = False  # keep the servers up after the summary, until Ctrl-C (or `wait` returns)
    wait: Callable[[], None] | None = None  # how to hold; None: sleep until KeyboardInterrupt


def _sleep_until_interrupted() -> None:
    while True:
        time.sleep(3600)


@dataclass
class DemoOutcome:
    exit_code: int
    report: DemoReport
    lines: list[str] = field(default_factory=list)


def run_demo(options: DemoOptions) -> DemoOutcome:
    """Run the scenario end to end; exit code 0 only if every job ran, no busy node went, no call failed."""
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    console = Console(options.stream, live=options.live)
    scenario = options.scenario
    config = parse_config(dict(scenario.config), f"scenario {scenario.name}")
    wall_started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context((out / "functions.log").open("w", encoding="utf-8"))
        stack.enter_context(_logging_to(log))
        moto = MotoServer()
        endpoint = moto.start()
        stack.callback(moto.stop)
        stack.enter_context(_environment({**FAKE_CREDENTIALS, **_aws_environment(endpoint, config.region)}))
        stack.callback(_forget_clients)
        _forget_clients()
        resources = provision(config, asg_max_size=scenario.asg_max_size)
        clock = DemoClock(datetime.now(UTC).replace(second=0, microsecond=0))
        kube, kube_url, kubeconfig = _start_kube_api(out, stack, config.kubernetes.status_namespace, clock)
        stack.enter_context(_environment(_function_environment(config, resources, kubeconfig)))
        stack.enter_context(CapacityShortage(scenario.timings.capacity).installed())
        # The handlers are imported (their cold start) now that their environment is complete.
        functions = Functions(
            clock=clock,
            log=log,
            webhook_secret=resources.webhook_secret,
            function_prefix=f"{constants.SERVICE_NAME}-{config.cluster_name}",
        )
        stack.callback(functions.close)
        world = World(kube, config, scenario)
        queue = DemoQueue(cast(QueueKube, kube), world, functions.admit, scenario.requests)
        _print_header(console, scenario, config, endpoint, kube_url, options.speed)
        faults = GpuFaults(kube, world, scenario.gpu_fault, clock.now())
        run = _Run(options, console, clock, world, functions, resources, config, queue, faults)
        run.until_done()
        wall = time.perf_counter() - wall_started
        report = _finish(options, console, run, config, world, functions, (clock.now(), wall))
        _print_status(console, kubeconfig, config.kubernetes.status_namespace, clock.now())
        if options.hold:
            left = world.leave_nodes(clock.now())
            _hold(console, kubeconfig, kube_url, left, options.wait or _sleep_until_interrupted)
    return DemoOutcome(0 if report.passed else 1, report, console.lines)


def _finish(
    options: DemoOptions,
    console: Console,
    run: _Run,
    config: ScalerConfig,
    world: World,
    functions: Functions,
    ended: tuple[datetime, float],
) -> DemoReport:
    """Build the report, print the summary and write the output folder (ended: simulated end, wall s)."""
    out, scenario = options.out_dir, options.scenario
    end, wall = ended
    report = build_report(
        scenario=scenario,
        config=config,
        start=run.start,
        end=end,
        world=world,
        decisions=functions.decisions,
        invocations=functions.invocations,
        wall_seconds=wall,
        speed=options.speed,
        requests={q.request.name: (q.state, q.answer) for q in run.queue.jobs} if run.queue else None,
        faults=run.faults,
    )
    for text in summary_lines(report):
        console.print(text)
    written = ["report.json", "timeline.txt", "functions.log"]
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if options.plot:
        try:
            title = f"backlog-scaler demo ({scenario.name})"
            write_plot(out / "plot.png", run.samples, world.group_names, title=title)
            written.append("plot.png")
        except InputError as exc:
            console.print(f"plot skipped: {exc}")
    console.print(f"output: {out}/ ({', '.join(written)})")
    (out / "timeline.txt").write_text("\n".join(console.lines) + "\n", encoding="utf-8")
    return report


def _print_status(console: Console, kubeconfig: Path, namespace: str, now: datetime) -> None:
    """The status the functions left in the cluster, read as `backlog-scaler status` reads it."""
    console.print("")
    console.print(f"status (backlog-scaler status --kubeconfig {kubeconfig} -n {namespace}):")
    try:
        document = read_status(str(kubeconfig), None, namespace)
    except InputError as exc:
        console.print(f"  unavailable: {exc}")
        return
    for text in status_to_table(document, now).splitlines():
        console.print(f"  {text}" if text else "")


def _hold(
    console: Console, kubeconfig: Path, kube_url: str, nodes: list[str], wait: Callable[[], None]
) -> None:
    """Keep the servers up for kubectl until Ctrl-C; the run's exit status stays the report's."""
    console.print("")
    console.print(f"holding: the Kubernetes API (fake) stays up at {kube_url}; Ctrl-C to stop.")
    console.print(f"left for kubectl, each running one job: {', '.join(nodes)}. Try:")
    if nodes:
        console.print(f"  kubectl --kubeconfig {kubeconfig} cordon {nodes[0]}")
        console.print(f"  kubectl --kubeconfig {kubeconfig} drain {nodes[0]} --ignore-daemonsets")
    console.print(f"  backlog-scaler status --kubeconfig {kubeconfig}")
    console.print(f"  kubectl --kubeconfig {kubeconfig} get nodes,pods -A")
    console.print(f"  kubectl --kubeconfig {kubeconfig} get events -A -w")
    with contextlib.suppress(KeyboardInterrupt):
        wait()


class _Run:
    """The step loop (see the module docstring for the order within a step)."""

    def __init__(
        self,
        options: DemoOptions,
        console: Console,
        clock: DemoClock,
        world: World,
        functions: Functions,
        resources: DemoResources,
        config: ScalerConfig,
        queue: DemoQueue | None = None,
        faults: GpuFaults | None = None,
    ) -> None:
        self._options = options
        self.queue = queue
        self.faults = faults
        self._timings = options.scenario.timings
        self._console = console
        self._clock = clock
        self._world = world
        self._functions = functions
        self._resources = resources
        self._config = config
        self._sqs = clients.client("sqs", config.region)
        self._jobs = sorted(options.scenario.jobs, key=lambda j: (j.submit, j.name))
        self._next_job = 0
        self._printed = 0  # decisions already on the console
        self._checked = 0  # invocations already checked for errors
        self.start = clock.now()
        self._next_tick = self.start
        self.samples: list[Sample] = []

    def until_done(self) -> None:
        """Step until every job finished and every node was given back (or the time limit)."""
        step = timedelta(seconds=self._timings.step_seconds)
        end = self.start + timedelta(seconds=self._timings.end_after_seconds)
        paced_from = time.perf_counter()
        now = self.start
        while True:
            self._step(now)
            queued = self.queue is None or self.queue.done()
            if (
                self._next_job == len(self._jobs)
                and queued
                and self._world.all_done()
                and self._world.drained()
            ):
                break
            if self._clock.now() >= end:
                limit = self._timings.end_after_seconds
                self._say(self._clock.now(), "demo", f"stopped: the story is not over after {limit} s")
                break
            now = max(now + step, self._clock.now())
            if self._options.speed > 0:
                ahead = (now - self.start).total_seconds() / self._options.speed
                time.sleep(max(0.0, ahead - (time.perf_counter() - paced_from)))
        self._console.end_progress()

    def _step(self, now: datetime) -> None:
        self._clock.advance_to(now)
        report = StepReport()
        self._submit_due(now, report)
        if self.queue is not None:
            self.queue.step(now, report)  # a Kueue-like queue: ProvisioningRequests, then pods
        self._world.step(now, report)
        if self.faults is not None:
            self.faults.step(now, report)  # a node's GPU fails (the scenario's), for repair to replace
        self._show(report)
        for event in report.launch_failures:
            self._functions.aws_event(event, "launch-failed")
        self._deliver_queue()
        if now >= self._next_tick:
            event = scheduled_event(now, self._config.region, f"{constants.SERVICE_NAME}-schedule")
            self._functions.reconcile(event, "schedule")
            self._next_tick += timedelta(seconds=self._timings.schedule_seconds)
        self._show_decisions()
        after = StepReport()
        self._world.observe(self._clock.now(), after)
        self._show(after)
        self.samples.append(self._world.sample(self._clock.now()))
        self._console.progress(self._progress())

    def _submit_due(self, now: datetime, report: StepReport) -> None:
        due = []
        while self._next_job < len(self._jobs) and self._due(self._jobs[self._next_job], now):
            due.append(self._jobs[self._next_job])
            self._world.submit(self._jobs[self._next_job], now, report)
            self._next_job += 1
        if not due:
            return
        gpus = sum(j.total_gpus for j in due)
        self._say(now, "user", f"submitted {len(due)} job(s), {gpus} GPUs: {_names(j.name for j in due)}")
        allowed = sum(1 for pod in report.new_pods if self._functions.admit(pod))
        self._say(
            now, "webhook/admission", f"{allowed}/{len(report.new_pods)} signed AdmissionReviews: allowed"
        )

    def _due(self, job: DemoJob, now: datetime) -> bool:
        return self.start + timedelta(seconds=job.submit) <= now

    def _deliver_queue(self) -> None:
        """Deliver the queue's messages to reconcile as SQS batches, like the event source mapping."""
        queue = self._resources.queue_url
        for _ in range(5):  # FIFO: one message group in flight at a time; a few rounds empty the queue
            received = self._sqs.receive_message(
                QueueUrl=queue,
                MaxNumberOfMessages=SQS_BATCH_SIZE,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages = received.get("Messages") or []
            if not messages:
                return
            reasons = sorted({str(json.loads(m["Body"]).get("reason", "?")) for m in messages})
            self._say(self._clock.now(), "sqs/wake-up", f"{len(messages)} message(s): {_names(reasons, 2)}")
            event = sqs_event(messages, self._resources.queue_arn, self._config.region)
            response = self._functions.reconcile(event, "sqs")
            if response is None:
                return  # an invocation error: the messages come back after the visibility timeout
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures") or ()}
            done = [m for m in messages if m["MessageId"] not in failed]
            if done:
                entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
                self._sqs.delete_message_batch(QueueUrl=queue, Entries=entries)
            if failed:
                return

    def _show_decisions(self) -> None:
        for decision in self._functions.decisions[self._printed :]:
            self._console.print(decision_line(decision, self.start))
        self._printed = len(self._functions.decisions)
        for call in self._functions.invocations.calls[self._checked :]:
            if call.error:
                self._say(call.at, f"{call.function}/{call.trigger}", f"ERROR {call.error}")
        self._checked = len(self._functions.invocations.calls)

    def _show(self, report: StepReport) -> None:
        for happening in report.happenings:
            self._say(happening.at, f"world/{happening.kind}", happening.text)

    def _say(self, at: datetime, source: str, text: str) -> None:
        self._console.print(line(at, self.start, source, text))

    def _progress(self) -> str:
        world = self._world
        runs = list(world.jobs.values())
        done = sum(1 for r in runs if r.finished_at is not None)
        running = sum(1 for r in runs if r.started_at is not None and r.finished_at is None)
        waiting = [r for r in runs if r.started_at is None]
        live = [i for i in world.instances.values() if i.terminated_at is None]
        nodes = " ".join(f"{g} {sum(1 for i in live if i.group.name == g)}" for g in world.group_names)
        waiting_gpus = sum(r.job.total_gpus for r in waiting)
        at = offset(self._clock.now(), self.start)
        return (
            f"[{at}] jobs: {done}/{len(self._jobs)} done, {running} running, "
            f"{len(waiting)} waiting ({waiting_gpus} GPUs) | instances: {nodes} | "
            f"{len(self._functions.invocations.calls)} invocations"
        )


def _start_kube_api(
    out: Path, stack: contextlib.ExitStack, status_namespace: str, clock: DemoClock
) -> tuple[KubeApi, str, Path]:
    """The fake Kubernetes API server on the demo's clock, its namespaces, and a kubeconfig for it."""
    server = FakeKubeApiServer(allow_anonymous_loopback=True).start()
    stack.callback(server.stop)
    server.set_clock(clock.now)  # kubectl's AGE and Events' times are of the simulated world
    # What a new cluster has, and the namespace of the demo's jobs (kubectl get ns).
    system = {"default", "kube-node-lease", "kube-public", SYSTEM_NAMESPACE}
    for name in sorted(system | {NAMESPACE, status_namespace}):
        server.add_namespace({"metadata": {"name": name}})
    # The functions get what the deployed roles grant them, and not a verb more; the status ConfigMap
    # exists as the applied manifests create it.
    server.enforce_cluster_role(cluster_role(), roles=[status_role(status_namespace)])
    server.add_config_map(status_config_map(status_namespace))
    token = secrets.token_urlsafe(24)
    server.require_token(token)
    kubeconfig = server.write_kubeconfig(out / "kubeconfig", token, name="demo")
    return cast(KubeApi, server), str(server.url), kubeconfig


def _aws_environment(endpoint: str, region: str) -> dict[str, str]:
    return {
        constants.ENV_AWS_ENDPOINT_URL: endpoint,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        # Never read the developer's own profile or config by accident.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _function_environment(config: ScalerConfig, resources: DemoResources, kubeconfig: Path) -> dict[str, str]:
    """What the CDK app sets on the functions (cdk/environment.py), pointed at the local resources."""
    return {
        constants.ENV_CONFIG: config.model_dump_json(exclude={"deployment"}),
        constants.ENV_TABLE_NAME: resources.table_name,
        constants.ENV_QUEUE_URL: resources.queue_url,
        constants.ENV_TOPIC_ARN: resources.topic_arn,
        constants.ENV_WEBHOOK_SECRET_ARN: resources.webhook_secret_arn,
        constants.ENV_KUBECONFIG: str(kubeconfig),
        constants.ENV_DRY_RUN: "false",
        constants.ENV_POWERTOOLS_SERVICE_NAME: constants.SERVICE_NAME,
        constants.ENV_POWERTOOLS_METRICS_NAMESPACE: constants.METRICS_NAMESPACE,
        constants.ENV_LOG_LEVEL: "INFO",  # into functions.log; the console shows the timeline
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
    }


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration; the previous values come back after."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _logging_to(stream: TextIO) -> Iterator[None]:
    """Standard-library logging (adapters, botocore, moto) goes to the log file, not the console, as
    JSON lines like the functions' own (Powertools' formatter), so the file is one `jq` can read."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LambdaPowertoolsFormatter(service="local", name="%(name)s"))
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def _forget_clients() -> None:
    """The process-wide boto3 clients must be (re)built against this run's endpoint."""
    clients.clear_clients()
    clear_fast_clients()


def _print_header(
    console: Console, scenario: Scenario, config: ScalerConfig, endpoint: str, kube_url: str, speed: float
) -> None:
    timings, policy = scenario.timings, config.policy
    groups = []
    for group in config.node_groups:
        cap = timings.capacity.get(group.asg_name)
        shortage = f", EC2 has capacity for {cap} instance(s) only" if cap is not None else ""
        groups.append(f"{group.name} ({group.instance_type}, ${group.price_per_hour}/h{shortage})")
    pace = f"{speed:g}x, 1 simulated minute = {60 / speed:.1f} s" if speed > 0 else "as fast as possible"
    header = [
        f"backlog-scaler demo: scenario {scenario.name!r}, {len(scenario.jobs)} jobs, "
        f"cluster {config.cluster_name!r}",
        f"  node groups: {'; '.join(groups)}",
        f"  AWS (moto): {endpoint}   Kubernetes API (fake): {kube_url}",
        f"  world: boot {timings.boot_seconds}s, GPUs advertised {timings.gpu_delay_seconds}s later, "
        f"schedule every {timings.schedule_seconds}s, step {timings.step_seconds}s ({pace})",
        f"  policy: idle {policy.idle_seconds}s, scale-down delay after scale-up "
        f"{policy.scale_down_delay_after_add_seconds}s, backoff {policy.backoff_initial_seconds}s "
        f"doubling to {policy.backoff_max_seconds}s",
        "",
        f"{'time':>8}  {'source':<{SOURCE_WIDTH}} what happened",
    ]
    for text in header:
        console.print(text)


def _names(names: Iterable[str], limit: int = 4) -> str:
    items = list(names)
    return ", ".join(items[:limit]) + (f" +{len(items) - limit} more" if len(items) > limit else "")
