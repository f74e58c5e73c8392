"""The `backlog-scaler` commands shown in README.md and docs/ use only options the CLI has, and the
synopsis of `simulate` in docs/simulate.md names every option it has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from shared.local.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"(?:^|\s|/)backlog-scaler (plan|simulate|status|admission-token)\b")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def options_of(command: str, *, shown_in_help: bool = False) -> set[str]:
    """The command's long options (with `shown_in_help`, those its --help lists)."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = action.choices[command]
    return {
        option
        for a in sub._actions
        if not (shown_in_help and a.help == argparse.SUPPRESS)
        for option in a.option_strings
        if option.startswith("--")
    }


def shown_commands(path: Path) -> list[tuple[str, str]]:
    """(command, its text with continuation lines) for each command line in the code blocks of `path`."""
    shown: list[tuple[str, str]] = []
    in_code, in_command, continued = False, False, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code, in_command, continued = not in_code, False, False
            continue
        if not in_code:
            continue
        # A continuation: after a trailing backslash, or an indented line of options (a synopsis)
        if in_command and (continued or (line[:1].isspace() and line.lstrip()[:1] in "[-")):
            shown[-1] = (shown[-1][0], shown[-1][1] + " " + line)
        elif match := COMMAND.search(line):
            shown.append((match.group(1), line))
        else:
            in_command = continued = False
            continue
        in_command, continued = True, line.rstrip().endswith("\\")
    return shown


def test_documented_commands_use_only_real_options() -> None:
    unknown = [
        f"{path.name}: {command} {option}"
        for path in DOCS
        for command, text in shown_commands(path)
        for option in OPTION.findall(text.split("#")[0])
        if option not in options_of(command)
    ]
    assert unknown == []


def test_the_simulate_synopsis_names_every_option() -> None:
    synopsis = shown_commands(ROOT / "docs" / "simulate.md")[0]
    assert synopsis[0] == "simulate"
    missing = options_of("simulate", shown_in_help=True) - {"--help"} - set(OPTION.findall(synopsis[1]))
    assert sorted(missing) == []
