"""The pure planner: `plan(snapshot, config, now) -> Plan`."""

from shared.planner.plan import plan

__all__ = ["plan"]
