"""The cluster lease: one context manager that every entry point runs its writes under.

    with held_lease(state, clock, owner, dry_run=dry_run, wait=False) as guard:
        ...  # guard is None in a dry run (nothing is written, the lease included)

`held_lease` takes the lease (LeaseHeldError when another run holds it; with `wait`, it first waits a
little for a running reconcile to finish) and always gives it back. The `LeaseGuard` it yields is the
fence of the run: `confirm()` checks against the store that the lease is still ours (owner and fencing
counter unchanged, not only our local idea of its expiry) and extends it; `keep()` renews it only when
it is about to end. The applier confirms before each batch of Kubernetes or AWS writes, destructive
or not, and keeps before every state write, so a run whose lease another run took (after ours expired)
makes no write after it noticed, and notices before its next batch. State-store writes are fenced by
the store itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from shared.domain.errors import LeaseHeldError, ScalerError
from shared.domain.operations import Lease
from shared.ports import Clock, StateStore

LEASE_TTL_SECONDS = 120
LEASE_RENEW_MARGIN_SECONDS = 30  # renew a lease this close to its end before the next write
LEASE_WAIT_ATTEMPTS = 5  # manual and AWS-event calls wait this often for a reconcile to finish
LEASE_WAIT_SECONDS = 2.0


class LeaseGuard:
    """The lease of one run, renewed and confirmed against the store (the fence)."""

    def __init__(self, state: StateStore, clock: Clock, lease: Lease, ttl_seconds: int) -> None:
        self._state = state
        self._clock = clock
        self._ttl = ttl_seconds
        self.lease = lease

    def confirm(self) -> Lease:
        """Check in the store that the lease is still ours and extend it.

        Raises LeaseHeldError when it was lost, and also when the store cannot say (a lease that
        cannot be confirmed is treated as lost: the run stops acting and reports what it did).
        """
        try:
            self.lease = self._state.renew_lease(self.lease, self._clock.now(), self._ttl)
        except LeaseHeldError:
            raise
        except ScalerError as exc:
            raise LeaseHeldError(f"could not confirm the lease: {type(exc).__name__}: {exc}") from exc
        return self.lease

    def keep(self) -> Lease:
        """Renew the lease when it is about to end (confirming it); LeaseHeldError if it was lost."""
        if self.lease.expires_at - self._clock.now() <= timedelta(seconds=LEASE_RENEW_MARGIN_SECONDS):
            return self.confirm()
        return self.lease


@contextmanager
def held_lease(
    state: StateStore,
    clock: Clock,
    owner: str,
    *,
    dry_run: bool,
    wait: bool,
    ttl_seconds: int = LEASE_TTL_SECONDS,
) -> Iterator[LeaseGuard | None]:
    """Run the body under the cluster lease (None in a dry run); the lease is released at the end.

    Raises LeaseHeldError when another run holds it (after LEASE_WAIT_ATTEMPTS tries with `wait`).
    """
    if dry_run:
        yield None
        return
    run_owner = f"{owner}/{uuid.uuid4().hex[:12]}"  # one owner per run: runs of one process never share
    attempts = LEASE_WAIT_ATTEMPTS if wait else 1
    for attempt in range(attempts):
        try:
            lease = state.acquire_lease(run_owner, clock.now(), ttl_seconds)
            break
        except LeaseHeldError:
            if attempt == attempts - 1:
                raise
            clock.sleep(LEASE_WAIT_SECONDS)
    guard = LeaseGuard(state, clock, lease, ttl_seconds)
    try:
        yield guard
    finally:
        state.release_lease(guard.lease)
