"""`DraReader`: the reads of Dynamic Resource Allocation objects (resource.k8s.io/v1, GA in
Kubernetes 1.34): ResourceSlices, DeviceClasses, ResourceClaims and ResourceClaimTemplates, each one
paged list parsed by `shared.formats.dra`. A cluster that does not serve the API (404: before 1.34,
or the API group turned off) has no DRA: each list is then empty, not an error."""

from __future__ import annotations

import logging
from typing import TypeVar

from shared.adapters.kubernetes.calls import ApiCaller, ReadNotFoundError
from shared.adapters.kubernetes.listing import ListParser, PagedLister
from shared.domain.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from shared.formats.dra import (
    device_class_from_json,
    resource_claim_from_json,
    resource_claim_template_from_json,
    resource_slice_from_json,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")


class DraReader:
    """Lists of the resource.k8s.io/v1 API, through one `ApiCaller`."""

    def __init__(self, caller: ApiCaller) -> None:
        self._lister = PagedLister(caller)
        self._slices = ListParser("ResourceSlice", resource_slice_from_json)
        self._classes = ListParser("DeviceClass", device_class_from_json)
        self._claims = ListParser("ResourceClaim", resource_claim_from_json)
        self._templates = ListParser("ResourceClaimTemplate", resource_claim_template_from_json)

    def list_resource_slices(self) -> tuple[ResourceSlice, ...]:
        return self._list("resourceslices", "/apis/resource.k8s.io/v1/resourceslices", self._slices)

    def list_device_classes(self) -> tuple[DeviceClass, ...]:
        return self._list("deviceclasses", "/apis/resource.k8s.io/v1/deviceclasses", self._classes)

    def list_resource_claims(self) -> tuple[ResourceClaim, ...]:
        return self._list("resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", self._claims)

    def list_resource_claim_templates(self) -> tuple[ResourceClaimTemplate, ...]:
        return self._list(
            "resourceclaimtemplates",
            "/apis/resource.k8s.io/v1/resourceclaimtemplates",
            self._templates,
        )

    def _list(self, plural: str, path: str, parser: ListParser[T]) -> tuple[T, ...]:
        try:
            return self._lister.list_every(f"{plural}.resource.k8s.io/v1", path, parser)
        except ReadNotFoundError:
            logger.debug("%s.resource.k8s.io/v1 is not served: no DRA in this cluster", plural)
            return ()
