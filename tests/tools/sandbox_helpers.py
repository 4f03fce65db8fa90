"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import os
import time

import psutil


def sandbox_processes() -> list[psutil.Process]:
    """Processes on this host that belong to a sandbox run (bwrap or its children) started by us."""
    me = psutil.Process()
    return [p for p in me.children(recursive=True) if _alive(p)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_no_children(timeout: float = 5.0) -> list[psutil.Process]:
    """Wait until this process has no live descendants; return whatever is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = sandbox_processes()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def is_root() -> bool:
    return os.geteuid() == 0
