"""Storage objects the VolumeBinding and VolumeZone filters read: PVCs, PVs, StorageClasses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from shared.domain.keys import namespaced_key
from shared.domain.labels import Requirement

_NO_LABELS: Mapping[str, str] = MappingProxyType({})

NodeSelectorTerms = tuple[tuple[Requirement, ...], ...]  # ORed terms of ANDed requirements


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: the PV it is bound to ("" while unbound)
    storage_class: str | None = None  # spec.storageClassName (None: the cluster default)
    phase: str = "Pending"

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_affinity: NodeSelectorTerms = ()  # spec.nodeAffinity.required.nodeSelectorTerms
    labels: Mapping[str, str] = field(default_factory=lambda: _NO_LABELS)  # legacy zone labels


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = "Immediate"  # Immediate | WaitForFirstConsumer
    allowed_topologies: NodeSelectorTerms = ()
    is_default: bool = False  # storageclass.kubernetes.io/is-default-class

    @property
    def waits_for_consumer(self) -> bool:
        return self.binding_mode == "WaitForFirstConsumer"
