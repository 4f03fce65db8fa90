"""Simulated users: the second model in the loop of user-facing environments (tau2).

A :class:`User` answers a conversation seen from its side (its system prompt, then the agent's messages as
``user`` turns and its own as ``assistant`` turns, OpenAI chat format) with a :class:`UserReply`: text, and
tool calls where the environment gives the user tools (tau2's telecom). :class:`LLMUser` asks any
OpenAI-compatible endpoint; :class:`ScriptedUser` replays fixed turns (tests). :func:`make_user` builds one
from a :class:`UserConfig` (Hydra: ``user: {kind, base_url, model, ...}``).
"""

from agent_tune.sync import run_sync
from agent_tune.users.base import User, UserError, UserReply, UserToolCall
from agent_tune.users.config import USER_KINDS, UserConfig
from agent_tune.users.factory import make_user
from agent_tune.users.llm import LLMUser, UserUnavailableError
from agent_tune.users.scripted import ScriptedUser

__all__ = [
    "USER_KINDS",
    "LLMUser",
    "ScriptedUser",
    "User",
    "UserConfig",
    "UserError",
    "UserReply",
    "UserToolCall",
    "UserUnavailableError",
    "make_user",
    "run_sync",
]
