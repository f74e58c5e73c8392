"""`backlog-scaler status`: the deployed scaler's status ConfigMap, read through the user's kubeconfig.

What `kubectl get cm -n kube-system backlog-scaler-status -o yaml` shows, as a table (or the JSON as
written, `--format json`); the document is built by `shared.controller.status`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from shared.constants import DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP, STATUS_DATA_KEY
from shared.domain.durations import short_duration
from shared.domain.errors import InputError, ScalerError

DEFAULT_KUBECONFIG = "~/.kube/config"


def add_commands(commands: Any) -> None:
    """Register `status` on the CLI's subcommands."""
    s = commands.add_parser(
        "status",
        help="print the deployed scaler's status (its ConfigMap) through your kubeconfig",
        description="Print the status the scaler writes on each run that changes it (and every 5 "
        "minutes): the last run, each group, the pods it cannot help and why, drains in progress.",
    )
    s.add_argument(
        "--kubeconfig",
        help=f"kubeconfig file (default: $KUBECONFIG, else {DEFAULT_KUBECONFIG})",
    )
    s.add_argument("--context", help="kubeconfig context (default: its current-context)")
    s.add_argument(
        "--namespace",
        "-n",
        default=DEFAULT_STATUS_NAMESPACE,
        help="the scaler's kubernetes.status_namespace (default: %(default)s)",
    )
    s.add_argument(
        "--format",
        "-o",
        choices=("table", "json"),
        default="table",
        help="output format (default: %(default)s)",
    )
    s.set_defaults(func=run_status)


def run_status(args: argparse.Namespace) -> int:
    """`backlog-scaler status`: read the status ConfigMap and print it."""
    path = args.kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser(DEFAULT_KUBECONFIG)
    document = read_status(path, args.context, args.namespace)
    if args.format == "json":
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(status_to_table(document, datetime.now(UTC)))
    return 0


def read_status(kubeconfig: str, context: str | None, namespace: str) -> dict[str, Any]:
    """The status document of the ConfigMap in `namespace`; InputError when it cannot be read or the
    scaler never wrote it."""
    # Imported here, not at the top: the kubernetes client and boto3 (EKS auth) cost ~0.3 s of import
    # that every other subcommand (plan above all) would pay for nothing.
    from shared.adapters.kubernetes.cluster import ClusterOptions, KubernetesCluster
    from shared.adapters.kubernetes.transport import transport_from_kubeconfig

    api = transport_from_kubeconfig(kubeconfig, context=context)
    where = f"{namespace}/{STATUS_CONFIGMAP}"
    try:
        data = KubernetesCluster(api, ClusterOptions(throttle_retries=1)).get_config_map(
            namespace, STATUS_CONFIGMAP
        )
    except ScalerError as exc:
        raise InputError(f"cannot read ConfigMap {where}: {exc}") from exc
    finally:
        api.close()
    if data is None:
        raise InputError(
            f"no ConfigMap {where}: apply the RBAC manifest `cdk synth` prints (it creates the ConfigMap), "
            "or pass the --namespace of kubernetes.status_namespace"
        )
    return _document(data, where)


def _document(data: Mapping[str, str], where: str) -> dict[str, Any]:
    text = data.get(STATUS_DATA_KEY)
    if not text:
        raise InputError(
            f"ConfigMap {where} has no {STATUS_DATA_KEY} yet: the scaler has not run since it was created"
        )
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InputError(f"ConfigMap {where}: {STATUS_DATA_KEY} is not JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("run"), dict):
        raise InputError(f"ConfigMap {where}: {STATUS_DATA_KEY} is not a status document")
    return document


def _ago(raw: str | None, now: datetime) -> str:
    if not raw:
        return "-"
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return raw
    seconds = (now - at).total_seconds()
    return f"{short_duration(seconds)} ago" if seconds >= 0 else f"in {short_duration(-seconds)}"


def _columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns three spaces apart, as kubectl prints them."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def status_to_table(document: dict[str, Any], now: datetime) -> str:
    """The status as kubectl-style tables: the run, the groups, the unhelped pods, the drains."""
    run = document["run"]
    mode = " (dry run)" if run.get("dryRun") else ""
    lines = [
        f"cluster {document.get('cluster', '?')}: last run {_ago(run.get('at'), now)} "
        f"({run.get('trigger', '?')}){mode}, result {run.get('result', '?')}, "
        f"{document.get('pendingPods', 0)} pending pod(s)",
        *(f"  error: {e}" for e in run.get("errors") or ()),
        "",
    ]
    groups = [
        (
            g["name"],
            str(g.get("desired", "-")),
            str(g.get("ready", "-")),
            str(g.get("booting", "-")),
            f"{g['min']}/{g['max']}" if "min" in g else "-",
            _ago(g.get("backoffUntil"), now) if g.get("backoffUntil") else "-",
            str(g.get("marked", "-")),
            g.get("why") or "",
        )
        for g in document.get("groups") or ()
    ]
    header = ("GROUP", "DESIRED", "READY", "BOOTING", "MIN/MAX", "BACKOFF", "MARKED", "WHY")
    lines += _columns(header, groups)
    unhelped = document.get("unhelped") or {}
    pods = [(p["pod"], p["code"], p["reason"]) for p in unhelped.get("pods") or ()]
    if pods:
        lines += ["", f"unhelped pods: {unhelped.get('total', len(pods))} (listed: {len(pods)})"]
        lines += _columns(("POD", "REASON", "MESSAGE"), pods)
    drains = [
        (
            d["group"],
            ",".join(d["nodes"]) + ("..." if d.get("nodeCount", 0) > len(d["nodes"]) else ""),
            _ago(d.get("requestedAt"), now),
            _ago(d.get("expiresAt"), now),
            "yes" if d.get("force") else "no",
        )
        for d in document.get("drains") or ()
    ]
    if drains:
        lines += ["", "drains in progress"]
        lines += _columns(("GROUP", "NODES", "REQUESTED", "EXPIRES", "FORCE"), drains)
    return "\n".join(lines)
