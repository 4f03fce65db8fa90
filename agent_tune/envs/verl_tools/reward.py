"""The ``verl_tools`` env's reward function (``reward="pkg.mod:fn"``): called with the :data:`REWARD_ARGUMENTS` it
declares, so a verl ``compute_score`` plugs in as it is (docs/envs.md, "verl's tools").
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

from agent_tune.utils.imports import import_callable
from agent_tune.utils.typed_config import OptionError

# What the env passes: the transcript, the final answer, the task's fields, the tools' rewards.
REWARD_ARGUMENTS = ("messages", "solution_str", "ground_truth", "data_source", "extra_info", "tools_kwargs",
                    "tool_rewards", "tool_scores")


def load_reward(path: str) -> Callable[..., Any]:
    """The function at ``module:function``, its required parameters among :data:`REWARD_ARGUMENTS`;
    :class:`OptionError` keyed ``reward``."""
    fn = import_callable(path, "reward")
    params = inspect.signature(fn).parameters.values()
    unknown = [p.name for p in params if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in REWARD_ARGUMENTS]
    if unknown:
        raise OptionError("reward", f"{path!r} requires {unknown}, which the env does not give (it gives "
                          f"{', '.join(REWARD_ARGUMENTS)})")
    return fn


def reward_arguments(fn: Callable[..., Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``given`` that ``fn`` takes."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(given)
    return {k: v for k, v in given.items() if k in params}


__all__ = ["REWARD_ARGUMENTS", "load_reward", "reward_arguments"]
