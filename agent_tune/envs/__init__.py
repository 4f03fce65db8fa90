"""Tool environments: the contract, the registry and the built-in environments."""

from agent_tune.envs.base import (
    BaseToolEnv,
    EnvStateError,
    EpisodeInfo,
    Observation,
    SamplerHints,
    StepResult,
    ToolResult,
)
from agent_tune.envs.checker import EnvCheckError, check_env
from agent_tune.envs.registry import (
    UnknownEnvError,
    describe_envs,
    env_names,
    get_env_class,
    make_env,
    register_env,
    unregister_env,
)

__all__ = [
    "BaseToolEnv",
    "EnvCheckError",
    "EnvStateError",
    "EpisodeInfo",
    "Observation",
    "SamplerHints",
    "StepResult",
    "ToolResult",
    "UnknownEnvError",
    "check_env",
    "describe_envs",
    "env_names",
    "get_env_class",
    "make_env",
    "register_env",
    "unregister_env",
]
