"""Choosing and building a code sandbox from configuration."""

from __future__ import annotations

import threading
from typing import Any, Literal, Mapping

from pydantic import Field, field_validator, model_validator

from agent_tune.tools.fusion_sandbox import SandboxFusionConfig, SandboxFusionSandbox
from agent_tune.tools.local_sandbox import LocalSandbox, LocalSandboxConfig
from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits
from agent_tune.utils.typed_config import ConfigModel, OptionError

Backend = Literal["local", "sandbox_fusion"]
CONFIG_KEY = "sandbox"  # the retool env's option


class SandboxConfig(ConfigModel):
    """Which backend runs programs, with what limits and how many at once (the retool env's ``sandbox``).

    ``local`` (default) needs no server: bubblewrap on this machine. ``sandbox_fusion`` talks to a
    SandboxFusion server at ``sandbox_fusion.url``. A section given as ``null`` is its defaults. Read it with
    ``SandboxConfig.parse(raw, "sandbox")``; frozen and hashable: one shared sandbox per config.
    """

    unknown_key_problem = "unknown sandbox config keys: {key} (known: {known})"

    backend: Backend = "local"
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)
    max_concurrency: int = 4
    local: LocalSandboxConfig = Field(default_factory=LocalSandboxConfig)
    sandbox_fusion: SandboxFusionConfig = Field(default_factory=SandboxFusionConfig)

    @field_validator("limits", "local", "sandbox_fusion", mode="before")
    @classmethod
    def _null_section(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _in_range(self) -> SandboxConfig:
        if self.max_concurrency < 1:
            raise OptionError("max_concurrency", f"must be >= 1, got {self.max_concurrency!r}")
        return self


def make_sandbox(config: SandboxConfig | Mapping[str, Any] | None = None) -> CodeSandbox:
    """Build the configured sandbox; raises ``SandboxUnavailableError`` if it cannot run here, an
    :class:`~agent_tune.utils.typed_config.OptionError` naming ``sandbox.<key>`` for a bad option."""
    cfg = SandboxConfig.parse(config, CONFIG_KEY)
    if cfg.backend == "local":
        return LocalSandbox(cfg.local, limits=cfg.limits, max_concurrency=cfg.max_concurrency)
    return SandboxFusionSandbox(cfg.sandbox_fusion, limits=cfg.limits, max_concurrency=cfg.max_concurrency)


_shared: dict[SandboxConfig, CodeSandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(config: SandboxConfig | Mapping[str, Any] | None = None) -> CodeSandbox:
    """The process-wide sandbox for ``config``, built (and start-up checked) on first use.

    Environments are one per episode; they share one sandbox, whose ``max_concurrency`` slots then bound
    the programs running at once across all episodes of this process, whether an episode steps
    synchronously (``run`` in its own thread) or asynchronously (``arun`` through the pool).
    """
    cfg = SandboxConfig.parse(config, CONFIG_KEY)
    with _shared_lock:
        box = _shared.get(cfg)
        if box is None or box._closed:
            box = make_sandbox(cfg)
            _shared[cfg] = box
        return box


def close_shared_sandboxes() -> None:
    """Close every sandbox made by :func:`shared_sandbox` (tests, shutdown)."""
    with _shared_lock:
        boxes = list(_shared.values())
        _shared.clear()
    for box in boxes:
        box.close()
