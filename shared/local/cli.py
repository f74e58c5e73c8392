"""`backlog-scaler`: the decision engine on local files (`plan`), trace replay (`simulate`), demo,
and the deployed scaler's status (`status`)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from shared.collector import gc_paused
from shared.config import ScalerConfig, load_config
from shared.domain.dra import DraObjects
from shared.domain.errors import ConfigError, InputError
from shared.domain.model import AsgState, InstanceType, ScalerState, Snapshot
from shared.formats.aws import (
    asgs_from_describe,
    capacity_reservations_from_describe,
    instance_types_from_describe,
    reservation_ids_of,
    with_reservations,
)
from shared.formats.kubernetes import KubeObjects, nodes_from_list, objects_from_documents, pods_from_list
from shared.formats.lifecycle import instance_statuses_from_describe, launch_templates_from_describe
from shared.formats.state import state_from_json
from shared.local import json_io
from shared.local.explain import explain_pod, group_summaries
from shared.local.help_format import CliParser
from shared.local.plan_output import explanation_to_json, explanation_to_text, plan_to_json, plan_to_table
from shared.planner import plan
from shared.webhook_auth import admission_path_token, secret_value

# The documents this run read. A `plan` process ends without teardown (_exit_without_teardown), so
# held here they are never freed: dropped after parsing, their millions of decoded objects would be
# freed one by one mid-run for nothing (~35 ms of the spread case of bench/plan_bench.py, ~70 ms of
# the gpu case). A caller in process (tests) has them released when main returns.
_documents: list[Any] = []


def _read_json(path: str) -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        document = json_io.loads(data)
    except json_io.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    _documents.append(document)
    return document


def _parse_now(raw: str | None) -> datetime:
    if raw is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"--now: not an ISO 8601 timestamp: {raw!r}") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _unique(objects: Sequence[Any], key: Any) -> tuple[Any, ...]:
    # Dumps may overlap (--pods and an --objects file holding pods too): the first copy wins.
    seen: dict[str, Any] = {}
    for obj in objects:
        seen.setdefault(key(obj), obj)
    return tuple(seen.values())


def _read_objects(paths: Sequence[str]) -> list[KubeObjects]:
    found = []
    for path in paths:
        objects = objects_from_documents([(_read_json(path), path)])
        if objects.skipped:
            kinds = ", ".join(sorted(set(objects.skipped)))
            print(
                f"backlog-scaler: {path}: skipped {len(objects.skipped)} object(s) of kind(s) {kinds}",
                file=sys.stderr,
            )
        found.append(objects)
    return found


def _snapshot_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """Pods, nodes and the objects the filters read, from --pods, --nodes and every --objects file."""
    extra = _read_objects(args.objects or ())
    if args.pods is None and not any("Pod" in o.kinds for o in extra):
        raise InputError(
            "no pods: pass --pods (kubectl get pods -A -o json) or an --objects file with Pod objects"
        )
    if args.nodes is None and not any("Node" in o.kinds for o in extra):
        raise InputError(
            "no nodes: pass --nodes (kubectl get nodes -o json; an empty NodeList for a cluster without "
            "nodes) or an --objects file with Node objects"
        )
    pods = list(pods_from_list(_read_json(args.pods), args.pods)) if args.pods else []
    nodes = list(nodes_from_list(_read_json(args.nodes), args.nodes)) if args.nodes else []
    namespaces: dict[str, Any] = {}
    for o in extra:
        pods.extend(o.pods)
        nodes.extend(o.nodes)
        for name, labels in o.namespaces.items():
            namespaces.setdefault(name, labels)
    return {
        "pods": _unique(pods, lambda p: p.key),
        "nodes": _unique(nodes, lambda n: n.name),
        "daemonsets": _unique([d for o in extra for d in o.daemonsets], lambda d: d.key),
        "pvcs": _unique([c for o in extra for c in o.pvcs], lambda c: c.key),
        "pvs": _unique([v for o in extra for v in o.pvs], lambda v: v.name),
        "storage_classes": _unique([c for o in extra for c in o.storage_classes], lambda c: c.name),
        "namespaces": namespaces,
        "pod_groups": _unique([g for o in extra for g in o.pod_groups], lambda g: f"{g.kind}:{g.key}"),
        "provisioning_requests": _unique(
            [r for o in extra for r in o.provisioning_requests], lambda r: r.key
        ),
        "pod_templates": _unique([t for o in extra for t in o.pod_templates], lambda t: t.key),
        "dra": DraObjects(
            _unique([s for o in extra for s in o.dra.slices], lambda s: s.name),
            _unique([c for o in extra for c in o.dra.classes], lambda c: c.name),
            _unique([c for o in extra for c in o.dra.claims], lambda c: c.key),
            _unique([t for o in extra for t in o.dra.templates], lambda t: t.key),
        ),
    }


def _asgs(args: argparse.Namespace, config: ScalerConfig) -> dict[str, AsgState]:
    """The groups of --asgs, with the capacity reservations of --reservations they launch into,
    attached by the same rule as the fleet adapter's."""
    groups = asgs_from_describe(_read_json(args.asgs), args.asgs)
    if not args.reservations:
        return groups
    described = capacity_reservations_from_describe(_read_json(args.reservations), args.reservations)
    configured = {g.asg_name: g.capacity_reservation_ids for g in config.node_groups}
    for name, asg in sorted(groups.items()):
        missing = [r for r in reservation_ids_of(asg, configured) if r not in described]
        if missing:  # the reconcile would find none either if they no longer exist: say so, plan on
            print(
                f"{args.reservations}: {name} launches into {', '.join(missing)}: not described",
                file=sys.stderr,
            )
    return with_reservations(groups, described, configured)


def _instance_types(args: argparse.Namespace) -> dict[str, InstanceType]:
    """The instance types of --instance-types; a malformed entry is named and left out."""
    if not args.instance_types:
        return {}
    found, problems = instance_types_from_describe(_read_json(args.instance_types), args.instance_types)
    for problem in problems:
        print(problem, file=sys.stderr)
    return found


def _lifecycle_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """EC2 status checks (--instance-status) and launch template versions (--launch-templates)."""
    found: dict[str, Any] = {}
    if args.instance_status:
        found["instance_statuses"] = instance_statuses_from_describe(
            _read_json(args.instance_status), args.instance_status
        )
    if args.launch_templates:
        found["launch_templates"] = launch_templates_from_describe(
            _read_json(args.launch_templates), args.launch_templates
        )
    return found


def run_plan(args: argparse.Namespace) -> int:
    """`backlog-scaler plan`: read dumps, plan, print."""
    # One short process whose objects all live until it exits: the cyclic collector would only
    # re-scan millions of parsed JSON objects (it took 3/4 of the parse time of a 40 MB dump).
    with gc_paused():
        return _plan(args)


def _plan(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    snapshot = Snapshot(
        **_snapshot_inputs(args),
        asgs=_asgs(args, config),
        instance_types=_instance_types(args),
        state=state_from_json(_read_json(args.state), args.state) if args.state else ScalerState(),
        **_lifecycle_inputs(args),
    )
    now = _parse_now(args.now)
    if args.explain:
        explanation = explain_pod(snapshot, config, now, args.explain)
        if args.format == "json":
            print(json_io.dumps_indented(explanation_to_json(explanation)))
        else:
            print(explanation_to_text(explanation))
        return 0
    result = plan(snapshot, config, now)
    if args.format == "json":
        print(json_io.dumps_indented(plan_to_json(result)))
    else:
        print(plan_to_table(result, group_summaries(snapshot, config, now), show_all=args.all))
    return 0


def run_admission_token(args: argparse.Namespace) -> int:
    """`backlog-scaler admission-token`: the path token of the admission webhook URL."""
    secret = sys.stdin.read().strip()
    if not secret:
        raise InputError("stdin: expected the webhook secret (the SecretString of WebhookSecretArn)")
    print(admission_path_token(secret_value(secret)))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only for --version (~15 ms)

    try:
        return version("backlog-scaler")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class _VersionAction(argparse.Action):
    """argparse's "version" action, with the version looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


# Sub-commands that live in their own packages, by the module that registers them. Only the module of
# the command being run is imported: `plan` loads neither the simulator nor the kubernetes client and
# boto3 that `status` needs (~0.4 s of a plan process's start, issue 25); help and a mistyped command
# load them all, so every command is listed and suggested.
COMMAND_MODULES = {
    "simulate": "shared.local.sim.cli",
    "demo": "shared.local.demo.cli",
    "status": "shared.local.status_cli",
}


def _add_plan_command(commands: Any) -> None:
    """`plan`: the decision engine on kubectl and AWS CLI dumps."""
    p = commands.add_parser("plan", help="show what the scaler would do on kubectl/aws dumps")
    p.add_argument("--pods", help="kubectl get pods -A -o json (or give pods in --objects)")
    p.add_argument("--nodes", help="kubectl get nodes -o json (or give nodes in --objects)")
    p.add_argument(
        "--objects",
        action="append",
        metavar="FILE",
        help="more objects, repeatable: kubectl get daemonsets,pvc,pv,storageclasses,namespaces -A -o json, "
        "kubectl get provisioningrequests,podtemplates,podgroups -A -o json "
        "(any kubectl JSON: a List of mixed kinds or one object; pods and nodes may come from here too)",
    )
    p.add_argument("--asgs", required=True, help="aws autoscaling describe-auto-scaling-groups")
    p.add_argument(
        "--reservations",
        metavar="FILE",
        help="aws ec2 describe-capacity-reservations: the ODCRs and Capacity Blocks the groups launch "
        "into (named by their CapacityReservationTarget or node_groups[].capacity_reservation_ids)",
    )
    p.add_argument(
        "--instance-types",
        metavar="FILE",
        help="aws ec2 describe-instance-types --instance-types <the groups' types>: architecture, GPUs, "
        "Neuron, EFA and instance store of the nodes (as the reconcile reads them from EC2)",
    )
    p.add_argument(
        "--instance-status",
        metavar="FILE",
        help="aws ec2 describe-instance-status --include-all-instances: status checks and scheduled "
        "events of the groups' instances (node repair; instances of other groups are ignored)",
    )
    p.add_argument(
        "--launch-templates",
        metavar="FILE",
        help="aws ec2 describe-launch-templates: resolves $Latest/$Default for drift (node rotation)",
    )
    p.add_argument("--config", required=True, help="scaler config (YAML or JSON)")
    p.add_argument(
        "--state", help="stored state: idle-since per node, backoff per group (JSON; default: none stored)"
    )
    p.add_argument("--now", help="evaluate at this time (ISO 8601; default: now)")
    p.add_argument(
        "--format", choices=("table", "json"), default="table", help="output format (default: table)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="table: list every pod of every reason (default: long lists are folded)",
    )
    p.add_argument(
        "--explain",
        metavar="NAMESPACE/POD",
        help="print each scheduler filter's verdict for this pod on every group's template node, "
        "and its outcome in the plan",
    )
    p.set_defaults(func=run_plan)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; given the command about to run, without the other packages' commands."""
    parser = CliParser(prog="backlog-scaler", description=__doc__)
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_plan_command(commands)
    t = commands.add_parser(
        "admission-token",
        help="print the admission webhook's path token for the secret read on stdin",
        description="Print the path token of the admission webhook URL. The webhook secret (the "
        "SecretString of WebhookSecretArn) is read from stdin, never from an argument, so it stays "
        "out of the shell history and the process list.",
    )
    t.set_defaults(func=run_admission_token)
    # The simulator, the local run and the status reader register their own commands.
    for name, module in COMMAND_MODULES.items():
        if command is None or command == name:
            importlib.import_module(module).add_commands(commands)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command argv runs when it names one exactly; None (every command) otherwise."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    known = {"plan", "admission-token", *COMMAND_MODULES}
    return first if first in known else None


def main(argv: Sequence[str] | None = None) -> int:
    entry = argv is None  # run as the process itself (console script, python -m), not by a caller
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse(build_parser(_command_of(argv)), argv)
    if entry and args.func is run_plan:
        # The collector stays paused until the process leaves: resumed first, its next young
        # collection would traverse every object the run made (~0.1 s of the spread case).
        with gc_paused():
            _exit_without_teardown(_run(args))
    try:
        return _run(args)
    finally:
        _documents.clear()


# What CPython exits with when it cannot flush stdout at exit: the reader of our output is gone.
STDOUT_GONE = 120


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """parse_args, but an option the command does not know is refused by the command's own parser:
    its usage, and the closest of its options (argparse's top-level error shows neither)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = next(
            (
                action.choices[args.command]
                for action in parser._actions
                if isinstance(action, argparse._SubParsersAction) and args.command in action.choices
            ),
            parser,
        )
        close = difflib.get_close_matches(extras[0], list(sub._option_string_actions), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        sub.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    return args


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except (InputError, ConfigError) as exc:
        # One problem per line (a config error lists every bad field), each naming its place.
        for line in str(exc).splitlines() or [""]:
            print(f"backlog-scaler: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `plan ... | head`, `simulate ... | head`: the reader stopped reading
        return stdout_gone()


def stdout_gone() -> int:
    """Leave quietly once stdout's reader is gone (CPython's advice, the signal module's "Note on
    SIGPIPE"): what is left in stdout's buffer goes to /dev/null, so the interpreter's last flush
    cannot raise and print a traceback either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a caller replaced it): nothing left to flush
        pass
    finally:
        os.close(devnull)
    return STDOUT_GONE


def _exit_without_teardown(code: int) -> NoReturn:
    """End a `plan` process once its output is out, without freeing its objects one by one.

    The collector is paused to the end (main), so the run's object graph (its cycles keep the snapshot
    alive) is collected and freed by the interpreter's exit: ~0.3 s of a 1.9 s plan of the
    spread case of bench/plan_bench.py (issue 25). mypy leaves the same way (mypy/main.py,
    util.hard_exit). Nothing of plan's is left to do at exit: no files open for writing, no
    atexit handler of its own.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # stdout closed early (`| head`)
        code = code or stdout_gone()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
