"""Shared-memory cleanup removes only new, unused files matching vLLM's patterns."""

from __future__ import annotations

import mmap
import os

from verl_ext.cpu.shm import ShmSnapshot


def test_cleanup_removes_only_new_unused_matching_files(tmp_path):
    (tmp_path / "psm_old").write_bytes(b"x")
    snap = ShmSnapshot.take(directory=tmp_path)
    (tmp_path / "psm_new").write_bytes(b"x")
    (tmp_path / "sem.mp-abc").write_bytes(b"x")
    (tmp_path / "other_file").write_bytes(b"x")
    held = tmp_path / "psm_held"
    held.write_bytes(b"\0" * 4096)
    with open(held, "r+b") as fh:
        mapping = mmap.mmap(fh.fileno(), 4096)
        try:
            removed = snap.cleanup(wait_s=0)
        finally:
            mapping.close()
    assert sorted(removed) == ["psm_new", "sem.mp-abc"]
    assert sorted(os.listdir(tmp_path)) == ["other_file", "psm_held", "psm_old"]
    # Once nobody maps it, the leftover goes too.
    assert snap.cleanup(wait_s=0) == ["psm_held"]


def test_nothing_new_nothing_removed(tmp_path):
    (tmp_path / "psm_a").write_bytes(b"x")
    assert ShmSnapshot.take(directory=tmp_path).cleanup(wait_s=0) == []
    assert os.listdir(tmp_path) == ["psm_a"]
