"""tinker-cookbook's ``Env`` / ``EnvGroupBuilder`` as an environment (``make_env("tinker", ...)``): see :mod:`.env`."""

from agent_tune.envs.tinker.env import TinkerEnv, TinkerEnvError

__all__ = ["TinkerEnv", "TinkerEnvError"]
