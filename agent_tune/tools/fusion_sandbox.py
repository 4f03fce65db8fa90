"""The ``sandbox_fusion`` backend: a client of a SandboxFusion server (``POST {url}/run_code``).

For users who already run a SandboxFusion service. The request is the documented JSON
(``code``, ``language``, ``run_timeout``, ``compile_timeout``, ``memory_limit_MB``, ``stdin``, ``files``,
``fetch_files``); the reply's ``status`` (``Success`` / ``Failed`` / ``SandboxError``) and
``run_result`` (``status``, ``return_code``, ``stdout``, ``stderr``) map onto :class:`ExecutionResult`.
Output truncation is applied client side with the same ``max_output_bytes`` rule as the local backend.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits, ExecutionResult, SandboxUnavailableError
from agent_tune.utils.typed_config import ConfigModel


class SandboxFusionConfig(ConfigModel):
    """Where the SandboxFusion server is and how to talk to it (``sandbox.sandbox_fusion``).

    ``request_timeout_margin_s`` is added to the run's wall-clock limit for the HTTP timeout;
    ``max_retries`` retries transport errors and ``SandboxError`` replies (not program failures);
    ``check_on_start`` runs one trivial program at construction so a wrong URL fails early.
    """

    url: str = "http://localhost:8080"
    language: str = "python"
    request_timeout_margin_s: float = 10.0
    max_retries: int = 2
    check_on_start: bool = True


class SandboxFusionSandbox(CodeSandbox):
    """A :class:`CodeSandbox` that sends each program to a SandboxFusion server."""

    def __init__(
        self,
        config: SandboxFusionConfig | None = None,
        limits: ExecutionLimits | None = None,
        max_concurrency: int = 4,
    ) -> None:
        super().__init__(limits=limits, max_concurrency=max_concurrency)
        self.config = config or SandboxFusionConfig()
        if not self.config.url.startswith(("http://", "https://")):
            raise ValueError(f"SandboxFusion url must start with http:// or https://, got {self.config.url!r}")
        self.endpoint = self.config.url.rstrip("/") + "/run_code"
        if self.config.check_on_start:
            probe = self._execute("print(6 * 7)", ExecutionLimits(wall_seconds=30))
            if probe.stdout.strip() != "42":
                raise SandboxUnavailableError(
                    f"SandboxFusion server at {self.endpoint} failed the start-up check: "
                    f"{probe.error or probe.stderr.strip() or 'unexpected output ' + repr(probe.stdout)}"
                )

    def _request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        req = urllib.request.Request(self.endpoint, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def _execute(self, code: str, limits: ExecutionLimits) -> ExecutionResult:
        started = time.monotonic()
        payload = {
            "code": code,
            "language": self.config.language,
            "run_timeout": float(limits.wall_seconds),
            "compile_timeout": float(limits.wall_seconds),
            "memory_limit_MB": int(limits.memory_mb),
            "stdin": "",
            "files": {},
            "fetch_files": [],
        }
        timeout = float(limits.wall_seconds) + self.config.request_timeout_margin_s
        last_error = ""
        for _ in range(self.config.max_retries + 1):
            try:
                reply = self._request(payload, timeout)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if reply.get("status") == "SandboxError":
                last_error = f"SandboxError: {reply.get('message', '')}"
                continue
            return _to_result(reply, limits, time.monotonic() - started)
        return ExecutionResult(
            "", "", None, error=f"sandbox error: SandboxFusion request failed: {last_error}",
            duration_s=time.monotonic() - started,
        )


def _cap(text: str | None, cap: int) -> tuple[str, bool]:
    raw = (text or "").encode("utf-8", errors="replace")
    if len(raw) <= cap:
        return text or "", False
    return raw[:cap].decode("utf-8", errors="replace"), True


def _to_result(reply: dict[str, Any], limits: ExecutionLimits, duration: float) -> ExecutionResult:
    """Map a SandboxFusion ``/run_code`` reply onto an :class:`ExecutionResult`."""
    run = reply.get("run_result") or {}
    compile_ = reply.get("compile_result") or {}
    stage = run or compile_
    cap = int(limits.max_output_bytes)
    stdout, t1 = _cap(stage.get("stdout"), cap)
    stderr, t2 = _cap(stage.get("stderr"), cap)
    status = stage.get("status")
    timed_out = status == "TimeLimitExceeded"
    exit_code = stage.get("return_code")
    error = None
    if timed_out:
        exit_code = None
        error = f"TimeoutError: the program exceeded the time limit of {limits.wall_seconds:g} s and was killed"
    elif not stage:
        error = (
            f"sandbox error: reply without a run result "
            f"(status {reply.get('status')!r}: {reply.get('message', '')})"
        )
    elif status not in ("Finished", None) and exit_code in (None, 0):
        error = f"sandbox reported run status {status!r}"
    truncated = t1 or t2
    if truncated and error is None:
        error = f"OutputLimitExceeded: the program wrote more than {cap} bytes"
    return ExecutionResult(stdout, stderr, exit_code, timed_out, truncated, error, duration)
