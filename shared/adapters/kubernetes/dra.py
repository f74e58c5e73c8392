"""`DraReader`: the reads of Dynamic Resource Allocation objects (resource.k8s.io/v1, GA in
Kubernetes 1.34): ResourceSlices, DeviceClasses, ResourceClaims and ResourceClaimTemplates, each one
paged list parsed by `shared.formats.dra`. A cluster that does not serve the API (404: before 1.34,
or the API group turned off) has no DRA: each list is then empty, not an error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client as k8s

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
        self._api = k8s.ResourceV1Api(caller.api_client)
        self._slices = ListParser("ResourceSlice", resource_slice_from_json)
        self._classes = ListParser("DeviceClass", device_class_from_json)
        self._claims = ListParser("ResourceClaim", resource_claim_from_json)
        self._templates = ListParser("ResourceClaimTemplate", resource_claim_template_from_json)

    def list_resource_slices(self) -> tuple[ResourceSlice, ...]:
        return self._list("resourceslices", self._api.list_resource_slice, self._slices)

    def list_device_classes(self) -> tuple[DeviceClass, ...]:
        return self._list("deviceclasses", self._api.list_device_class, self._classes)

    def list_resource_claims(self) -> tuple[ResourceClaim, ...]:
        return self._list("resourceclaims", self._api.list_resource_claim_for_all_namespaces, self._claims)

    def list_resource_claim_templates(self) -> tuple[ResourceClaimTemplate, ...]:
        return self._list(
            "resourceclaimtemplates",
            self._api.list_resource_claim_template_for_all_namespaces,
            self._templates,
        )

    def _list(self, plural: str, call: Callable[..., Any], parser: ListParser[T]) -> tuple[T, ...]:
        try:
            return self._lister.list_every(f"{plural}.resource.k8s.io/v1", call, parser)
        except ReadNotFoundError:
            logger.debug("%s.resource.k8s.io/v1 is not served: no DRA in this cluster", plural)
            return ()
