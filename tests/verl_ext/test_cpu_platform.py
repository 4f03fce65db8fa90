"""verl's ``cpu`` platform: registration, gloo, FSDP engines for device cpu, no-op memory calls."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl")

from verl.plugin.platform import PlatformRegistry, platform_manager  # noqa: E402

from verl_ext.cpu import platform as cpu_platform  # noqa: E402
from verl_ext.cpu.platform import CPUPlatform, cpu_device_module  # noqa: E402


@pytest.fixture
def cpu_singleton():
    """Make the CPU platform verl's current platform for one test, then restore the previous one."""
    cpu_platform.register()
    previous = platform_manager._current_platform
    platform_manager.set_platform(CPUPlatform())
    try:
        yield
    finally:
        platform_manager._current_platform = previous


def test_register_adds_cpu_platform_once():
    cpu_platform.register()
    cpu_platform.register()
    assert PlatformRegistry.get("cpu") is CPUPlatform
    names = PlatformRegistry.registered_names()
    assert names.count("cpu") == 1
    # verl's own platforms stay first, so a GPU host still auto-detects its GPU.
    assert names.index("cpu") > names.index("nvidia")


def test_platform_answers():
    p = CPUPlatform()
    assert p.device_name == "cpu"
    assert p.communication_backend_name() == "gloo"
    assert p.is_available() and p.device_count() == 1
    assert p.is_ipc_supported() is False
    assert p.ray_resource_name() == "GPU"
    assert p.ray_resource_options(1) == {"num_gpus": 1}
    assert p.get_device_capability() == (None, None)
    # used as a device argument by verl: must be a CPU device, not an accelerator index
    assert torch.zeros(1).to(p.current_device()).device.type == "cpu"
    with p.nvtx_range("x"):
        pass


def test_device_module_noops_and_delegation():
    d = cpu_device_module
    d.empty_cache()
    d.ipc_collect()
    d.set_per_process_memory_fraction(0.9)
    d.reset_peak_memory_stats()
    assert d.memory_allocated() == 0 and d.max_memory_reserved() == 0
    free, total = d.mem_get_info()
    assert 0 < free <= total
    assert d.get_device_name() == "CPU"
    state = d.get_rng_state()
    a = torch.rand(3)
    d.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))
    # delegated to torch.cpu
    assert d.synchronize is torch.cpu.synchronize
    assert d.is_available() is True
    # torch.cpu itself is not modified
    assert not hasattr(torch.cpu, "empty_cache")


def test_verl_device_helpers_use_cpu(cpu_singleton):
    from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device, is_support_ipc

    assert get_device_name() == "cpu"
    assert get_nccl_backend() == "gloo"
    assert get_torch_device() is cpu_device_module
    assert is_support_ipc() is False


def test_fsdp_engine_registered_for_cpu(cpu_singleton):
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    from verl_ext.cpu.engine import SharedPrefixFSDPEngine

    for backend in ("fsdp", "fsdp2"):
        engine = EngineRegistry.get_engine_cls("language_model", backend)
        assert engine is SharedPrefixFSDPEngine and issubclass(engine, FSDPEngineWithLMHead)
        assert EngineRegistry.get_engine_cls("value_model", backend) is FSDPEngineWithValueHead


def test_auto_detection_reaches_cpu_without_gpu(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: verl's own platform wins, as it should")
    cpu_platform.register()
    monkeypatch.delenv("VERL_PLATFORM", raising=False)
    monkeypatch.setattr(PlatformRegistry.get("nvidia"), "check_smi_command", staticmethod(lambda cmd: False))
    assert platform_manager._detect_platform_name() == "cpu"


def test_cpu_environment_for_workers():
    from verl_ext.cpu.launch import PLUGIN_MODULE, cpu_environment

    env = cpu_environment({"VERL_USE_EXTERNAL_MODULES": "other.mod", "PYTHONPATH": "/x"})
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"other.mod,{PLUGIN_MODULE}"
    assert env["VERL_PLATFORM"] == "cpu"
    assert env["PYTHONPATH"].split(":")[1:] == ["/x"]
    again = cpu_environment(env)
    assert again["VERL_USE_EXTERNAL_MODULES"] == env["VERL_USE_EXTERNAL_MODULES"]
    assert again["PYTHONPATH"] == env["PYTHONPATH"]
