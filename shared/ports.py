"""Ports: the small interfaces the controller uses to reach the world. Adapters implement them.

Every method states its error contract. Errors are the project's own (shared.domain.errors); an
adapter never lets a boto3 or kubernetes exception escape. What a caller does with a write's error is
decided in one place, the applier (shared.controller.applier): a lost lease ends the run, a failure on
one object (incl. AuthError: a 403 on one ASG or pod) is isolated to it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from shared.domain.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from shared.domain.model import (
    AsgState,
    DaemonSet,
    DisruptionBudget,
    InstanceStatus,
    InstanceType,
    LaunchTemplateVersions,
    Node,
    Pod,
    PodMemory,
    ScalerState,
    Taint,
)
from shared.domain.operations import ClusterEvent, DrainIntent, Lease, ScalingFailure
from shared.domain.provisioning import ConditionUpdate, PodGroup, PodTemplate, ProvisioningRequest
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass


class Cluster(Protocol):
    """The Kubernetes cluster."""

    def list_pods(self) -> tuple[Pod, ...]:
        """All pods of all namespaces, read to the end (paginated).

        Raises ClusterReadError (any failure, incl. a page that fails mid-way), AuthError (401/403).
        """
        ...

    def list_nodes(self) -> tuple[Node, ...]:
        """All nodes. Raises ClusterReadError, AuthError."""
        ...

    def list_daemonsets(self) -> tuple[DaemonSet, ...]:
        """All DaemonSets of all namespaces, read to the end. Raises ClusterReadError, AuthError."""
        ...

    def list_persistent_volume_claims(self) -> tuple[PersistentVolumeClaim, ...]:
        """All PersistentVolumeClaims of all namespaces. Raises ClusterReadError, AuthError."""
        ...

    def list_persistent_volumes(self) -> tuple[PersistentVolume, ...]:
        """All PersistentVolumes. Raises ClusterReadError, AuthError."""
        ...

    def list_storage_classes(self) -> tuple[StorageClass, ...]:
        """All StorageClasses. Raises ClusterReadError, AuthError."""
        ...

    def list_namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of every namespace, by namespace name. Raises ClusterReadError, AuthError."""
        ...

    def list_pod_disruption_budgets(self) -> tuple[DisruptionBudget, ...]:
        """All policy/v1 PodDisruptionBudgets of all namespaces, as they are now: each one's selector and
        status.disruptionsAllowed (read right before a migration evicts, never from an earlier list).

        Raises ClusterReadError, AuthError.
        """
        ...

    def get_node(self, name: str) -> Node | None:
        """A fresh read of one node; None when it does not exist. Raises ClusterReadError, AuthError."""
        ...

    def list_pods_on_node(self, name: str) -> tuple[Pod, ...]:
        """Pods bound to one node (fresh read). Raises ClusterReadError, AuthError."""
        ...

    def cordon(self, name: str, at: datetime, *, resource_version: str | None = None) -> None:
        """Mark unschedulable and annotate `backlog-scaler/cordoned-at`.

        With `resource_version`, the patch only applies if the node is unchanged since that read.
        Raises ConflictError (409: changed since read), NotFoundError, ClusterActionError, AuthError.
        """
        ...

    def uncordon(self, name: str) -> None:
        """Clear unschedulable and the cordoned-at annotation.

        Raises NotFoundError, ClusterActionError, AuthError.
        """
        ...

    def taint_node(self, name: str, taint: Taint, *, resource_version: str | None = None) -> None:
        """Add `taint` to spec.taints (replacing a taint of the same key and effect), as `kubectl taint`
        does: read the node, patch the whole list with that read's resourceVersion as precondition,
        so a concurrent edit of the node conflicts instead of being overwritten. Present: no write.

        With `resource_version`, only if the node is unchanged since the caller's read.
        Raises ConflictError (409), NotFoundError, ClusterActionError, AuthError.
        """
        ...

    def untaint_node(self, name: str, key: str, *, resource_version: str | None = None) -> None:
        """Remove every taint with `key` (`kubectl taint nodes NAME KEY-`), read and patched as
        `taint_node` does. Absent: no write.

        Raises ConflictError (409), NotFoundError, ClusterActionError, AuthError.
        """
        ...

    def can_evict(self, namespace: str, name: str) -> bool:
        """Whether the Eviction API would evict the pod now: a dry run (dryRun=All), PodDisruptionBudgets
        judged, nothing evicted; False on 429. A missing pod is True (what eviction wants).

        Raises ClusterActionError, AuthError.
        """
        ...

    def evict(self, namespace: str, name: str) -> None:
        """Evict through the Eviction API (PodDisruptionBudgets apply). A missing pod is success.

        Raises EvictionBlockedError (429, retry later), ClusterActionError, AuthError (401/403, incl.
        a 403 NamespaceTerminating: the pod's namespace is being deleted).
        """
        ...

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete a pod, bypassing PDBs (forced drains only). A missing pod is success.

        Raises ClusterActionError, AuthError.
        """
        ...

    def delete_node(self, name: str) -> None:
        """Delete the Node object of a terminated instance. A missing node is success.

        Raises ClusterActionError, AuthError.
        """
        ...

    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        """Create Kubernetes Events; best effort. Returns how many were written; never raises."""
        ...

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The data of one ConfigMap (the status ConfigMap); None when it does not exist.

        Raises ClusterReadError (incl. a ConfigMap whose data is not a map of strings), AuthError.
        """
        ...

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """Merge-patch the keys of `data` into one existing ConfigMap; other keys are kept.

        Raises NotFoundError (the ConfigMap was never created: the manifests are not applied),
        ClusterActionError, AuthError.
        """
        ...

    def list_provisioning_requests(self) -> tuple[ProvisioningRequest, ...]:
        """All autoscaling.x-k8s.io/v1 ProvisioningRequests; () when the API is not served (no CRD).

        Raises ClusterReadError, AuthError.
        """
        ...

    def list_pod_templates(self) -> tuple[PodTemplate, ...]:
        """All PodTemplates of all namespaces. Raises ClusterReadError, AuthError."""
        ...

    def list_resource_slices(self) -> tuple[ResourceSlice, ...]:
        """All resource.k8s.io/v1 ResourceSlices; () when the API is not served (no DRA).

        Raises ClusterReadError, AuthError.
        """
        ...

    def list_device_classes(self) -> tuple[DeviceClass, ...]:
        """All DeviceClasses; () when the API is not served. Raises ClusterReadError, AuthError."""
        ...

    def list_resource_claims(self) -> tuple[ResourceClaim, ...]:
        """All ResourceClaims of all namespaces; () when the API is not served.

        Raises ClusterReadError, AuthError.
        """
        ...

    def list_resource_claim_templates(self) -> tuple[ResourceClaimTemplate, ...]:
        """All ResourceClaimTemplates of all namespaces; () when the API is not served.

        Raises ClusterReadError, AuthError.
        """
        ...

    def list_pod_groups(self) -> tuple[PodGroup, ...]:
        """All coscheduling and Volcano PodGroups; an API that is not served adds none.

        Raises ClusterReadError, AuthError.
        """
        ...

    def set_provisioning_request_conditions(self, update: ConditionUpdate) -> None:
        """Write `status.conditions` of one ProvisioningRequest (status subresource, merge patch),
        only if it is still the object of `update.uid`.

        Raises NotFoundError (deleted), ConflictError (re-created under the same name),
        ClusterActionError, AuthError.
        """
        ...


class Fleet(Protocol):
    """The Auto Scaling groups (and EC2 instance type data) of the cluster."""

    def describe_groups(self, asg_names: Iterable[str]) -> Mapping[str, AsgState]:
        """Current state of the named groups; missing groups are absent from the result.

        Raises FleetReadError (incl. throttling after retries), AuthError.
        """
        ...

    def set_desired_capacity(self, asg: AsgState, desired: int) -> None:
        """Set an absolute desired capacity (HonorCooldown=False).

        Raises ValueError if `desired` is outside [asg.min_size, asg.max_size] (checked before any
        call), FleetActionError, ThrottledError, AuthError.
        """
        ...

    def terminate_instance(self, instance_id: str, *, decrement: bool, region: str = "") -> None:
        """Terminate one instance of a group, decrementing desired or letting the group replace it.

        An instance already gone is success. Raises FleetActionError, ThrottledError, AuthError.
        """
        ...

    def failed_activities(self, asg: AsgState, since: datetime) -> tuple[ScalingFailure, ...]:
        """Failed scaling activities of one group that started at or after `since`, classified.

        Raises FleetReadError, AuthError.
        """
        ...

    def instance_types(self, instance_types: Iterable[str], region: str = "") -> Mapping[str, InstanceType]:
        """What EC2 says of each instance type: raw capacity (no kubelet reservation) and architecture.

        Capacity is cpu (vCPUs x 1000 millicores), memory (bytes), pods (the VPC CNI's max pods) and
        accelerators by device-plugin resource name. Cached per process. Unknown types are absent.
        Raises FleetReadError (incl. throttling), AuthError.
        """
        ...

    def instance_statuses(
        self, instance_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, InstanceStatus]:
        """EC2 status checks and scheduled events of each instance (DescribeInstanceStatus with
        IncludeAllInstances), read fresh. Instances EC2 does not know are absent.
        Raises FleetReadError (incl. throttling and a malformed entry), AuthError.
        """
        ...

    def launch_templates(
        self, template_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, LaunchTemplateVersions]:
        """Default and latest version numbers of each launch template (DescribeLaunchTemplates), read
        fresh. Templates EC2 does not know are absent. Raises FleetReadError, AuthError.
        """
        ...


class StateStore(Protocol):
    """Durable state of one cluster (DynamoDB in production)."""

    def acquire_lease(self, owner: str, now: datetime, ttl_seconds: int) -> Lease:
        """Take the cluster lease if free, expired, or already ours.

        Raises LeaseHeldError (someone else holds a live lease), ReadError (store unavailable).
        """
        ...

    def renew_lease(self, lease: Lease, now: datetime, ttl_seconds: int) -> Lease:
        """Extend a lease that is still ours: its owner and fencing token unchanged in the store.

        The fence: a run confirms its lease this way before each destructive batch. Returns the
        lease with its new expiry (same fencing token). Raises LeaseHeldError (another run took it
        since), ReadError (store unavailable).
        """
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back if still ours; never raises."""
        ...

    def load(self) -> ScalerState:
        """Everything stored for the cluster. Raises ReadError."""
        ...

    def save_node_idle_since(self, lease: Lease, idle_since: Mapping[str, datetime], now: datetime) -> None:
        """Replace the idle-since map (nodes absent from it are forgotten).

        Raises LeaseHeldError if the lease was lost (fencing), ActionError on other failures.
        """
        ...

    def save_instances_first_seen(self, lease: Lease, first_seen: Mapping[str, datetime]) -> None:
        """Replace the first-seen map of instances. Raises LeaseHeldError, ActionError."""
        ...

    def save_pod_memory(self, lease: Lease, memory: Mapping[str, PodMemory]) -> None:
        """Replace the memory of pending pods, by pod key (pods absent from it are forgotten).

        Stores each record as given, with any number of pods; `load()` returns it as `pods`.
        Raises LeaseHeldError if the lease was lost (fencing), ActionError on other failures.
        """
        ...

    def record_scale_up(self, lease: Lease, group: str, at: datetime) -> None:
        """Remember when a group last grew. Raises LeaseHeldError, ActionError."""
        ...

    def record_scale_down(self, lease: Lease, group: str, at: datetime) -> None:
        """Remember when the scaler last terminated nodes of a group. Raises LeaseHeldError, ActionError."""
        ...

    def record_migration(
        self,
        lease: Lease,
        group: str,
        at: datetime,
        jobs: Sequence[str] = (),
        present: Collection[str] = (),
    ) -> None:
        """Remember that the scaler emptied a node of a group by migration at `at`, moving `jobs`
        (`checkpoint.job_key`): the store keeps the last hour's migrations (the per-hour budget) and
        the moves per job of the jobs still `present` (`checkpoint.remember_moves`). Raises
        LeaseHeldError, ActionError."""
        ...

    def record_capacity_failure(self, lease: Lease | None, group: str, at: datetime) -> datetime:
        """Put a group in exponential backoff; returns the new backoff end.

        Backoff starts at the policy's initial value and doubles per failure up to its maximum; it
        resets after `backoff_reset_seconds` without failures. Idempotent per failure time.
        Raises LeaseHeldError (lease given and lost), ActionError.
        """
        ...

    def put_drain_intent(self, lease: Lease, intent: DrainIntent) -> DrainIntent:
        """Store the forced scale-down of a group, under the lease and only over the version read.

        `intent.revision` is the stored revision it replaces (0: none may be stored), so a
        read-modify-write never loses another writer's update. Returns the intent as stored (its
        new revision). Raises LeaseHeldError (lease lost), ConflictError (the stored intent is not
        the one read), ActionError (incl. throttling, an item over DynamoDB's 400 KB).
        """
        ...

    def drain_intents(self) -> tuple[DrainIntent, ...]:
        """Stored drain intents. Raises ReadError."""
        ...

    def delete_drain_intent(self, lease: Lease, intent: DrainIntent) -> None:
        """Forget a drain intent (done or expired) if it is still the revision read; a missing one is
        success. Raises LeaseHeldError, ConflictError (it changed since read), ActionError.
        """
        ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait (a simulated clock advances instead)."""
        ...


class Notifier(Protocol):
    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        """Send one message per decision batch; returns False on failure, never raises."""
        ...
