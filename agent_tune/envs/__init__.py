"""Tool environments: the contract, the registry and the built-in environments.

The built-in environments (the benchmarks' and the adapters' to other frameworks) are listed, by registered name
and class path, in ``_BUILTIN`` of :mod:`agent_tune.envs.registry` (``agent-tune envs`` prints them). Their classes
(``BFCLToolEnv``, ``SkyRLGymEnv``, ...) are importable from here by class name and load on first access, so
importing this package never imports bfcl-eval, tau2 or any adapted framework.
"""

from typing import Any

from agent_tune.envs.base import (
    BaseToolEnv,
    CallToolEnv,
    EnvContractError,
    EnvStateError,
    EpisodeInfo,
    EpisodeStatus,
    Observation,
    Outcome,
    SamplerHints,
    Step,
    StepResult,
    StopReason,
    ToolResult,
    WholeTextEnv,
)
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.checker import CheckReport, EnvCheckError, check_env
from agent_tune.envs.registry import (
    BUILTIN_CLASSES,
    EnvCard,
    UnknownEnvError,
    describe_envs,
    env_names,
    get_env_class,
    make_env,
    register_env,
    unregister_env,
)
from agent_tune.envs.report import EvalReport

__all__ = [
    "BaseToolEnv",
    "CallToolEnv",
    "CheckReport",
    "EnvCheckError",
    "EnvCard",
    "EnvContractError",
    "EnvStateError",
    "EpisodeInfo",
    "EpisodeStatus",
    "EvalReport",
    "Observation",
    "Outcome",
    "SamplerHints",
    "Step",
    "StepResult",
    "StopReason",
    "Task",
    "TaskCatalogue",
    "ToolResult",
    "UnknownEnvError",
    "WholeTextEnv",
    "check_env",
    "describe_envs",
    "env_names",
    "get_env_class",
    "make_env",
    "register_env",
    "unregister_env",
]


def __getattr__(name: str) -> Any:
    """A built-in environment class by its class name, imported on first access."""
    if name in BUILTIN_CLASSES:
        import importlib

        module, _, attribute = BUILTIN_CLASSES[name].partition(":")
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *BUILTIN_CLASSES])
