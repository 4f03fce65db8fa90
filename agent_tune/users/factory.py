"""Builds the simulated user of an episode from its :class:`~agent_tune.users.config.UserConfig`."""

from __future__ import annotations

from typing import Any, Mapping

from agent_tune.users.base import User
from agent_tune.users.config import UserConfig, user_class
from agent_tune.users.llm import LLMUser
from agent_tune.users.scripted import ScriptedUser


def make_user(config: Mapping[str, Any] | UserConfig | None) -> User:
    """A fresh user for one episode, as ``config`` describes it."""
    config = UserConfig.parse(config, "user")
    if ":" in config.kind:
        return user_class(config.kind, config.kwargs)(**config.kwargs)
    if config.kind == "scripted":
        return ScriptedUser(config.turns)
    return LLMUser(config)
