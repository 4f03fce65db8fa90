"""A NeMo Gym resource server as a tool environment ("nemo_gym", :class:`NemoGymEnv`), played over its HTTP protocol
as NeMo Gym's ``simple_agent`` plays it: ``/seed_session``, a ``POST /<tool>`` per decoded call (the ``CallToolEnv``
tier), ``/verify``. Spec: docs/envs.md, "A NeMo Gym resource server".
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Awaitable, Mapping

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import CallToolEnv, Observation, Outcome, SamplerHints, Step, StopReason, ToolResult
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.nemo_gym.protocol import PARAMS, ResponseLog, prompt_messages, row_fields, tool_schemas
from agent_tune.envs.registry import register_env
from agent_tune.envs.remote_tools import input_schemas
from agent_tune.envs.tasks import task_fields
from agent_tune.envs.time_limits import (
    CALL_SLACK,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    backstop,
    timeout_text,
)
from agent_tune.errors import BackendGoneError, error_text
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.sync import bounded, submit, wait
from agent_tune.utils.jsonl import json_safe, jsonl_lines


def nemo_gym_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of NeMo Gym JSONL datasets (one file per split, or one file for every split) as tasks."""
    if isinstance(path, Mapping):
        if split not in path:
            raise ValueError(f"nemo_gym env: no file for split {split!r} in path (its splits: {', '.join(path)})")
        path = path[split]
    file = Path(path)
    tasks = []
    for number, row in jsonl_lines(file.read_text(encoding="utf-8"), str(file)):
        try:
            row_fields(row)
        except ValueError as exc:
            raise ValueError(f"nemo_gym env: {file} line {number}: {exc}") from None
        tasks.append(Task(id=f"{file.stem}:{number}", kwargs=row, category=file.stem))
    return tasks


def nemo_gym_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A training row's prompt: the dataset row's messages, as ``reset`` shows them (no server needed)."""
    return prompt_messages(row_fields(task.kwargs)[PARAMS])


@register_env("nemo_gym")
class NemoGymEnv(CallToolEnv):
    """A NeMo Gym resource server, played over its HTTP protocol."""

    description = "NeMo Gym resource server (HTTP): seed_session, its tool endpoints, verify's reward"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset waits on the server's /seed_session
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=nemo_gym_tasks, row_prompt=nemo_gym_row_prompt)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Check the options, then that a server answers ``GET /`` at ``base_url`` within ``start_timeout``."""
        super().check_kwargs(kwargs)
        env = cls(**kwargs)
        import httpx

        try:
            httpx.get(f"{env.base_url}/", timeout=env.start_timeout)
        except httpx.HTTPError as exc:
            raise ValueError(f"nemo_gym env: no NeMo Gym server answers at {env.base_url} "
                             f"({error_text(exc)})") from None

    def __init__(
        self,
        base_url: str,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps: int = 8,
        success_reward: float = 1.0,
        model: str = "agent-tune-policy",
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"nemo_gym env: base_url must be an http(s):// URL, got {base_url!r}")
        limits = AdapterOptions.of(dict(max_steps=max_steps, call_timeout=call_timeout, start_timeout=start_timeout))
        self.base_url = base_url.rstrip("/")
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = limits.max_steps
        self.success_reward = float(success_reward)
        self.model = model
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self._client: Any = None
        self.row: dict[str, Any] = {}
        self.log = ResponseLog()
        self.reward: float | None = None
        self.verify_fields: dict[str, Any] = {}

    async def _post(self, path: str, body: Any, timeout: float) -> Any:
        """``POST path`` on this episode's client (its cookie jar is the session), bounded by ``timeout``."""
        import httpx

        if self._client is None:
            raise BackendGoneError(self.status.error or "no session")
        what = f"nemo_gym POST {path}"
        try:  # httpx's timeout bounds each phase; bounded() the request as a whole
            return await bounded(self._client.post(path, json=body, timeout=timeout), timeout, what)
        except httpx.TimeoutException:
            raise EnvTimeoutError(timeout, what) from None
        except httpx.HTTPError as exc:
            raise BackendGoneError(f"POST {path} failed: {error_text(exc)}") from None

    async def _seed(self, row: dict[str, Any]) -> None:
        import httpx

        await self._drop()
        self._client = httpx.AsyncClient(base_url=self.base_url)
        answer = await self._post("/seed_session", row, self.start_timeout)
        if answer.status_code >= 400:
            raise BackendGoneError(f"/seed_session answered HTTP {answer.status_code}: {answer.text[:500]}")

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(BaseException):
                await client.aclose()

    def reset(self, row: str | Mapping[str, Any] | None = None, **fields: Any) -> Observation:
        """``/seed_session`` with a NeMo Gym dataset row's fields (``row``: the deprecated form)."""
        data = task_fields("nemo_gym env", row, fields)
        params = row_fields(data)[PARAMS]
        messages, tools = prompt_messages(params), tool_schemas(params)
        try:
            wait(self._seed(data), backstop(self.start_timeout))
        except EnvTimeoutError:  # the time-limit rule: the runner counts the episode as not played
            submit(self._drop())
            raise StartTimeoutError(self.start_timeout, "nemo_gym POST /seed_session") from None
        except Exception as exc:  # noqa: BLE001 - httpx's errors, a refusal
            submit(self._drop())
            raise BackendGoneError(f"nemo_gym env: the server at {self.base_url} did not start an episode: "
                                     f"{exc if isinstance(exc, BackendGoneError) else error_text(exc)}") from None
        self.row, self.tools, self.call_schemas = data, tools, input_schemas(tools)
        self.log, self.reward, self.verify_fields = ResponseLog(), None, {}
        super().reset()
        return Observation(messages=messages, tools=tools)

    async def call_tool(self, call: ToolCall) -> ToolResult:
        """``POST /<tool>``: the body is the tool message (422 a format error, another 4xx / 5xx a tool error)."""
        answer = await self._post(f"/{call.name}", dict(call.arguments), self.call_timeout)
        rejected = answer.status_code == 422
        self.status.tool_errors += answer.status_code >= 400 and not rejected
        if not rejected:
            self.log.call(call, answer.text)
        return ToolResult(answer.text, call.name, error=rejected)

    def act(self, step: Step) -> Awaitable[None] | None:
        """The policy's text goes in the episode's ``response`` log, then the tier's step."""
        self.log.message(step.parsed.content)
        return super().act(step)

    async def _verify(self) -> dict[str, Any]:
        body = {**self.row, "response": self.log.response(self.row[PARAMS], self.model)}
        answer = await self._post("/verify", body, self.call_timeout)
        if answer.status_code >= 400:
            raise BackendGoneError(f"/verify answered HTTP {answer.status_code}: {answer.text[:500]}")
        data = answer.json()
        if not isinstance(data, Mapping) or not isinstance(data.get("reward"), (int, float)):
            raise BackendGoneError(f"/verify answered no numeric reward: {answer.text[:500]}")
        return dict(data)

    def outcome(self) -> Outcome:
        """``/verify``'s reward (none after a server failure)."""
        if self.status.error is None:
            try:
                verdict = wait(self._verify(), backstop(self.call_timeout))
                self.reward = float(verdict["reward"])
                self.verify_fields = {k: v for k, v in verdict.items()
                                      if k not in self.row and k not in ("response", "reward")}
            except EnvTimeoutError:  # the time-limit rule: scoring is a call too (its bound, or the backstop's)
                self.status.fail(StopReason.TIMEOUT, timeout_text(self.call_timeout, "nemo_gym POST /verify"))
            except Exception as exc:  # noqa: BLE001 - BackendGoneError, a body that is not JSON
                why = exc if isinstance(exc, BackendGoneError) else error_text(exc)
                self.status.fail(StopReason.SERVER_ERROR, f"verify failed: {why}")
        self.close()  # the session ends with the episode
        extras: dict[str, Any] = {"nemo_gym_reward": self.reward}
        if self.verify_fields:
            extras["nemo_gym_verify"] = json_safe(self.verify_fields)
        reward = self.reward or 0.0
        solved = self.status.error is None and reward >= self.success_reward
        return Outcome(reward, float(solved), None, extras)

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(BaseException):
                wait(self._drop(), CALL_SLACK)


__all__ = ["NemoGymEnv", "nemo_gym_tasks"]
