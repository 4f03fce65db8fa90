"""Choosing and building a code sandbox from configuration."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from agent_tune.tools.fusion_sandbox import SandboxFusionConfig, SandboxFusionSandbox
from agent_tune.tools.local_sandbox import LocalSandbox, LocalSandboxConfig
from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits

Backend = Literal["local", "sandbox_fusion"]


@dataclass(frozen=True)
class SandboxConfig:
    """Which backend runs programs, with what limits and how many at once.

    ``local`` (default) needs no server: bubblewrap on this machine. ``sandbox_fusion`` talks to a
    SandboxFusion server at ``sandbox_fusion.url``.
    """

    backend: Backend = "local"
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)
    max_concurrency: int = 4
    local: LocalSandboxConfig = field(default_factory=LocalSandboxConfig)
    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)

    def __post_init__(self) -> None:
        if self.backend not in ("local", "sandbox_fusion"):
            raise ValueError(f"sandbox backend must be 'local' or 'sandbox_fusion', got {self.backend!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | "SandboxConfig" | None) -> "SandboxConfig":
        """Build from a plain mapping (e.g. Hydra/OmegaConf converted to a dict); unknown keys raise."""
        if data is None:
            return cls()
        if isinstance(data, SandboxConfig):
            return data
        data = dict(data)
        known = {"backend", "limits", "max_concurrency", "local", "sandbox_fusion"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown sandbox config keys {sorted(unknown)}; known: {sorted(known)}")
        kwargs: dict[str, Any] = {k: data[k] for k in ("backend", "max_concurrency") if k in data}
        sections = (("limits", ExecutionLimits), ("local", LocalSandboxConfig), ("sandbox_fusion", SandboxFusionConfig))
        for key, typ in sections:
            if key in data and data[key] is not None:
                value = data[key]
                kwargs[key] = value if isinstance(value, typ) else typ(**dict(value))
        return cls(**kwargs)


def make_sandbox(config: SandboxConfig | Mapping[str, Any] | None = None) -> CodeSandbox:
    """Build the configured sandbox; raises ``SandboxUnavailableError`` if it cannot run here."""
    cfg = SandboxConfig.from_dict(config)
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
    cfg = SandboxConfig.from_dict(config)
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
