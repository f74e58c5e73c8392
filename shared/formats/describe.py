"""The envelope every AWS CLI describe-* output shares: one list under a known key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.errors import InputError


def described_items(document: object, key: str, source: str, command: str) -> list[Any]:
    """The list under `key` of an AWS CLI describe-* output (one page or several merged); InputError
    "`source`: expected the output of `command`" when the document is not that output."""
    items = document.get(key) if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        raise InputError(f"{source}: expected the output of {command}")
    return items
