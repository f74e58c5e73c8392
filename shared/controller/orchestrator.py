"""Reconcile: gather -> plan -> re-validate -> apply -> report, over the ports only.

One `reconcile` rebuilds the whole picture (pods, nodes, groups, failed launches, stored state), plans
with the pure planner, re-reads every node right before a destructive step, applies through the one
applier, and reports. The rules a run meets, in order:

- One writer per cluster: the run takes the lease (`held_lease`); a held lease means another run is
  doing the work, so this one returns `lease-held` without touching anything. Dry runs write nothing.
- Never act on partial data: if any read fails, the run changes nothing and raises (the trigger
  retries). A re-read that fails later skips its object; one refused for credentials stops every
  destructive write of the run.
- Capacity failures are recorded (backoff) before planning, so the same run spills to other groups.
- Every cordon and termination is re-validated on a fresh read of its node (`safety`).
- Terminations (with decrement), drains, desired capacity against a fresh describe
  (`safety.desired_to_set`), cordons (conflict-safe), uncordons, attrition marks, migrations
  (cordon, re-validate on a fresh listing, evict), then the state is saved.
- A write that fails on one object is isolated (the applier's policy); only a lost lease ends the run.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial

from shared.controller.applier import Applier
from shared.controller.attrition import apply_marks
from shared.controller.deps import Deps
from shared.controller.force_scale_down import drain  # every reconcile continues the stored drains
from shared.controller.gather import Gathered, foreign_reason, gather
from shared.controller.provisioning import answer_requests
from shared.controller.repair import cordon_unhealthy
from shared.controller.report import PodEvents, ReconcileResult, RunInfo, RunStatus, finish, log_plan, notify
from shared.controller.status import StatusFacts, publish_status
from shared.domain.errors import (
    AuthError,
    ClusterActionError,
    LeaseHeldError,
    ReadError,
    ScalerError,
    ThrottledError,
)
from shared.domain.model import GroupState, Node, Pod, PodMemory, ScalerState, Snapshot
from shared.domain.plan import Plan
from shared.domain.safety import cordon_blocker, desired_to_set, overdrawn_budget, termination_blocker
from shared.reporting import ActionKind, ActionStatus


def reconcile(deps: Deps, events: PodEvents, trigger: str) -> ReconcileResult:
    """One level-triggered pass. A failed read raises its ScalerError (ReadError, AuthError,
    ThrottledError) and nothing is changed; failed writes are reported in the result instead.
    """
    started, t0 = deps.clock.now(), time.perf_counter()
    try:
        with deps.lease(wait=False) as guard:
            run = RunInfo(trigger, started, t0, deps.applier(guard))
            return _reconcile(deps, events, run)
    except LeaseHeldError as exc:  # only the acquisition: a lease lost mid-run is handled inside
        deps.reporter.log(
            "info", "reconcile skipped: another run holds the lease", trigger=trigger, detail=str(exc)
        )
        return ReconcileResult(trigger, RunStatus.LEASE_HELD, deps.dry_run, started, detail=str(exc))
    finally:
        deps.reporter.flush()


def _reconcile(deps: Deps, events: PodEvents, run: RunInfo) -> ReconcileResult:
    ports = deps.ports
    try:
        gathered = gather(deps.config, ports.cluster, ports.fleet, ports.state, run.started_at)
    except ScalerError as exc:
        deps.reporter.log(
            "error",
            "gathering failed: nothing is changed this run",
            trigger=run.trigger,
            error=str(exc),
            error_type=type(exc).__name__,
        )
        raise
    for asg_name in gathered.foreign:
        group = next(g.name for g in deps.config.node_groups if g.asg_name == asg_name)
        reason = foreign_reason(asg_name, deps.config.cluster_name)
        run.applier.note(ActionKind.SET_DESIRED, asg_name, group, reason, ActionStatus.FAILED, reason)
    plan: Plan | None = None
    lost = False
    state = gathered.state
    try:
        state = _record_capacity_failures(deps, run, gathered)
        plan = _plan(deps, gathered, state, run.started_at)
        _apply(deps, run, plan, gathered)
    except LeaseHeldError as exc:
        # Another run took the lease: from here on it owns the cluster; this run writes nothing more.
        lost = True
        run.applier.lease_lost(exc)
    if plan is not None and not lost:
        events.record(run.applier, plan, gathered.pods, run.tally, run.started_at)
    notify(deps.notifier, deps.reporter, deps.config.cluster_name, run.trigger, run.applier)
    result = finish(deps.config, deps.reporter, run, plan, gathered.pods, gathered.asgs)
    if plan is not None and not lost:
        _publish_status(deps, run, result, plan, gathered, state)
    return result


def _publish_status(
    deps: Deps, run: RunInfo, result: ReconcileResult, plan: Plan, gathered: Gathered, state: ScalerState
) -> None:
    """The status ConfigMap, last: it tells what the run did (shared.controller.status)."""
    asgs = {}
    for group in deps.config.node_groups:
        asg = run.tally.final.get(group.name) or gathered.asgs.get(group.asg_name)
        if asg is not None:
            asgs[group.name] = asg
    facts = StatusFacts(
        cluster=deps.config.cluster_name,
        trigger=run.trigger,
        at=run.started_at,
        duration_seconds=result.duration_seconds,
        dry_run=result.dry_run,
        plan=plan,
        actions=result.actions,
        errors=result.errors,
        pending_pods=result.pending_pods,
        asgs=asgs,
        nodes=gathered.nodes,
        state=state,
        intents=gathered.intents,
    )
    publish_status(deps.ports.cluster, run.applier, deps.config, facts)


# ---------------------------------------------------------------------------------------- plan


def _record_capacity_failures(deps: Deps, run: RunInfo, gathered: Gathered) -> ScalerState:
    """Back off groups with new capacity failures; returns the state the planner must see.

    Failures that started before the group's current backoff ends belong to the episode already
    counted (the ASG keeps retrying until desired is set back), so each episode doubles once.
    """
    groups = dict(gathered.state.groups)
    for name, failures in sorted(gathered.failures.items()):
        current = groups.get(name, GroupState())
        fresh = [
            f
            for f in failures
            if f.is_capacity and (current.backoff_until is None or f.at >= current.backoff_until)
        ]
        if not fresh:
            continue
        newest = max(fresh, key=lambda f: (f.at, f.activity_id))
        reason = f"{newest.kind}: {newest.message}".strip(": ")
        until = run.applier.back_off(name, newest.at, reason, deps.config.policy)
        if until is not None:
            groups[name] = replace(current, backoff_until=until)
            if not run.applier.dry_run:
                run.tally.backoffs[name] += 1
    return replace(gathered.state, groups=groups)


def _plan(deps: Deps, gathered: Gathered, state: ScalerState, now: datetime) -> Plan:
    # Nodes held for an interruption warning (also within an operator's drain): the planner buys room
    # for their pods ahead.
    interrupted = frozenset(n for intent in gathered.intents for n in intent.held)
    plan = deps.planner(replace(gathered.snapshot(state), interrupted=interrupted), deps.config, now)
    log_plan(deps.reporter, plan)
    return plan


# ---------------------------------------------------------------------------------------- apply


def _apply(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    _terminate(deps, run, plan, gathered)
    _delete_leftovers(deps, run, plan, gathered)
    _continue_drains(deps, run, gathered)
    _set_desired(deps, run, plan, gathered)
    _cordon(deps, run, plan, gathered)
    _uncordon(run.applier, plan, gathered.draining)
    fresh = partial(_fresh, deps, run.applier)
    apply_marks(run.applier, plan, gathered.draining, fresh)
    run.applier.record_events(cordon_unhealthy(run.applier, plan, gathered.draining, fresh, run.started_at))
    _migrate(deps, run, plan, gathered)
    answer_requests(run.applier, plan, run.tally.failed_groups)
    _save_state(deps, run, plan, gathered)


def _continue_drains(deps: Deps, run: RunInfo, gathered: Gathered) -> None:
    """The stored drains' pass, handed each group's ASG as this run's terminations left it."""
    asgs = {}
    for intent in gathered.intents:
        if intent.group in deps.config.group_names:
            asg = gathered.asgs.get(deps.config.group(intent.group).asg_name)
            if asg is not None:
                asgs[intent.group] = replace(asg, desired=asg.desired - run.tally.decrements[intent.group])
    for removal in drain.continue_drains(deps, run.applier, gathered.intents, asgs, run.started_at):
        run.tally.remove(removal.group, removal.instance_id, decrement=True)


def _fresh(deps: Deps, applier: Applier, name: str) -> tuple[Node | None, tuple[Pod, ...]] | str:
    """A fresh read of one node and its pods for re-validation, or why it failed (credentials refused:
    no destructive write for the rest of the run)."""
    try:
        node = deps.ports.cluster.get_node(name)
        return node, deps.ports.cluster.list_pods_on_node(name) if node is not None else ()
    except AuthError as exc:
        applier.forbid_destructive(exc)
        return f"could not re-read the node: {exc}"
    except (ReadError, ThrottledError) as exc:
        return f"could not re-read the node: {exc}"


def _migrate(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    if plan.migrate:
        # Loaded only when the plan moves jobs (migration is off by default): not at every cold start.
        from shared.controller.migration import apply_migrations

        reads = (
            partial(_fresh, deps, run.applier),
            partial(_fresh_snapshot, deps, run.applier, gathered),
            partial(_evictions_refused, deps, run.applier),
        )
        store = (deps.ports.state, run.tally)
        apply_migrations(run.applier, plan, deps.config, run.started_at, gathered.draining, reads, store)


def _evictions_refused(deps: Deps, applier: Applier, pods: Sequence[Pod]) -> str | None:
    """Why the API server would not evict every one of `pods` now, one after another, or None: a
    PodDisruptionBudget they would run dry (read fresh: a dry run never uses a budget up, so the dry
    runs alone each pass against the same disruptionsAllowed), then each eviction's dry run. Budgets
    that cannot be read refuse (credentials refused: no destructive write for the rest of the run)."""
    try:
        budgets = deps.ports.cluster.list_pod_disruption_budgets()
    except AuthError as exc:
        applier.forbid_destructive(exc)
        return f"could not read the PodDisruptionBudgets: {exc}"
    except (ReadError, ThrottledError) as exc:
        return f"could not read the PodDisruptionBudgets: {exc}"
    overdrawn = overdrawn_budget(pods, budgets)
    if overdrawn:
        return overdrawn
    return next((why for pod in pods if (why := _eviction_refused(deps, applier, pod))), None)


def _eviction_refused(deps: Deps, applier: Applier, pod: Pod) -> str | None:
    """Why the API server would not evict `pod` now (an eviction dry run), or None."""
    try:
        if deps.ports.cluster.can_evict(pod.namespace, pod.name):
            return None
        return f"a PodDisruptionBudget refuses evicting {pod.key} now (dry run)"
    except AuthError as exc:
        applier.forbid_destructive(exc)
        return f"could not check the eviction of {pod.key}: {exc}"
    except ClusterActionError as exc:
        return f"could not check the eviction of {pod.key}: {exc}"


def _fresh_snapshot(deps: Deps, applier: Applier, gathered: Gathered) -> Snapshot | str:
    """The run's snapshot with pods and nodes listed afresh (a migration's re-validation), or why not."""
    try:
        pods, nodes = deps.ports.cluster.list_pods(), deps.ports.cluster.list_nodes()
    except AuthError as exc:
        applier.forbid_destructive(exc)
        return f"could not re-list the cluster: {exc}"
    except (ReadError, ThrottledError) as exc:
        return f"could not re-list the cluster: {exc}"
    return replace(gathered, pods=pods, nodes=nodes).snapshot(gathered.state)


def _terminate(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    cutoff = deps.config.policy.pod_priority_cutoff
    for termination in plan.terminate:
        if termination.node in gathered.draining:
            continue
        group = termination.group
        asg = gathered.asgs[deps.config.group(group).asg_name]
        if termination.node is not None:
            fresh = _fresh(deps, run.applier, termination.node)
            blocker = (
                fresh
                if isinstance(fresh, str)
                else termination_blocker(termination, cutoff, run.started_at, asg, *fresh)
            )
            if blocker:
                run.applier.note(
                    ActionKind.TERMINATE,
                    termination.node,
                    group,
                    termination.reason,
                    ActionStatus.SKIPPED,
                    blocker,
                )
                continue
        if run.applier.terminate(
            termination.instance_id,
            termination.node,
            group,
            termination.reason,
            decrement=termination.decrement,
            region=asg.region,
        ):
            run.tally.remove(group, termination.instance_id, decrement=termination.decrement)
            if termination.cause:
                run.tally.replaced[(group, termination.cause)] += 1


def _delete_leftovers(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    """Delete Nodes of instances that are gone, each re-read first: still NotReady, still cordoned by
    the scaler, still the same instance (a new instance may come up under a reused name)."""
    instance_of = {n.name: n.instance_id for n in gathered.nodes}
    for action in plan.delete_nodes:
        fresh = _fresh(deps, run.applier, action.node)
        node = None if isinstance(fresh, str) else fresh[0]
        if node is None and not isinstance(fresh, str):
            continue  # gone already: what the delete wanted
        blocker = _leftover_blocker(node, instance_of.get(action.node)) if node else str(fresh)
        if blocker:
            run.applier.note(
                ActionKind.DELETE_NODE,
                action.node,
                action.group,
                action.reason,
                ActionStatus.SKIPPED,
                blocker,
            )
            continue
        run.applier.delete_node(action.node, action.group, action.reason)


def _leftover_blocker(node: Node, instance_id: str | None) -> str:
    if node.ready:
        return "the node is Ready again"
    if not node.cordoned_by_scaler:
        return "the node is no longer cordoned by the scaler"
    if node.instance_id != instance_id:
        return f"the node is now instance {node.instance_id}"
    return ""


def _set_desired(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    tally, applier = run.tally, run.applier
    planned_decrements = Counter(
        t.group for t in plan.terminate if t.decrement and t.node not in gathered.draining
    )
    targets: dict[str, int] = {}
    for decision in plan.groups:
        asg = gathered.asgs.get(decision.asg_name)
        if asg is None:
            continue
        # The plan's desired counts its own decrements; what was really removed is what counts now.
        targets[decision.name] = (
            decision.desired + planned_decrements[decision.name] - tally.decrements[decision.name]
        )
        tally.final[decision.name] = tally.after_removals(decision.name, asg)
    changing = [g for g, t in targets.items() if desired_to_set(t, tally.final[g]) is not None]
    if not changing or not _refresh_groups(deps, run, changing):
        return
    for group in changing:
        asg = tally.final[group]
        desired = desired_to_set(targets[group], asg)
        if desired is None:
            continue
        reason = f"{asg.desired} -> {desired}: {plan.group(group).reason}"
        if applier.set_desired(asg, desired, group, reason):
            if desired > asg.desired:
                tally.grown[group] += desired - asg.desired
            tally.final[group] = replace(asg, desired=desired)
        else:
            tally.failed_groups.add(group)


def _refresh_groups(deps: Deps, run: RunInfo, groups: list[str]) -> bool:
    """Describe the groups again right before setting desired; False (all reported) if that fails."""
    if run.applier.dry_run:
        return True
    names = [deps.config.group(g).asg_name for g in groups]
    try:
        fresh = deps.ports.fleet.describe_groups(names)
    except ScalerError as exc:
        if isinstance(exc, AuthError):
            run.applier.forbid_destructive(exc)
        for group in groups:
            run.tally.failed_groups.add(group)
            run.applier.note(
                ActionKind.SET_DESIRED,
                group,
                group,
                "re-read before setting desired",
                ActionStatus.FAILED,
                str(exc),
            )
        return False
    for group, name in zip(groups, names, strict=True):
        if name in fresh:
            run.tally.final[group] = fresh[name]
    return True


def _cordon(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    cutoff = deps.config.policy.pod_priority_cutoff
    for action in plan.cordon:
        if action.node in gathered.draining:
            continue
        asg = gathered.asgs.get(deps.config.group(action.group).asg_name)
        fresh = _fresh(deps, run.applier, action.node)
        node = None if isinstance(fresh, str) else fresh[0]
        blocker = fresh if isinstance(fresh, str) else cordon_blocker(cutoff, run.started_at, asg, *fresh)
        if blocker or node is None:
            run.applier.note(
                ActionKind.CORDON,
                action.node,
                action.group,
                action.reason,
                ActionStatus.SKIPPED,
                blocker or "",
            )
            continue
        run.applier.cordon(node, action.group, action.reason, run.started_at, retry_conflict=False)


def _uncordon(applier: Applier, plan: Plan, draining: frozenset[str]) -> None:
    for action in plan.uncordon:
        if action.node not in draining:
            applier.uncordon(action.node, action.group, action.reason)


def _save_state(deps: Deps, run: RunInfo, plan: Plan, gathered: Gathered) -> None:
    """Remember what the next run needs (idle-since, first seen, pod memory, scale times, backoff)."""
    applier, state, now, stored = run.applier, deps.ports.state, run.started_at, gathered.state
    if applier.dry_run:
        return
    stored_idle = {k: v.idle_since for k, v in stored.nodes.items() if v.idle_since}
    if dict(plan.idle_since) != stored_idle:
        applier.save("idle-since", lambda lease: state.save_node_idle_since(lease, plan.idle_since, now))
    if dict(plan.instances_first_seen) != dict(stored.instances_first_seen):
        applier.save(
            "first-seen", lambda lease: state.save_instances_first_seen(lease, plan.instances_first_seen)
        )
    memory = {key: m for key, m in plan.pod_memory.items() if _worth_remembering(m)}
    if memory != dict(stored.pods):
        applier.save("pod memory", lambda lease: state.save_pod_memory(lease, memory))
    for group in sorted(g for g, removed in run.tally.removed.items() if removed):
        applier.save(f"scale-down {group}", partial(state.record_scale_down, group=group, at=now))
    for group in sorted(run.tally.grown):
        applier.save(f"scale-up {group}", partial(state.record_scale_up, group=group, at=now))
    for decision in plan.groups:
        group_state = stored.groups.get(decision.name, GroupState())
        in_backoff = group_state.backoff_until is not None and group_state.backoff_until > now
        if decision.enter_backoff and not in_backoff and not run.tally.backoffs[decision.name]:
            reason = "instances did not become usable in time"
            if applier.back_off(decision.name, now, reason, deps.config.policy) and not applier.dry_run:
                run.tally.backoffs[decision.name] += 1


def _worth_remembering(memory: PodMemory) -> bool:
    """A record that tells the planner something; a uid alone does not, so it is not stored."""
    return bool(
        memory.counted_on or memory.counted_since or memory.distrusted or memory.bought or memory.refused
    )
