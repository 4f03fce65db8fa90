"""Tool environments: the contract, the registry and the built-in environments."""

from agent_tune.envs.base import BaseToolEnv, Observation, SamplerHints, StepResult
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
    "Observation",
    "SamplerHints",
    "StepResult",
    "UnknownEnvError",
    "describe_envs",
    "env_names",
    "get_env_class",
    "make_env",
    "register_env",
    "unregister_env",
]
