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
