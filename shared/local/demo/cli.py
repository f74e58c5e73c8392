"""The `demo` command: `python -m shared.local.demo [options]` (what `make demo` runs).

Registers itself into `backlog-scaler` too, through `add_commands` (as `shared.local.sim.cli` does).
Exit status: 0 when every job ran, no busy node was terminated and no function call failed;
1 when the run failed one of those; 2 when it could not start (a bad option, moto missing); 130 on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shared.domain.errors import ConfigError, InputError
from shared.local.demo.scenario import SCENARIOS
from shared.local.help_format import CliParser

DEFAULT_OUT = Path("out/demo")
DEFAULT_SPEED = 40.0  # 1 simulated minute = 1.5 s

DESCRIPTION = """Run the scaler end to end on this machine: the real reconcile, webhook and aws_events
handlers, invoked like Lambda, against a local moto server and a fake Kubernetes API server, while a
simulated cluster boots nodes and runs a synthetic GPU workload in accelerated time. The cheaper GPU
group runs out of EC2 capacity on purpose. Prints a timeline of decisions and a summary; writes
report.json, timeline.txt, functions.log, plot.png and a kubeconfig to the output folder; with --hold,
kubectl can then look at the fake Kubernetes API until Ctrl-C."""


def _speed(raw: str) -> float:
    value = float(raw)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0 (0: as fast as possible)")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario", choices=sorted(SCENARIOS), default="default", help="default: %(default)s"
    )
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument(
        "--speed",
        type=_speed,
        default=DEFAULT_SPEED,
        help="simulated seconds per wall-clock second; 0 runs as fast as possible (default: %(default)g)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not write plot.png (needs --out)")
    parser.add_argument(
        "--hold",
        action="store_true",
        help="after the summary keep the servers up until Ctrl-C, for kubectl --kubeconfig <out>/kubeconfig",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.no_plot and args.out is None:
        # The default folder would keep the plot.png of an earlier run next to this run's report.
        raise InputError(f"--no-plot needs --out: {DEFAULT_OUT}/plot.png would be left from an earlier run")
    from shared.local.demo.driver import DemoOptions, run_demo

    options = DemoOptions(
        scenario=SCENARIOS[args.scenario](),
        out_dir=args.out or DEFAULT_OUT,
        speed=args.speed,
        plot=not args.no_plot,
        hold=args.hold,
    )
    return run_demo(options).exit_code


def add_commands(commands: Any) -> None:
    """Register `demo` on the `backlog-scaler` sub-command parser."""
    configure(
        commands.add_parser(
            "demo", help="run the scaler locally on a synthetic workload", description=DESCRIPTION
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m shared.local.demo", description=DESCRIPTION)
    configure(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, InputError) as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the servers and the environment were already cleaned up on the way out
        print("\ndemo: interrupted", file=sys.stderr)
        return 130
