"""The status ConfigMap: what the scaler is doing and why, where kubectl users look.

As cluster-autoscaler keeps `kube-system/cluster-autoscaler-status` (its clusterstate registry writes
it every loop; FAQ "How can I check what is going on in CA?"), each reconcile keeps
`<kubernetes.status_namespace>/backlog-scaler-status` (`constants.STATUS_CONFIGMAP`), its JSON under
`data["status.json"]`: the run (time, trigger, result), per group (desired, ready, booting, backoff,
attrition marks, the plan's reason), the pods nothing can help with their reasons (bounded), and the
drains in progress. `backlog-scaler status` prints it.

- Written only when its content changed: the document as stored is read back and compared without
  the run's time, trigger, duration and action counts (they describe the run that wrote it); an
  unchanged status is still rewritten every STATUS_REFRESH_SECONDS, so `run.at` says the scaler lives.
  Comparing with what is stored (not with a process's memory) holds across cold starts and concurrent
  function instances.
- Under the lease, through the applier (`Applier.publish_status`). A dry run writes it too (`run.dryRun`):
  the ConfigMap is the scaler's own object, and it is where a shadow trial beside another autoscaler
  shows what the scaler would do.
- Never fails the run: a failed read is a write anyway, a failed write a warning in the log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.config import ScalerConfig
from shared.constants import STATUS_CONFIGMAP, STATUS_DATA_KEY
from shared.controller.applier import Applier
from shared.domain.errors import ScalerError
from shared.domain.model import AsgState, Node, ScalerState
from shared.domain.operations import DrainIntent
from shared.domain.plan import Outcome, Plan
from shared.planner.attrition import ATTRITION_TAINT_KEY
from shared.ports import Cluster
from shared.reporting import ActionKind, ActionRecord, ActionStatus

STATUS_VERSION = "backlog-scaler.dev/v1"  # the document's schema, for scripts that read it
STATUS_REFRESH_SECONDS = 300  # an unchanged status is rewritten this often (run.at stays fresh)
MAX_UNHELPED_PODS = 50  # listed; the total is always given (a ConfigMap holds at most 1 MiB)
MAX_ERRORS = 10
MAX_DRAIN_NODES = 20
MAX_TEXT = 300  # characters of one reason or error
_VOLATILE_RUN_KEYS = ("at", "trigger", "durationSeconds", "actions")  # the writing run's, not a change


@dataclass(frozen=True, slots=True)
class StatusFacts:
    """What the status is made of: the end of one run, as the orchestrator's report step has it."""

    cluster: str
    trigger: str
    at: datetime
    duration_seconds: float
    dry_run: bool
    plan: Plan
    actions: tuple[ActionRecord, ...]
    errors: tuple[str, ...]
    pending_pods: int
    asgs: Mapping[str, AsgState]  # by group name: each group as this run left it
    nodes: tuple[Node, ...]  # as read at the start of the run
    state: ScalerState  # as the planner saw it (capacity backoffs of this run included)
    intents: tuple[DrainIntent, ...]  # drains in progress, as read at the start of the run


def status_document(config: ScalerConfig, facts: StatusFacts) -> dict[str, Any]:
    """The status as JSON (pure)."""
    outcomes = [p for p in facts.plan.pods if p.outcome is Outcome.UNHELPED]
    counts: dict[str, int] = {}
    for action in facts.actions:
        counts[str(action.status)] = counts.get(str(action.status), 0) + 1
    return {
        "apiVersion": STATUS_VERSION,
        "cluster": facts.cluster,
        "run": {
            "at": _time(facts.at),
            "trigger": facts.trigger,
            "result": "errors" if facts.errors else "ok",
            "dryRun": facts.dry_run,
            "durationSeconds": round(facts.duration_seconds, 3),
            "actions": dict(sorted(counts.items())),
            "errors": [_text(e) for e in facts.errors[:MAX_ERRORS]],
        },
        "pendingPods": facts.pending_pods,
        "groups": [_group(facts, g.name, g.asg_name) for g in config.node_groups],
        "unhelped": {
            "total": len(outcomes),
            "pods": [
                {"pod": p.pod, "code": str(p.code), "reason": _text(p.reason)}
                for p in sorted(outcomes, key=lambda p: p.pod)[:MAX_UNHELPED_PODS]
            ],
        },
        "drains": [_drain(intent) for intent in sorted(facts.intents, key=lambda i: i.group)],
    }


def _group(facts: StatusFacts, name: str, asg_name: str) -> dict[str, Any]:
    asg = facts.asgs.get(name)
    decision = next((d for d in facts.plan.groups if d.name == name), None)
    backoff = facts.state.groups.get(name)
    until = backoff.backoff_until if backoff is not None else None
    row: dict[str, Any] = {"name": name, "asgName": asg_name}
    if asg is None:
        return {**row, "why": _text(decision.reason if decision else "the Auto Scaling group was not found")}
    ready_nodes = {n.instance_id: n for n in facts.nodes if n.instance_id and n.ready}
    live = [i for i in asg.instances if i.is_live]
    ready = [i for i in live if i.instance_id in ready_nodes]
    return {
        **row,
        "desired": asg.desired,
        "min": asg.min_size,
        "max": asg.max_size,
        "ready": len(ready),
        "booting": _booting(asg, len(live), len(ready)),
        "backoffUntil": _time(until) if until is not None and until > facts.at else None,
        "marked": len(_marked(facts, {ready_nodes[i.instance_id].name for i in ready})),
        "why": _text(decision.reason if decision else ""),
    }


def _booting(asg: AsgState, live: int, ready: int) -> int:
    """Nodes asked for and not (yet) Ready: launched instances without a Ready node, and the desired
    capacity set this run that has no instance yet (in a group counting units, instances only)."""
    asked = live if asg.units is not None else max(live, asg.desired)
    return max(0, asked - ready)


def _marked(facts: StatusFacts, names: set[str]) -> set[str]:
    """The group's nodes carrying the attrition taint after this run's marks and unmarks."""
    marked = {
        n.name for n in facts.nodes if n.name in names and any(t.key == ATTRITION_TAINT_KEY for t in n.taints)
    }
    for action in facts.actions:
        if action.status is ActionStatus.DONE and action.target in names:
            if action.kind is ActionKind.MARK:
                marked.add(action.target)
            elif action.kind is ActionKind.UNMARK:
                marked.discard(action.target)
    return marked


def _drain(intent: DrainIntent) -> dict[str, Any]:
    return {
        "group": intent.group,
        "nodes": list(intent.nodes[:MAX_DRAIN_NODES]),
        "nodeCount": len(intent.nodes),
        "requestedAt": _time(intent.requested_at),
        "expiresAt": _time(intent.expires_at),
        # Nodes keep the terms of the request that put them in the drain: forced if any node is.
        "force": any(intent.terms_of(n).delete_after is not None for n in intent.nodes),
        "heldCount": len(intent.held),  # nodes only held for an interruption warning
        "requestedBy": _text(intent.requested_by),
    }


def _time(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def needs_write(stored: Mapping[str, str] | None, document: Mapping[str, Any], now: datetime) -> bool:
    """Whether `document` must be written over what the ConfigMap holds (None: unknown or absent)."""
    previous = _parsed(stored)
    if previous is None or _comparable(previous) != _comparable(document):
        return True
    try:
        written = datetime.fromisoformat(str(previous["run"]["at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return True
    return now - written >= timedelta(seconds=STATUS_REFRESH_SECONDS)


def _parsed(stored: Mapping[str, str] | None) -> dict[str, Any] | None:
    if not stored or STATUS_DATA_KEY not in stored:
        return None
    try:
        document = json.loads(stored[STATUS_DATA_KEY])
    except ValueError:
        return None
    return document if isinstance(document, dict) and isinstance(document.get("run"), dict) else None


def _comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    run = {k: v for k, v in document["run"].items() if k not in _VOLATILE_RUN_KEYS}
    return {**document, "run": run}


def publish_status(cluster: Cluster, applier: Applier, config: ScalerConfig, facts: StatusFacts) -> bool:
    """Write the status ConfigMap when it changed (see the module docstring); True when written."""
    namespace = config.kubernetes.status_namespace
    document = status_document(config, facts)
    try:
        stored = cluster.get_config_map(namespace, STATUS_CONFIGMAP)
    except ScalerError:
        stored = None  # unknown: writing the same content again is harmless
    if not needs_write(stored, document, facts.at):
        return False
    text = json.dumps(document, indent=2, ensure_ascii=False)
    return applier.publish_status(namespace, STATUS_CONFIGMAP, {STATUS_DATA_KEY: text})
