"""Argument types the command lines share."""

from __future__ import annotations

import argparse
import json


def json_object(text: str) -> dict:
    """An ``argparse`` type: a JSON object (``--options '{"seed": 1}'``), else a usage error saying why."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The commands' help layout: a description and an epilog (the examples) printed as written, and each option's
    help ending with its default, unless the help already names one or the default is empty."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (action.option_strings and "default" not in text and default is not argparse.SUPPRESS
                and default is not None and default is not False and default not in ("", [], {})):
            text += " (default: %(default)s)"
        return text


def examples(*lines: str) -> str:
    """An epilog of example command lines, one a line."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)
