"""verl's ``cpu`` platform: training on CPU with FSDP over gloo.

verl 0.9.1 resolves every device question through ``verl.plugin.platform.get_platform()`` and ships
platforms for NVIDIA, Ascend and ROCm only. :class:`CPUPlatform` answers for a machine without an
accelerator:

- collectives on ``gloo``; no CUDA IPC (weights reach vLLM through shared memory instead);
- ``device_module`` is :data:`cpu_device_module`, ``torch.cpu`` completed with the accelerator calls verl
  makes unconditionally (``empty_cache``, ``memory_allocated``, ``mem_get_info``, RNG state, ...) as
  no-ops or host-memory answers, so verl's memory bookkeeping runs unchanged; ``torch.cpu`` itself is
  left untouched;
- Ray bookkeeping stays on the ``GPU`` resource: verl places its workers on ``GPU`` bundles and asks Ray for
  the visible-device ids, so the CPU launcher declares one logical ``GPU`` per node to Ray
  (``ray_kwargs.ray_init.num_gpus``); nothing ever runs on it.

:func:`register` adds the platform under the name ``cpu`` and registers verl's FSDP engines for device
``cpu`` (verl registers them for ``cuda`` and ``npu`` only); the language-model one is
:class:`verl_ext.cpu.engine.SharedPrefixFSDPEngine`.
"""

from __future__ import annotations

import contextlib
import os
import types
from typing import Any, Iterator, Optional

import torch

PLATFORM_NAME = "cpu"


def _host_memory() -> tuple[int, int]:
    """(available, total) host memory in bytes."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)
    except ImportError:  # pragma: no cover - psutil ships with Ray
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


class _CPUDeviceModule(types.ModuleType):
    """``torch.cpu`` plus the ``torch.cuda``-style calls verl makes on its device module.

    Attributes not defined here are looked up on ``torch.cpu`` (streams, ``synchronize``, ``device_count``,
    ``is_available``, ...). Memory statistics are reported as zero: the caching allocator they describe
    does not exist on CPU.
    """

    def __init__(self) -> None:
        super().__init__("verl_ext.cpu.device_module", "torch.cpu with no-op accelerator memory calls")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    # -- caching allocator: nothing to release or measure on CPU --
    @staticmethod
    def empty_cache() -> None:
        """No caching allocator on CPU: nothing to release."""

    @staticmethod
    def ipc_collect() -> None:
        """No CUDA IPC handles on CPU."""

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        """No device memory cap on CPU."""

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    @staticmethod
    def memory_reserved(device: Any = None) -> int:
        return 0

    @staticmethod
    def max_memory_allocated(device: Any = None) -> int:
        return 0

    @staticmethod
    def max_memory_reserved(device: Any = None) -> int:
        return 0

    @staticmethod
    def memory_stats(device: Any = None) -> dict[str, int]:
        return {}

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        """Nothing to reset."""

    @staticmethod
    def reset_accumulated_memory_stats(device: Any = None) -> None:
        """Nothing to reset."""

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        """(free, total) bytes: host memory."""
        return _host_memory()

    @staticmethod
    def get_device_properties(device: Any = None) -> types.SimpleNamespace:
        return types.SimpleNamespace(name="CPU", total_memory=_host_memory()[1])

    # -- identity --
    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "CPU"

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def set_device(device: Any) -> None:
        """One CPU device: nothing to select."""

    # -- RNG: the CPU generator is the global one --
    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        torch.manual_seed(seed)


cpu_device_module = _CPUDeviceModule()


def _platform_base():
    from verl.plugin.platform import PlatformBase

    return PlatformBase


class CPUPlatform(_platform_base()):
    """verl platform for hosts without an accelerator (see the module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Registered after verl's own platforms, so auto-detection reaches it only when none of them is
        # available; a CPU is always there.
        return True

    def current_device(self) -> str:
        # verl uses this as a device argument (``.to(get_device_id())``, ``torch.device(...)``); an int
        # there means an accelerator index, so answer like ``torch.cpu.current_device()``: "cpu".
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        """One CPU device: nothing to select."""

    def synchronize(self, device_index: Optional[int] = None) -> None:
        """CPU ops are synchronous."""

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        """No configurable caching allocator on CPU (verl asks for expandable segments)."""

    def empty_cache(self) -> None:
        """Nothing to release."""

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets CUDA_VISIBLE_DEVICES for actors holding the logical GPU; verl reads it back for its
        # rank bookkeeping. vLLM's CPU build and torch on CPU ignore it.
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        # No CUDA IPC: verl's bucketed weight transfer then uses POSIX shared memory.
        return False

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        """No device profiler."""

    def profiler_stop(self) -> None:
        """No device profiler."""

    def cudart(self) -> Any:
        return None


def register() -> None:
    """Register :class:`CPUPlatform` as verl platform ``cpu`` and verl's FSDP engines for device ``cpu``.

    Idempotent. Must run before verl first calls ``get_platform()`` in the process, which the
    ``VERL_USE_EXTERNAL_MODULES`` hook guarantees (see :mod:`verl_ext.cpu.plugin`).
    """
    from verl.plugin.platform import PlatformRegistry

    if PlatformRegistry.get(PLATFORM_NAME) is not CPUPlatform:
        PlatformRegistry.register(platform=PLATFORM_NAME)(CPUPlatform)
    register_fsdp_engines()


def register_fsdp_engines() -> None:
    """Register the FSDP / FSDP2 engines for device ``cpu``: verl's value-model engine and, for language
    models, :class:`verl_ext.cpu.engine.SharedPrefixFSDPEngine` (verl's, packing shared prompts when its
    config asks). Idempotent."""
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithValueHead

    from verl_ext.cpu.engine import SharedPrefixFSDPEngine

    for model_type, engine_cls in (
        ("language_model", SharedPrefixFSDPEngine),
        ("value_model", FSDPEngineWithValueHead),
    ):
        backends = EngineRegistry._engines.get(model_type, {})
        missing = [b for b in ("fsdp", "fsdp2") if PLATFORM_NAME not in backends.get(b, {})]
        if missing:
            EngineRegistry.register(model_type=model_type, backend=missing, device=PLATFORM_NAME)(engine_cls)
