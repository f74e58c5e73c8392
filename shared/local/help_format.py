"""Help texts that show every default, as `kubectl --help` does: one formatter for every CLI parser."""

from __future__ import annotations

import argparse
from typing import Any


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless it has none to tell (None, False, an empty
    list) or the help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or action.option_strings == []
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            return action.help
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose help, and its subcommands' (which are built by its class), shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
