"""`CoreReader`: the reads of core and built-in objects (pods, nodes, DaemonSets, volumes, namespaces,
pod templates, PodDisruptionBudgets), each list parsed straight into domain objects by
`shared.formats.kubernetes`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from shared.adapters.kubernetes.calls import ApiCaller, ReadNotFoundError, api_path, body_of, decode_json
from shared.adapters.kubernetes.listing import ListParser, PagedLister, describes_pods, is_unbound_pod
from shared.domain.errors import ClusterReadError
from shared.domain.model import DaemonSet, DisruptionBudget, Node, Pod
from shared.domain.provisioning import LABEL_KUEUE_POD_GROUP, PodTemplate
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.kubernetes import (
    daemonset_from_json,
    namespace_from_json,
    node_from_json,
    node_parser,
    pod_disruption_budget_from_json,
    pod_from_json,
    pod_parser,
    pod_template_from_json,
    pv_from_json,
    pvc_from_json,
    storage_class_from_json,
)

T = TypeVar("T")


class CoreReader:
    """Lists and gets of the core, apps and storage APIs, through one `ApiCaller`."""

    def __init__(self, caller: ApiCaller) -> None:
        self._caller = caller
        self._lister = PagedLister(caller)
        self._pods = ListParser("Pod", pod_from_json, per_page=pod_parser, skippable=is_unbound_pod)
        self._finished = ListParser("Pod", pod_from_json, per_page=pod_parser)
        self._nodes = ListParser("Node", node_from_json, per_page=node_parser)
        self._daemonsets = ListParser("DaemonSet", daemonset_from_json, skippable=describes_pods)
        self._pvcs = ListParser("PersistentVolumeClaim", pvc_from_json)
        self._pvs = ListParser("PersistentVolume", pv_from_json)
        self._storage_classes = ListParser("StorageClass", storage_class_from_json)
        self._namespaces = ListParser("Namespace", namespace_from_json)
        self._pod_templates = ListParser("PodTemplate", pod_template_from_json, skippable=describes_pods)
        self._budgets = ListParser("PodDisruptionBudget", pod_disruption_budget_from_json)

    def list_pods(self) -> tuple[Pod, ...]:
        """Every pod of every namespace (minus terminal ones with the default field selector), and
        then the Succeeded members of Kueue pod groups: they count toward their gang's total count
        (shared.planner.gangs), and a cluster keeps few of them (one list, by label)."""
        selector = self._caller.options.pod_field_selector
        pods = self._list_pods("pods", selector, complete=True)
        if not selector or "status.phase!=Succeeded" not in selector:
            return pods  # listed already
        finished = self._lister.list_every(
            "finished pods of Kueue pod groups",
            "/api/v1/pods",
            self._finished,
            field_selector="status.phase=Succeeded",
            label_selector=LABEL_KUEUE_POD_GROUP,
        )
        if not finished:
            return pods
        # A member that finished between the two lists is in both: its Succeeded self counts, once.
        done = {pod.key for pod in finished}
        return tuple(pod for pod in pods if pod.key not in done) + finished

    def list_pods_on_node(self, name: str) -> tuple[Pod, ...]:
        """Pods bound to node `name` (same phase filter as `list_pods`)."""
        selector = ",".join(
            s for s in (f"spec.nodeName={name}", self._caller.options.pod_field_selector) if s
        )
        # A subset: reuse known pods, but do not forget the others.
        return self._list_pods(f"pods on node {name}", selector, complete=False)

    def _list_pods(self, what: str, selector: str | None, *, complete: bool) -> tuple[Pod, ...]:
        return self._lister.list_every(
            what, "/api/v1/pods", self._pods, field_selector=selector, complete=complete
        )

    def list_nodes(self) -> tuple[Node, ...]:
        """Every node."""
        return self._lister.list_every("nodes", "/api/v1/nodes", self._nodes)

    def list_daemonsets(self) -> tuple[DaemonSet, ...]:
        """Every DaemonSet of every namespace."""
        return self._lister.list_every("daemonsets", "/apis/apps/v1/daemonsets", self._daemonsets)

    def list_persistent_volume_claims(self) -> tuple[PersistentVolumeClaim, ...]:
        """Every PersistentVolumeClaim of every namespace."""
        return self._lister.list_every("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", self._pvcs)

    def list_persistent_volumes(self) -> tuple[PersistentVolume, ...]:
        """Every PersistentVolume."""
        return self._lister.list_every("persistentvolumes", "/api/v1/persistentvolumes", self._pvs)

    def list_storage_classes(self) -> tuple[StorageClass, ...]:
        """Every StorageClass."""
        return self._lister.list_every(
            "storageclasses", "/apis/storage.k8s.io/v1/storageclasses", self._storage_classes
        )

    def list_namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of every namespace, by name."""
        return dict(self._lister.list_every("namespaces", "/api/v1/namespaces", self._namespaces))

    def list_pod_templates(self) -> tuple[PodTemplate, ...]:
        """Every PodTemplate of every namespace."""
        return self._lister.list_every("podtemplates", "/api/v1/podtemplates", self._pod_templates)

    def list_pod_disruption_budgets(self) -> tuple[DisruptionBudget, ...]:
        """Every policy/v1 PodDisruptionBudget of every namespace, with status.disruptionsAllowed."""
        # Parsed afresh on every read (complete=False keeps no memo of the list): what is read is the
        # status, which every eviction moves, and a cluster has few budgets.
        return self._lister.list_every(
            "poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", self._budgets, complete=False
        )

    def get_node(self, name: str) -> Node | None:
        """A fresh read of node `name`; None when it does not exist."""
        what = f"get node {name}"
        try:
            body = self._caller.call(
                what,
                lambda: body_of(self._caller.send("GET", api_path("/api/v1/nodes/{name}", name=name))),
                failure=ClusterReadError,
            )
        except ReadNotFoundError:
            return None
        document = decode_json(body, what)
        try:
            return node_from_json(document)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ClusterReadError(f"{what}: malformed Node: {exc!r}") from exc

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The data of ConfigMap `namespace/name`; None when it does not exist."""
        what = f"get configmap {namespace}/{name}"
        try:
            body = self._caller.call(
                what,
                lambda: body_of(
                    self._caller.send(
                        "GET",
                        api_path(
                            "/api/v1/namespaces/{namespace}/configmaps/{name}", namespace=namespace, name=name
                        ),
                    )
                ),
                failure=ClusterReadError,
            )
        except ReadNotFoundError:
            return None
        data = decode_json(body, what).get("data") or {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ClusterReadError(f"{what}: malformed ConfigMap: data is not a map of strings")
        return data
