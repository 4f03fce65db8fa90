"""Token-exact multi-turn rollout: the episode runner, the token trajectory and chat-template rendering.

Imports nothing from verl or vLLM: a :class:`Policy` adapts whichever sampler is in use.
"""

from agent_tune.rollout.chat_render import ChatRenderer, DriftReport, TemplateError, check_drift
from agent_tune.rollout.policy import GenerationOutput, Policy, StopReason, normalize_stop_reason
from agent_tune.rollout.runner import EpisodeResult, PromptTooLongError, RolloutLimits, run_episode
from agent_tune.rollout.scripted_policy import ScriptedPolicy
from agent_tune.rollout.templates import available_templates, load_chat_template
from agent_tune.rollout.trajectory import Trajectory, TrajectoryError

__all__ = [
    "ChatRenderer",
    "DriftReport",
    "EpisodeResult",
    "GenerationOutput",
    "Policy",
    "PromptTooLongError",
    "RolloutLimits",
    "ScriptedPolicy",
    "StopReason",
    "TemplateError",
    "Trajectory",
    "TrajectoryError",
    "available_templates",
    "check_drift",
    "load_chat_template",
    "normalize_stop_reason",
    "run_episode",
]
