"""`CustomResourceReader`: the reads of custom resources whose CRD may be absent or at another version.

ProvisioningRequests are read from v1, else (an older CRD) v1beta1; coscheduling and Volcano PodGroups
from their one version each. An API that is not served (404: the CRD is not installed) adds none.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from shared.adapters.kubernetes.calls import ApiCaller, ReadNotFoundError, api_path
from shared.adapters.kubernetes.listing import ListParser, PagedLister
from shared.constants import PROVISIONING_API_GROUP
from shared.domain.provisioning import (
    COSCHEDULING_API_GROUP,
    COSCHEDULING_API_VERSION,
    PROVISIONING_API_VERSIONS,
    VOLCANO_API_GROUP,
    VOLCANO_API_VERSION,
    PodGroup,
    ProvisioningRequest,
)
from shared.formats.kubernetes import pod_group_from_json, provisioning_request_from_json

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _pod_group_of(api_version: str, obj: Mapping[str, Any]) -> PodGroup:
    """A PodGroup listed from `api_version` (a list item may leave its apiVersion out)."""
    return pod_group_from_json(obj if obj.get("apiVersion") else {**obj, "apiVersion": api_version})


class CustomResourceReader:
    """Lists of ProvisioningRequests and PodGroups through the CustomObjects API."""

    def __init__(self, caller: ApiCaller) -> None:
        self._lister = PagedLister(caller)
        self._provisioning_requests = ListParser("ProvisioningRequest", provisioning_request_from_json)
        self._pod_groups = {
            api: ListParser("PodGroup", functools.partial(_pod_group_of, api))
            for api in (
                f"{COSCHEDULING_API_GROUP}/{COSCHEDULING_API_VERSION}",
                f"{VOLCANO_API_GROUP}/{VOLCANO_API_VERSION}",
            )
        }

    def list_provisioning_requests(self) -> tuple[ProvisioningRequest, ...]:
        """Every ProvisioningRequest, from v1 or (an older CRD) v1beta1; () when neither is served."""
        for version in PROVISIONING_API_VERSIONS:
            found = self._list_custom(
                PROVISIONING_API_GROUP, version, "provisioningrequests", self._provisioning_requests, None
            )
            if found is not None:
                return found
        return ()

    def list_pod_groups(self) -> tuple[PodGroup, ...]:
        """Every coscheduling and Volcano PodGroup; an API that is not served adds none."""
        found: list[PodGroup] = []
        for api, parser in self._pod_groups.items():
            group, _, version = api.partition("/")
            found.extend(self._list_custom(group, version, "podgroups", parser) or ())
        return tuple(found)

    def _list_custom(
        self,
        group: str,
        version: str,
        plural: str,
        parser: ListParser[T],
        absent: tuple[T, ...] | None = (),
    ) -> tuple[T, ...] | None:
        """Every object of a custom resource; `absent` when its API answers 404 (no such CRD)."""

        path = api_path("/apis/{group}/{version}/{plural}", group=group, version=version, plural=plural)
        try:
            return self._lister.list_every(f"{plural}.{group}/{version}", path, parser)
        except ReadNotFoundError:
            logger.debug("%s.%s/%s is not served: the CRD is not installed", plural, group, version)
            return absent
