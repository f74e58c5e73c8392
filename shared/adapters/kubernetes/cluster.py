"""`KubernetesCluster`: the `Cluster` port on the Kubernetes REST API (requests through urllib3).

Lists are read page by page (`limit` + `continue`) as raw JSON and parsed by `shared.formats.kubernetes`
straight into domain objects: the client's typed models cost ~7x more for thousands of pods. Every
HTTP status and urllib3 failure is mapped here to the project's errors:

    HTTP status / failure           read (list, get)        write (patch, evict, delete, event)
    401, 403                        AuthError               AuthError
    404                             ClusterReadError        NotFoundError (evict/delete: success;
                                    (get_node: None)         get_node: None)
    409                             ClusterReadError        ConflictError
    410 (expired continue token)    list restarted once,    -
                                    then ClusterReadError
    429                             retried (Retry-After),  ThrottledError after retries;
                                    then ThrottledError     eviction: EvictionBlockedError at once
    other 4xx, 5xx                  ClusterReadError        ClusterActionError
    timeout, refused, dropped       ClusterReadError        ClusterActionError
    malformed body / object         ClusterReadError        -

Transport retries (connect errors; read errors on GET only) are urllib3's, configured on the
transport (`transport.default_retries`). A list either returns every object or raises: the controller never
plans on a partial picture. While one page is decoded, the next is already on its way.

Every request needs its (API group, resource, verb) in `rbac.PERMISSIONS`, naming the method: the
ClusterRole is generated from that table and the tests' fake API server enforces it.

`KubernetesCluster` is the port's face; the work is done by its collaborators, one job each:
`calls.ApiCaller` (the error boundary above), `listing.PagedLister` (paged lists),
`reads.CoreReader` (core objects), `custom_resources.CustomResourceReader` (ProvisioningRequests and
PodGroups, whose CRDs may be absent), `writes.ClusterWriter` (cordon, taints, eviction, deletes, the
status patch) and `events.EventRecorder` (Events, best effort).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3

from shared.adapters.kubernetes.auth import (
    ClusterEndpoint,
    EksTokenSource,
    build_transport,
    decode_certificate_authority,
    describe_cluster_endpoint,
)
from shared.adapters.kubernetes.calls import ApiCaller
from shared.adapters.kubernetes.custom_resources import CustomResourceReader
from shared.adapters.kubernetes.dra import DraReader
from shared.adapters.kubernetes.events import EventRecorder
from shared.adapters.kubernetes.listing import peek_continue as _peek_continue
from shared.adapters.kubernetes.options import ACTIVE_PODS_FIELD_SELECTOR, ClusterOptions
from shared.adapters.kubernetes.reads import CoreReader
from shared.adapters.kubernetes.transport import RestTransport, transport_from_kubeconfig
from shared.adapters.kubernetes.writes import ClusterWriter, taints_with, taints_without
from shared.domain.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from shared.domain.errors import EvictionBlockedError
from shared.domain.model import DaemonSet, DisruptionBudget, Node, Pod, Taint
from shared.domain.operations import ClusterEvent
from shared.domain.provisioning import ConditionUpdate, PodGroup, PodTemplate, ProvisioningRequest
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass

if TYPE_CHECKING:
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_sts import STSClient

    from shared.config import ScalerConfig

__all__ = [
    "ACTIVE_PODS_FIELD_SELECTOR",
    "ClusterOptions",
    "KubernetesCluster",
    "_peek_continue",
    "cluster_from_config",
    "taints_with",
    "taints_without",
]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class KubernetesCluster:
    """The `Cluster` port over a ready `RestTransport` (see `cluster_from_config`).

    Every public method is one request kind of the RBAC table (`rbac.PERMISSIONS` names them) and
    hands the work to the collaborator whose job it is.
    """

    def __init__(
        self,
        transport: RestTransport,
        options: ClusterOptions | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        caller = ApiCaller(transport, options or ClusterOptions(), sleep=sleep)
        self._reads = CoreReader(caller)
        self._custom = CustomResourceReader(caller)
        self._dra = DraReader(caller)
        self._writes = ClusterWriter(caller)
        self._events = EventRecorder(caller, clock)

    # ------------------------------------------------------------------ reads

    def list_pods(self) -> tuple[Pod, ...]:
        """Every pod of every namespace (minus terminal ones with the default field selector)."""
        return self._reads.list_pods()

    def list_pods_on_node(self, name: str) -> tuple[Pod, ...]:
        """Pods bound to node `name` (same phase filter as `list_pods`)."""
        return self._reads.list_pods_on_node(name)

    def list_nodes(self) -> tuple[Node, ...]:
        """Every node."""
        return self._reads.list_nodes()

    def get_node(self, name: str) -> Node | None:
        """A fresh read of node `name`; None when it does not exist."""
        return self._reads.get_node(name)

    def list_daemonsets(self) -> tuple[DaemonSet, ...]:
        """Every DaemonSet of every namespace."""
        return self._reads.list_daemonsets()

    def list_persistent_volume_claims(self) -> tuple[PersistentVolumeClaim, ...]:
        """Every PersistentVolumeClaim of every namespace."""
        return self._reads.list_persistent_volume_claims()

    def list_persistent_volumes(self) -> tuple[PersistentVolume, ...]:
        """Every PersistentVolume."""
        return self._reads.list_persistent_volumes()

    def list_storage_classes(self) -> tuple[StorageClass, ...]:
        """Every StorageClass."""
        return self._reads.list_storage_classes()

    def list_namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of every namespace, by name."""
        return self._reads.list_namespaces()

    def list_pod_templates(self) -> tuple[PodTemplate, ...]:
        """Every PodTemplate of every namespace."""
        return self._reads.list_pod_templates()

    def list_pod_disruption_budgets(self) -> tuple[DisruptionBudget, ...]:
        """Every policy/v1 PodDisruptionBudget of every namespace, with status.disruptionsAllowed."""
        return self._reads.list_pod_disruption_budgets()

    def list_provisioning_requests(self) -> tuple[ProvisioningRequest, ...]:
        """Every ProvisioningRequest, from v1 or (an older CRD) v1beta1; () when neither is served."""
        return self._custom.list_provisioning_requests()

    def list_resource_slices(self) -> tuple[ResourceSlice, ...]:
        """Every resource.k8s.io/v1 ResourceSlice; () when the API is not served (no DRA)."""
        return self._dra.list_resource_slices()

    def list_device_classes(self) -> tuple[DeviceClass, ...]:
        """Every DeviceClass; () when the API is not served."""
        return self._dra.list_device_classes()

    def list_resource_claims(self) -> tuple[ResourceClaim, ...]:
        """Every ResourceClaim of every namespace; () when the API is not served."""
        return self._dra.list_resource_claims()

    def list_resource_claim_templates(self) -> tuple[ResourceClaimTemplate, ...]:
        """Every ResourceClaimTemplate of every namespace; () when the API is not served."""
        return self._dra.list_resource_claim_templates()

    def list_pod_groups(self) -> tuple[PodGroup, ...]:
        """Every coscheduling and Volcano PodGroup; an API that is not served adds none."""
        return self._custom.list_pod_groups()

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The data of ConfigMap `namespace/name` (the status ConfigMap); None when it does not exist."""
        return self._reads.get_config_map(namespace, name)

    # ------------------------------------------------------------------ writes

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """Merge-patch the keys of `data` into ConfigMap `namespace/name` (the status ConfigMap)."""
        self._writes.patch_config_map(namespace, name, data)

    def cordon(self, name: str, at: datetime, *, resource_version: str | None = None) -> None:
        """Mark unschedulable and annotate when; with `resource_version`, only if unchanged since."""
        self._writes.cordon(name, at, resource_version=resource_version)

    def uncordon(self, name: str) -> None:
        """Clear unschedulable and the cordoned-at annotation."""
        self._writes.uncordon(name)

    def taint_node(self, name: str, taint: Taint, *, resource_version: str | None = None) -> None:
        """Add `taint` as `kubectl taint nodes NAME KEY=VALUE:EFFECT --overwrite` does (see the port)."""
        self._writes.taint_node(name, taint, resource_version=resource_version)

    def untaint_node(self, name: str, key: str, *, resource_version: str | None = None) -> None:
        """Remove the taints with `key` as `kubectl taint nodes NAME KEY-` does (see the port)."""
        self._writes.untaint_node(name, key, resource_version=resource_version)

    def set_provisioning_request_conditions(self, update: ConditionUpdate) -> None:
        """Merge-patch `status.conditions` through the status subresource, the uid as precondition."""
        self._writes.set_provisioning_request_conditions(update)

    def can_evict(self, namespace: str, name: str) -> bool:
        """An eviction dry run (dryRun=All): False when a PodDisruptionBudget refuses it now (429)."""
        try:
            self._writes.evict(namespace, name, dry_run=True)
        except EvictionBlockedError:
            return False
        return True

    def evict(self, namespace: str, name: str) -> None:
        """Evict through the Eviction API; a missing pod is success; 429 is EvictionBlockedError."""
        self._writes.evict(namespace, name)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete a pod, bypassing PodDisruptionBudgets; a missing pod is success."""
        self._writes.delete_pod(namespace, name, grace_seconds)

    def delete_node(self, name: str) -> None:
        """Delete a Node object; a missing node is success."""
        self._writes.delete_node(name)

    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        """Create core/v1 Events, best effort: returns how many were written and never raises."""
        return self._events.record_events(events)


def cluster_from_config(
    config: ScalerConfig,
    *,
    sts_client: STSClient | None = None,
    eks_client: EKSClient | None = None,
    options: ClusterOptions | None = None,
) -> KubernetesCluster:
    """A `KubernetesCluster` for the configured cluster.

    With `kubernetes.kubeconfig`, from that file (local use). Otherwise the EKS endpoint and CA from
    the config, or from eks:DescribeCluster when either is missing, and a refreshing EKS token.
    Raises ConfigError, AuthError, ClusterReadError (DescribeCluster failed).
    """
    settings = config.kubernetes
    if settings.kubeconfig:
        return KubernetesCluster(transport_from_kubeconfig(settings.kubeconfig), options)
    if settings.endpoint and settings.certificate_authority:
        endpoint = ClusterEndpoint(
            settings.endpoint, decode_certificate_authority(settings.certificate_authority)
        )
    else:
        eks = eks_client if eks_client is not None else boto3.client("eks", region_name=config.region)
        endpoint = describe_cluster_endpoint(eks, config.cluster_name)
        if settings.endpoint:
            endpoint = ClusterEndpoint(settings.endpoint, endpoint.ca_pem)
    tokens = EksTokenSource(config.cluster_name, config.region, sts_client=sts_client)
    return KubernetesCluster(
        build_transport(endpoint.url, token_source=tokens, ca_pem=endpoint.ca_pem), options
    )
