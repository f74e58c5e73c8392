"""Every option's help says its default, as `kubectl --help` does."""

from __future__ import annotations

import argparse

import pytest

from shared.local.cli import build_parser
from shared.local.demo.cli import DESCRIPTION
from shared.local.demo.cli import configure as configure_demo
from shared.local.help_format import CliParser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _without_default(parser: argparse.ArgumentParser) -> list[str]:
    """Options that have a default to tell (not None or False) and whose help does not tell it."""
    formatter = parser._get_formatter()
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if action.default is None or action.default is False or action.default in ([], argparse.SUPPRESS):
            continue
        if "default" not in formatter._expand_help(action):
            missing.append(action.option_strings[-1])
    return missing


@pytest.mark.parametrize("command", sorted(_subcommands(build_parser())))
def test_every_option_of_every_command_says_its_default(command: str) -> None:
    parser = _subcommands(build_parser())[command]
    assert parser.formatter_class is not argparse.HelpFormatter  # the subcommands inherit the formatter
    assert _without_default(parser) == [], command


def test_the_demo_module_parser_says_its_defaults() -> None:
    parser = CliParser(prog="python -m shared.local.demo", description=DESCRIPTION)
    configure_demo(parser)
    text = parser.format_help()
    assert "default: default" in text and "output folder (default:" in text
    assert _without_default(parser) == []


def test_defaults_are_shown_once_and_zero_is_a_default() -> None:
    parser = CliParser(prog="x")
    parser.add_argument("--delay", type=int, default=0, help="seconds")
    parser.add_argument("--mode", default="a", help="mode (default: %(default)s)")
    parser.add_argument("--name", help="a name")
    text = " ".join(parser.format_help().split())
    assert "seconds (default: 0)" in text
    assert text.count("(default: a)") == 1
    assert "a name (default" not in text
