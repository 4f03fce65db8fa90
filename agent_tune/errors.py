"""Exceptions shared across agent-tune's packages.

A leaf module: it imports nothing from ``agent_tune`` or ``verl_ext``, so any module may import it without
creating an import cycle (tests/test_import_cycles.py). An exception that more than one module raises or
catches belongs here rather than in the module of its first user.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the offending key.

    Raised by the launchers' start-up checks (:mod:`agent_tune.launch`); ``agent-tune train`` / ``sft`` /
    ``curriculum`` report it and exit with status 2.
    """
