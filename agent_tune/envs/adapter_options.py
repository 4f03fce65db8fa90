"""The options an adapter to another framework shares, checked the one typed way (:class:`AdapterOptions`, a
:class:`~agent_tune.utils.typed_config.ConfigModel`): the step limit (``max_steps``), the stop strings (``stop``)
and the two time limits (:class:`~agent_tune.envs.time_limits.TimeLimits`). An adapter with range rules of its own
subclasses it (agent_r1's ``env_kwargs`` and ``batch_window``), so each of its values is checked in one place,
whether the constructor or ``check_kwargs`` asks, and a bad one is an ``OptionError`` naming its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import model_validator

from agent_tune.envs.time_limits import TimeLimits
from agent_tune.utils.typed_config import OptionError


class AdapterOptions(TimeLimits):
    """``max_steps`` (``None``, or >= 1: the tier's step limit), ``stop`` (non-empty strings ending a generation:
    ``SamplerHints.stop``), ``call_timeout`` and ``start_timeout`` (seconds > 0)."""

    max_steps: int | None = None
    stop: list[str] = []

    @model_validator(mode="after")
    def _steps_and_stop(self) -> AdapterOptions:
        if self.max_steps is not None and self.max_steps < 1:
            raise OptionError("max_steps", f"must be >= 1, got {self.max_steps}")
        if not all(self.stop):
            raise OptionError("stop", f"must be a list of non-empty strings, got {self.stop!r}")
        return self

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Any:
        """The model of the entries of ``options`` (a constructor's arguments, or ``check_kwargs``' kwargs) that are
        its fields; ``stop`` as a list when it is a sequence other than a string (a tuple default, a config's
        list), so a single string is refused, not split."""
        given = {k: v for k, v in options.items() if k in cls.model_fields}
        stop = given.get("stop")
        if isinstance(stop, Sequence) and not isinstance(stop, (str, bytes)):
            given["stop"] = list(stop)
        return cls(**given)


__all__ = ["AdapterOptions"]
