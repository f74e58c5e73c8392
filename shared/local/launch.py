"""The `backlog-scaler` command's entry point: the CLI's modules imported with the collector paused.

Importing the command's modules (the config's pydantic models, the planner's dataclasses) builds
~100,000 objects, all kept until the process ends; with the collector on, the growing heap is walked
by dozens of young collections that find nothing (~9 ms of every command, `python -X importtime`
with and without `gc.disable()`). What the import built is frozen (`gc.freeze`, shared/collector.py)
so that no later collection walks it either.
"""

from __future__ import annotations

from shared.collector import gc_paused


def main() -> int:
    with gc_paused(keep=True):
        from shared.local.cli import main as cli_main
    return cli_main()
