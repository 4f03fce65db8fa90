"""Objects named by path, ``package.module:name``: plug-in envs, simulated-user classes, MCP verifiers.

The one rule: the module is imported; when it is not found and its top package is not installed, the folder the
command runs in is added to ``sys.path`` and the import tried again (``examples.envs.calculator`` from the
repository root: ``python -m`` puts that folder on ``sys.path``, console scripts such as ``agent-tune`` do not).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable


def import_module(module_name: str) -> Any:
    """``importlib.import_module``, with the working folder as a last resort (see the module docstring)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        if cwd in sys.path or not exc.name or module_name.partition(".")[0] != exc.name.partition(".")[0]:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)


def import_object(path: str) -> Any:
    """The object at ``package.module:name``. Raises ``ValueError`` for a malformed path, ``ImportError`` and
    ``AttributeError`` as importing and looking up raise them."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{path!r} must look like 'package.module:name'")
    return getattr(import_module(module_name), attr)


def import_callable(path: str, key: str) -> Callable[..., Any]:
    """The callable at ``package.module:name`` (an option's value); ``OptionError`` keyed ``key`` otherwise."""
    from agent_tune.utils.typed_config import OptionError

    try:
        fn = import_object(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise OptionError(key, f"{path!r} cannot be imported ({type(exc).__name__}: {exc})") from None
    if not callable(fn):
        raise OptionError(key, f"{path!r} is not callable")
    return fn
