"""What the launcher does before verl starts when ``trainer.device=cpu``.

verl carries process-wide switches in environment variables, and its Ray workers and vLLM processes read
them at import: the only way to get our CPU platform into every one of them is verl's own
``VERL_USE_EXTERNAL_MODULES`` hook (see :mod:`verl_ext.cpu.plugin`). :func:`cpu_environment` computes those
variables; :func:`enable_cpu_support` sets them in this process (before verl is imported, or fixing up an
already imported verl) and adds them to the Ray runtime environment in the config so that workers on an
existing Ray cluster get them too. Users set nothing themselves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig, OmegaConf, open_dict

PLUGIN_MODULE = "verl_ext.cpu.plugin"
PLATFORM_NAME = "cpu"


def _package_root() -> str:
    """The directory holding the ``verl_ext`` package (for workers started outside this interpreter)."""
    return str(Path(__file__).resolve().parents[2])


def cpu_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables every verl process needs on CPU, merged with what ``environ`` already has.

    - ``VERL_USE_EXTERNAL_MODULES``: adds :mod:`verl_ext.cpu.plugin` to the modules verl imports first.
    - ``VERL_PLATFORM=cpu``: verl's platform override (auto-detection would also reach ``cpu`` last; being
      explicit keeps a CPU run on CPU on a host that also has GPUs).
    - ``PYTHONPATH``: the directory holding ``verl_ext``, so Ray workers and vLLM processes can import it
      even when the package is run from a source checkout.
    """
    environ = os.environ if environ is None else environ
    modules = [m for m in environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if PLUGIN_MODULE not in modules:
        modules.append(PLUGIN_MODULE)
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = _package_root()
    if root not in paths:
        paths.insert(0, root)
    return {
        "VERL_USE_EXTERNAL_MODULES": ",".join(modules),
        "VERL_PLATFORM": PLATFORM_NAME,
        "PYTHONPATH": os.pathsep.join(paths),
    }


def enable_cpu_support(config: DictConfig) -> dict[str, str]:
    """Prepare this process and ``config`` for a verl run on CPU.

    Sets :func:`cpu_environment` in ``os.environ``, adds the same variables to
    ``ray_kwargs.ray_init.runtime_env.env_vars`` in ``config``, and loads the plugin here (if verl was
    imported earlier with another platform, the platform is switched to ``cpu``).

    Returns:
        The environment variables set.
    """
    env = cpu_environment()
    os.environ.update(env)
    with open_dict(config):
        runtime_env = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env")
        if runtime_env is None:
            OmegaConf.update(config, "ray_kwargs.ray_init.runtime_env", {}, force_add=True)
        existing = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env.env_vars") or {}
        merged = {**OmegaConf.to_container(existing, resolve=True), **env} if existing else dict(env)
        OmegaConf.update(config, "ray_kwargs.ray_init.runtime_env.env_vars", merged, force_add=True, merge=False)
    if _package_root() not in sys.path:
        sys.path.insert(0, _package_root())
    _load_plugin_here()
    return env


def _load_plugin_here() -> None:
    """Import the plugin in this process and make sure verl's platform singleton is the CPU one."""
    import importlib

    importlib.import_module(PLUGIN_MODULE)
    from verl.plugin.platform import get_platform, set_platform

    from verl_ext.cpu.platform import CPUPlatform

    if not isinstance(get_platform(), CPUPlatform):
        set_platform(CPUPlatform())
