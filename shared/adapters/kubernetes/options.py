"""`ClusterOptions`: the tuning of `KubernetesCluster` and of the collaborators it is made of."""

from __future__ import annotations

from dataclasses import dataclass

# Terminal pods hold no resources and never make a node busy; batch clusters accumulate thousands.
ACTIVE_PODS_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    """Tuning of `KubernetesCluster`; the defaults suit a cluster of tens of thousands of pods."""

    page_size: int = 500
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    # None lists every pod; the default leaves out Succeeded/Failed pods (see ACTIVE_PODS_FIELD_SELECTOR).
    pod_field_selector: str | None = ACTIVE_PODS_FIELD_SELECTOR
    throttle_retries: int = 3  # 429 on a read or a patch/delete: retries before ThrottledError
    throttle_max_delay: float = 5.0  # cap on one wait, whatever Retry-After asks for
    max_events_per_call: int = 200
    max_event_message_bytes: int = 1024
    max_consecutive_event_failures: int = 3

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError("page_size must be positive")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ValueError("timeouts must be positive")
