"""The user's configuration (``user:`` in Hydra), checked at start-up; :mod:`agent_tune.users.factory` builds it."""

from __future__ import annotations

import inspect
from typing import Any, Literal, Mapping, get_args

from pydantic import Field, field_validator, model_validator

from agent_tune.users.endpoint import EndpointOptions
from agent_tune.utils.imports import import_object
from agent_tune.utils.typed_config import OptionError

UserKind = Literal["llm", "scripted"]  # or a "package.module:Class" path: a user class of your own
USER_KINDS: tuple[str, ...] = get_args(UserKind)


class UserConfig(EndpointOptions):
    """How to build the simulated user of an episode (the ``user`` block; :meth:`parse` it at ``user``).

    ``kind="llm"``: an OpenAI-compatible chat endpoint (:class:`~agent_tune.users.endpoint.EndpointOptions`:
    ``base_url`` and ``model`` required; ``temperature``: tau2's default for its user, 0.0), answering with at most
    ``max_tokens`` (``None``: the server's default). ``kind="scripted"``: replays ``turns``
    (:class:`~agent_tune.users.scripted.ScriptedUser`), for tests. ``kind="package.module:Class"``: a user class of
    your own (anything with ``async reply(messages, tools)``, :class:`~agent_tune.users.base.User`), built per
    episode with ``kwargs``; it sees every message it answers, so it can react to them. The class is imported and
    its ``kwargs`` checked when the config is built.
    """

    unknown_key_problem = "unknown keys: {key} (known: {known})"

    kind: str = "llm"  # a UserKind or a "package.module:Class" path
    max_tokens: int | None = None
    turns: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("turns", "kwargs", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any, info: Any) -> Any:
        return ([] if info.field_name == "turns" else {}) if value is None else value

    @model_validator(mode="after")
    def _usable(self) -> UserConfig:
        if ":" in self.kind:
            user_class(self.kind, self.kwargs)  # its ValueError names user.kind / user.kwargs
            return self
        if self.kind not in USER_KINDS:
            raise OptionError("kind", f"{self.kind!r} is not one of {', '.join(USER_KINDS)} nor a "
                                      "'package.module:Class' path")
        if self.kwargs:
            raise OptionError("", f"user.kwargs are for a user class given by path, not kind={self.kind}")
        if self.kind == "scripted":
            return self
        for key in ("base_url", "model"):
            if not getattr(self, key):
                raise OptionError(key, f"required for kind=llm (got {getattr(self, key)!r})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1 or null (got {self.max_tokens})")
        self.check_endpoint_options()
        return self


def user_class(path: str, kwargs: Mapping[str, Any]) -> type:
    """The user class at ``path`` (``package.module:Class``), checked: importable, with an ``async reply``, and
    ``kwargs`` its constructor's (``ValueError`` naming ``user.kind`` / ``user.kwargs``)."""
    try:
        cls = import_object(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"user.kind={path!r}: cannot import it ({type(exc).__name__}: {exc})") from None
    if not inspect.isclass(cls) or not inspect.iscoroutinefunction(getattr(cls, "reply", None)):
        raise ValueError(f"user.kind={path!r} is not a user class (one with `async def reply(messages, tools)`)")
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as exc:
        raise ValueError(f"user.kwargs for {path}: {exc}") from None
    return cls
