"""NeMo Gym resource servers as environments (``make_env("nemo_gym", base_url=...)``): see :mod:`.env`."""

from agent_tune.envs.nemo_gym.env import NemoGymEnv

__all__ = ["NemoGymEnv"]
