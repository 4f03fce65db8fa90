"""The CPU engine's thread count (verl_ext/cpu/engine.py): a Ray worker started with OMP_NUM_THREADS=1 computes
on every core the process may run on once the engine is built."""

from __future__ import annotations

import os

import pytest
import torch

from verl_ext.cpu import engine as cpu_engine
from verl_ext.cpu.engine import CPUFSDPEngineConfig, SharedPrefixFSDPEngine, torch_threads


def test_torch_threads_zero_means_every_core_of_the_process():
    assert torch_threads(0) == len(os.sched_getaffinity(0))
    assert torch_threads(3) == 3
    with pytest.raises(ValueError, match="agent_tune.cpu_threads"):
        torch_threads(-1)


@pytest.mark.parametrize("setting", [0, 1])
def test_initialize_sets_the_threads_before_building_the_model(monkeypatch, setting):
    seen = []
    # verl's initialize builds the model and optimizer: record the threads it would compute on instead
    monkeypatch.setattr(cpu_engine.FSDPEngineWithLMHead, "initialize",
                        lambda self: seen.append(torch.get_num_threads()))
    engine = SharedPrefixFSDPEngine.__new__(SharedPrefixFSDPEngine)
    engine.engine_config = CPUFSDPEngineConfig(torch_threads=setting)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if setting == 0 else 2)  # what Ray's OMP_NUM_THREADS=1 leaves, or another count
        engine.initialize()
        assert seen == [torch_threads(setting)]
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("forward_only", [False, True])
def test_a_forward_only_model_is_built_without_verls_pinned_offload(monkeypatch, forward_only):
    """verl offloads a forward-only model (the KL term's reference) to pinned host memory, which needs an
    accelerator: the CPU engine builds it as any other model and keeps its config afterwards."""
    seen = []
    monkeypatch.setattr(cpu_engine.FSDPEngineWithLMHead, "_build_fsdp_module",
                        lambda self, module: seen.append(self.engine_config.forward_only) or module)
    engine = SharedPrefixFSDPEngine.__new__(SharedPrefixFSDPEngine)
    config = CPUFSDPEngineConfig(forward_only=forward_only)
    engine.engine_config = config
    assert engine._build_fsdp_module("module") == "module"
    assert seen == [False]
    assert engine.engine_config is config
