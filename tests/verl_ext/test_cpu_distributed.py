"""The process-group backend string fix: only same-backend duplicates are merged."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from verl_ext.cpu.distributed import _wrap, dedupe_backend


@pytest.mark.parametrize(
    "given, expected",
    [
        ("cpu:gloo,cpu:gloo", "cpu:gloo"),
        ("cpu:gloo,cuda:nccl", "cpu:gloo,cuda:nccl"),
        ("cpu:gloo,cpu:nccl", "cpu:gloo,cpu:nccl"),  # a real conflict is left for torch to reject
        ("gloo", "gloo"),
        ("cpu:gloo", "cpu:gloo"),
        (None, None),
    ],
)
def test_dedupe_backend(given, expected):
    assert dedupe_backend(given) == expected


def test_wrapper_passes_deduped_backend():
    seen = {}

    def fake_init(backend=None, **kwargs):
        seen["backend"], seen["kwargs"] = backend, kwargs

    _wrap(fake_init)(backend="cpu:gloo,cpu:gloo", rank=0, world_size=1)
    assert seen == {"backend": "cpu:gloo", "kwargs": {"rank": 0, "world_size": 1}}
    _wrap(fake_init)("cpu:gloo,cpu:gloo")
    assert seen["backend"] == "cpu:gloo"


def test_gloo_group_initialises_with_verl_backend_string(tmp_path):
    """torch rejects verl's CPU string unless wrapped; wrapped, a 1-rank gloo group comes up."""
    init = _wrap(dist.init_process_group)
    init(backend="cpu:gloo,cpu:gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        assert dist.get_backend() in ("gloo", "cpu:gloo")
        assert dist.is_initialized() and dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
