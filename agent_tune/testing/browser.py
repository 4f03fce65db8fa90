"""A headless chromium for the viewer's browser tests and benchmark: the system's, driven by Playwright.

Playwright (PyPI ``playwright``, the ``dev`` extra) is only the driver here: it launches the chromium the system
has (Debian's ``chromium`` package, which ``scripts/install.sh`` installs with apt when it can) through
``executable_path``; nothing is downloaded (``playwright install`` is never run). :func:`missing_browser` says why
there is none, for a test to skip with.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterator

# where to look, in order: an explicit path, then the names Debian and Ubuntu give the browser
CHROMIUM_ENV = "AGENT_TUNE_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The chromium to drive: ``$AGENT_TUNE_CHROMIUM`` if set, else the first of :data:`CHROMIUM_NAMES` on PATH."""
    given = os.environ.get(CHROMIUM_ENV)
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_browser() -> str | None:
    """Why no browser can be driven here (``None``: one can)."""
    if importlib.util.find_spec("playwright") is None:
        return "the Python package playwright is not installed (the dev extra: pip install -e '.[dev]')"
    if find_chromium() is None:
        return (f"no chromium found ({', '.join(CHROMIUM_NAMES)} on PATH or ${CHROMIUM_ENV}); "
                "scripts/install.sh installs Debian's with apt-get install -y chromium")
    return None


@dataclass
class PageLog:
    """What a page reported: console errors and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[tuple[Any, PageLog]]:
    """A new page of a headless system chromium, ``(page, log)``; the browser closes on exit.

    Raises ``RuntimeError`` naming what is missing (:func:`missing_browser`)."""
    reason = missing_browser()
    if reason is not None:
        raise RuntimeError(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: chromium's own sandbox needs user namespaces, which containers (root in CI) often lack
        browser = p.chromium.launch(executable_path=find_chromium(), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            log = PageLog()
            page.on("console", lambda m: log.errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: log.errors.append(str(e)))
            yield page, log
        finally:
            browser.close()
