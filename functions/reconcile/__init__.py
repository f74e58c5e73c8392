"""Reconcile function: the schedule, the wake-up queue and direct invokes run one reconcile each."""
