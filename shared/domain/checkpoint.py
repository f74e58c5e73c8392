"""Which pods may be moved because they checkpoint, and what a move costs them (pure; `now` passed in).

The one home of the opt-in rule of migration (shared.planner.migration chooses, the controller
re-validates on a fresh read, the simulator moves jobs by it). A pod is movable only when it says it
checkpoints and nothing forbids evicting it:

- `backlog-scaler/checkpoint-interval-seconds`: the job saves its work at least this often;
- `backlog-scaler/last-checkpoint` (RFC 3339): when it last saved, written by the job itself;
- never with `karpenter.sh/do-not-disrupt: "true"` (Karpenter's pod-level opt-out of voluntary
  disruption) or `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` (cluster-autoscaler's
  drain never evicts such a pod: utils/drain/drain.go); node-level protection is
  `shared.domain.safety.protection`, judged by the callers on the whole node.

The work a move loses is the time since the last save: the last-checkpoint annotation while it is
fresh (no older than the interval, or any age when no interval is given), else the full interval
(the worst case of a job that saves that often); never more than the pod has run. A last-checkpoint
more than five minutes ahead of the scaler's clock is not trusted (it would make a move look free):
the interval counts, and without one the pod has not saved.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta

from shared.domain.model import Pod
from shared.domain.numbers import whole_number

ANNOTATION_CHECKPOINT_INTERVAL = "backlog-scaler/checkpoint-interval-seconds"
ANNOTATION_LAST_CHECKPOINT = "backlog-scaler/last-checkpoint"
ANNOTATION_CA_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# policy.migration.max_nodes_per_hour counts the migrations of this window (the store keeps them).
MIGRATION_WINDOW = timedelta(hours=1)
# The moves of a job (policy.migration.max_moves_per_job) are remembered as long as the job is
# present, however long ago it moved: a job that runs for months is moved at most that many times in
# all (with a 30-day memory, the full Philly replay moved jobs that outlived it up to 6 times). A job
# no longer present is forgotten after this long: enough for a Job between its evicted pods and their
# re-creation. ~60 bytes per remembered job in the group item.
MOVES_MEMORY = timedelta(days=1)


def checkpoint_interval(pod: Pod) -> int | str | None:
    """The pod's declared checkpoint interval in seconds, None when absent, or why it is invalid."""
    raw = pod.annotations.get(ANNOTATION_CHECKPOINT_INTERVAL)
    if raw is None:
        return None
    seconds = whole_number(raw)
    if seconds is None or seconds <= 0:
        return f"{ANNOTATION_CHECKPOINT_INTERVAL} {raw!r} is not a positive whole number of seconds"
    return seconds


def last_checkpoint(pod: Pod) -> datetime | str | None:
    """When the pod last saved its work, None when absent, or why the annotation is invalid."""
    raw = pod.annotations.get(ANNOTATION_LAST_CHECKPOINT)
    if raw is None:
        return None
    try:
        found = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return f"{ANNOTATION_LAST_CHECKPOINT} {raw!r} is not an RFC 3339 time"
    if found.tzinfo is None:
        return f"{ANNOTATION_LAST_CHECKPOINT} {raw!r} has no time zone"
    return found


def not_movable(pod: Pod) -> str | None:
    """Why the pod must never be moved (None: it opted in and nothing forbids evicting it)."""
    if pod.do_not_disrupt:
        return f"{pod.key} is annotated karpenter.sh/do-not-disrupt"
    if pod.annotations.get(ANNOTATION_CA_SAFE_TO_EVICT) == "false":
        return f'{pod.key} is annotated {ANNOTATION_CA_SAFE_TO_EVICT}: "false"'
    interval, last = checkpoint_interval(pod), last_checkpoint(pod)
    for found in (interval, last):
        if isinstance(found, str):
            return f"{pod.key}: {found}"
    if interval is None and last is None:
        return (
            f"{pod.key} does not say it checkpoints"
            f" ({ANNOTATION_CHECKPOINT_INTERVAL} or {ANNOTATION_LAST_CHECKPOINT})"
        )
    return None


# A save stamped this far ahead of the scaler's clock is not trusted: clocks drift by seconds, and a
# time in the future is a writer's bug (it would make every move look free).
MAX_CLOCK_SKEW = timedelta(minutes=5)


def _saved_at(pod: Pod, now: datetime) -> datetime | None:
    """The pod's last save, when valid and not ahead of `now` by more than the clock skew."""
    last = last_checkpoint(pod)
    return last if isinstance(last, datetime) and last <= now + MAX_CLOCK_SKEW else None


def not_saved_yet(pod: Pod, now: datetime) -> str | None:
    """Why the pod should not move now although it opted in: it has not saved since it started (a
    move would throw away all it did and pay another restart; it also keeps a job that was just moved
    from moving again before it made progress). None: it has saved, or has run a whole interval."""
    interval, last = checkpoint_interval(pod), _saved_at(pod, now)
    started = pod.created_at
    if last is not None and (started is None or last >= started):
        return None
    if isinstance(interval, int) and (started is None or (now - started).total_seconds() >= interval):
        return None
    return f"{pod.key} has not saved its work since it started"


def lost_seconds(pod: Pod, now: datetime) -> float:
    """Seconds of work a move of the pod loses now (see the module docstring); 0 for a pod that
    is not movable is never asked: callers check `not_movable` first."""
    interval, last = checkpoint_interval(pod), _saved_at(pod, now)
    interval = interval if isinstance(interval, int) else None
    lost: float | None = None
    if last is not None:
        since = max(0.0, (now - last).total_seconds())  # a save a little ahead of our clock: just saved
        if interval is None or since <= interval:
            lost = since
    if lost is None:
        if interval is None:  # only a save time that cannot be trusted: all the work so far is at risk
            return max(0.0, (now - pod.created_at).total_seconds()) if pod.created_at else float("inf")
        lost = float(interval)
    if pod.created_at is not None:
        lost = min(lost, max(0.0, (now - pod.created_at).total_seconds()))
    return lost


def job_key(pod: Pod) -> str:
    """What a move is counted against: the pod's controlling owner (its Job re-creates it under a
    new name), else the pod itself."""
    return f"{pod.namespace}/{pod.owner_kind}/{pod.owner_name}" if pod.owner_name else pod.key


def remember_moves(
    previous: Mapping[str, tuple[int, datetime]],
    jobs: Iterable[str],
    at: datetime,
    present: Collection[str] = (),
) -> dict[str, tuple[int, datetime]]:
    """The moves per job after `jobs` moved at `at`; a job neither `present` (the job keys of the
    cluster's pods) nor moved within MOVES_MEMORY is forgotten (the one rule the state store, its fake
    and the simulator keep)."""
    moving = set(jobs)  # present too, whatever the caller listed after evicting their pods
    kept = {
        job: found
        for job, found in previous.items()
        if job in moving or job in present or at - found[1] < MOVES_MEMORY
    }
    for job in sorted(moving):
        kept[job] = (kept.get(job, (0, at))[0] + 1, at)
    return kept
