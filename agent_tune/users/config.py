"""The user's configuration (``user:`` in Hydra), checked at start-up; :mod:`agent_tune.users.factory` builds it."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from agent_tune.users.endpoint import check_endpoint_options
from agent_tune.utils.imports import import_object

USER_KINDS = ("llm", "scripted")  # or a "package.module:Class" path: a user class of your own


@dataclass(frozen=True)
class UserConfig:
    """How to build the simulated user of an episode.

    ``kind="llm"``: an OpenAI-compatible chat endpoint at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``)
    serving ``model``, sampled with ``temperature`` (tau2's default for its user: 0.0) and ``max_tokens``
    (``None``: the server's default); ``api_key_env`` names the environment variable holding the API key
    (``None``: no key is sent). A request waits ``timeout_s``; a failed or unusable answer is retried
    ``max_retries`` times, waiting ``backoff_s``, then twice as long each time, between tries.
    ``kind="scripted"``: replays ``turns`` (:class:`~agent_tune.users.scripted.ScriptedUser`), for tests.
    ``kind="package.module:Class"``: a user class of your own (anything with ``async reply(messages, tools)``,
    :class:`~agent_tune.users.base.User`), built per episode with ``kwargs``; it sees every message it answers,
    so it can react to them. The class is imported and its ``kwargs`` checked at start-up.
    """

    kind: str = "llm"
    base_url: str | None = None
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    turns: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any] | UserConfig | None) -> UserConfig:
        """Build and check a config from a mapping (a Hydra node); ``ValueError`` names the bad key."""
        if value is None:
            value = {}
        if isinstance(value, UserConfig):
            config = value
        else:
            if not isinstance(value, Mapping):
                raise ValueError(f"user: expected a mapping, got {type(value).__name__}")
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(f"user: unknown keys {unknown}; known: {', '.join(sorted(known))}")
            data = dict(value)
            if "turns" in data:
                data["turns"] = tuple(data["turns"] or ())
            if "kwargs" in data:
                data["kwargs"] = dict(data["kwargs"] or {})
            config = cls(**data)
        config.check()
        return config

    def check(self) -> None:
        """Raise ``ValueError`` naming the key (``user.<key>``) of the first invalid option."""
        if ":" in self.kind:
            user_class(self.kind, self.kwargs)
            return
        if self.kind not in USER_KINDS:
            raise ValueError(f"user.kind={self.kind!r} is not one of {', '.join(USER_KINDS)} nor a "
                             "'package.module:Class' path")
        if self.kwargs:
            raise ValueError(f"user.kwargs are for a user class given by path, not kind={self.kind}")
        if self.kind == "scripted":
            return
        for key in ("base_url", "model"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ValueError(f"user.{key} is required for kind=llm (got {getattr(self, key)!r})")
        if self.max_tokens is not None and int(self.max_tokens) < 1:
            raise ValueError(f"user.max_tokens must be >= 1 or null (got {self.max_tokens})")
        check_endpoint_options("user", self)

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
