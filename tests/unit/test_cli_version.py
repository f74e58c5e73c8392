"""`backlog-scaler --version`, help on every flag and sub-command, and one config error per line."""

from __future__ import annotations

import argparse
from importlib.metadata import version
from pathlib import Path

import pytest

from shared.local.cli import build_parser, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMANDS = ("plan", "admission-token", "simulate")


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    # When asking for the version
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    # Then it prints the package's version and exits 0
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"backlog-scaler {version('backlog-scaler')}"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_and_sub_command_has_help(command: str) -> None:
    # Given the parser
    commands = _subparsers(build_parser())
    # Then the sub-command is listed with help, and each of its flags has help (or is hidden on purpose)
    listed = {a.dest: a.help for a in commands._choices_actions}
    assert listed.get(command)
    for action in commands.choices[command]._actions:
        assert action.help, f"{command} {action.option_strings} has no help"


def test_admission_token_help_says_the_secret_is_read_from_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["admission-token", "--help"])
    assert "read from stdin" in " ".join(capsys.readouterr().out.split())


def test_config_errors_are_printed_one_per_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a config missing cluster_name, with two bad fields
    config = tmp_path / "config.yaml"
    config.write_text(
        "node_groups:\n"
        "  - {name: a, asg_name: a, instance_type: p4d.24xlarge, price_per_hour: -1}\n"
        "  - {name: b, asg_name: b, instance_type: p3.16xlarge, max_size: -2}\n"
    )
    args = ["plan", "--pods", str(EXAMPLES / "pods.json"), "--nodes", str(EXAMPLES / "nodes.json")]
    # When planning with it
    assert main([*args, "--asgs", str(EXAMPLES / "asgs.json"), "--config", str(config)]) == 2
    # Then each problem is on its own line, naming the file and the field
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"backlog-scaler: error: {config}: ") for line in lines)
    fields = sorted(line.removeprefix(f"backlog-scaler: error: {config}: ").split(":")[0] for line in lines)
    assert fields == ["cluster_name", "node_groups[0].price_per_hour", "node_groups[1].max_size"]
