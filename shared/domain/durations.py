"""Durations as operators read them in reasons and reports."""

from __future__ import annotations


def short_duration(seconds: float) -> str:
    """`45s`, `12m05s`, `3h20m`, `2d04h`: the two largest units, truncated."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
