"""The demo's summary and status, as README.md and docs/demo.md show them, are what `make demo` prints.

The demo tells the same story at any `--speed` (every function reads the demo's clock), so one run as
fast as the machine goes prints the figures of `make demo`. Only the wall-clock figures (the mean
invocation time, the wall time of the run) and the output folder differ between runs: they are masked
on both sides. docs/demo.md shows the whole summary and the status, and an excerpt of the timeline
(instance ids and node names masked: moto draws them at random); README.md a subset of the summary.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- demo-summary"
TIMELINE_MARKER = "<!-- demo-timeline"
RANDOM_NAMES = (
    (re.compile(r"\bi-[0-9a-f]{17}\b"), "i-<id>"),
    (re.compile(r"\bip-10(-\d+){3}\b"), "ip-<node>"),
)
WALL_CLOCK = (
    (re.compile(r"mean \d+ ms"), "mean <wall> ms"),
    (re.compile(r"simulated in [\d.]+s wall"), "simulated in <wall>s wall"),
    (re.compile(r"--kubeconfig \S+/kubeconfig"), "--kubeconfig <out>/kubeconfig"),
)


def masked(line: str) -> str:
    for pattern, replacement in (*WALL_CLOCK, *RANDOM_NAMES):
        line = pattern.sub(replacement, line)
    return line.rstrip()


def unnamed(line: str) -> str:
    for pattern, replacement in RANDOM_NAMES:
        line = pattern.sub(replacement, line)
    return line


def documented_block(path: Path, marker: str = MARKER) -> list[str]:
    """The lines of the code block that follows `marker` in `path`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(marker))
    assert lines[start + 1] == "```", f"{path.name}: the marker must be followed by a code block"
    end = lines.index("```", start + 2)
    return [masked(line) for line in lines[start + 2 : end]]


def printed_block(stdout: str) -> list[str]:
    """From the demo's `summary` line to the end of the status table it prints last."""
    lines = stdout.splitlines()
    start = lines.index("summary")
    return [masked(line) for line in lines[start:] if not line.startswith("output: ")]


@pytest.mark.slow
def test_the_documented_demo_summary_is_what_the_demo_prints(tmp_path: Path) -> None:
    # Given the demo's default scenario, run as fast as the machine goes
    command = [sys.executable, "-m", "shared.local.demo", "--speed", "0", "--no-plot", "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    printed = printed_block(done.stdout)

    # Then docs/demo.md shows exactly its summary and status
    assert documented_block(ROOT / "docs" / "demo.md") == printed

    # And every line the README shows is one of them
    missing = [line for line in documented_block(ROOT / "README.md") if line not in printed]
    assert missing == [], "README.md shows summary lines the demo does not print"

    # And every line of the timeline excerpt in docs/demo.md was printed, ids and node names aside
    timeline = {unnamed(masked(line)) for line in done.stdout.splitlines()}
    excerpt = documented_block(ROOT / "docs" / "demo.md", TIMELINE_MARKER)
    missing = [line for line in excerpt if line.strip() != "..." and unnamed(line) not in timeline]
    assert missing == [], "docs/demo.md shows timeline lines the demo does not print"
