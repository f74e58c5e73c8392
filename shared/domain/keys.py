"""The key of a namespaced object across the model, its indexes and the state store."""

from __future__ import annotations


def namespaced_key(namespace: str, name: str) -> str:
    """`namespace/name`, as kubectl names a namespaced object (and how the model's indexes join)."""
    return f"{namespace}/{name}"
