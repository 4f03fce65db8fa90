"""Tools the environments call: the code sandbox (one interface, ``local`` and ``sandbox_fusion`` backends)."""

from agent_tune.tools.config import SandboxConfig, close_shared_sandboxes, make_sandbox, shared_sandbox
from agent_tune.tools.fusion_sandbox import SandboxFusionConfig, SandboxFusionSandbox
from agent_tune.tools.local_sandbox import LocalSandbox, LocalSandboxConfig
from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits, ExecutionResult, SandboxUnavailableError

__all__ = [
    "CodeSandbox",
    "ExecutionLimits",
    "ExecutionResult",
    "LocalSandbox",
    "LocalSandboxConfig",
    "SandboxConfig",
    "SandboxFusionConfig",
    "SandboxFusionSandbox",
    "SandboxUnavailableError",
    "close_shared_sandboxes",
    "make_sandbox",
    "shared_sandbox",
]
