"""A NeMo Gym resource server as a tool environment ("nemo_gym", :class:`NemoGymEnv`).

    make_env("nemo_gym", base_url="http://127.0.0.1:8000")
    env.reset(row={"responses_create_params": {"input": [...], "tools": [...]}, "expected_count": 6, ...})

`NeMo Gym <https://github.com/NVIDIA-NeMo/Gym>`_ serves each environment as a *resource server* (a FastAPI app built
on ``nemo_gym.base_resources_server.SimpleResourcesServer``) that NeMo RL, verl and TRL reach over HTTP. This env
plays one episode against such a server the way NeMo Gym's own ``simple_agent`` does, with agent-tune's runner in
place of its model server (token in, token out):

* ``reset(row=...)``: ``POST /seed_session`` with the whole dataset row; the row's ``responses_create_params`` give
  the prompt (``instructions``, ``input``) and the tools (Responses-API function tools, shown as OpenAI schemas);
* each decoded call: ``POST /<tool name>`` with its arguments as the JSON body; the response body (whatever its
  status, as ``simple_agent`` passes it on) is the ``tool`` message;
* the answer (a generation without a call block) ends the episode; so do ``max_steps`` and the runner's limits;
* at the end: ``POST /verify`` with the row and the episode as a Responses-API ``response`` object (the policy's
  text as ``message`` items, each call run as ``function_call`` + ``function_call_output``); its ``reward`` is
  the episode's reward, accuracy 1 iff it reaches ``success_reward``.

One episode is one session: an HTTP client per episode keeps the server's session cookie (NeMo Gym's
``SessionMiddleware``), so concurrent episodes never share state.

Bad input, each a counted outcome, never a hung rollout:

* a call of a tool the row does not list, or whose arguments its schema rejects, is refused before the server (a
  format error); arguments the server's request model rejects (HTTP 422) are a format error too;
* a tool that fails on a well-formed call (another 4xx or 5xx) is its body's text, counted in ``tool_errors``;
* a server that drops the connection ends the episode with stop reason ``server_error`` and ``error`` naming why
  (no ``/verify``: reward 0); ``/verify`` failing (an HTTP error, no numeric reward) is the same;
* the time-limit rule (:mod:`agent_tune.envs.time_limits`): a tool call or ``/verify`` with no answer within
  ``call_timeout`` ends the episode with stop reason ``timeout`` and ``error`` ``no answer in N s (nemo_gym POST
  /<path>)`` (reward 0: the session is dropped, nothing is verified); a ``/seed_session`` with no answer within
  ``start_timeout`` raises ``StartTimeoutError`` from ``reset``, which the runner counts as an episode not played;
* a server that is not there fails ``check_kwargs`` (the start-up check of ``agent-tune train`` and ``eval``)
  naming the URL, and ``reset`` raises :class:`~agent_tune.errors.BackendGoneError` (so does a ``/seed_session``
  the server refuses).

Not carried over: NeMo Gym's agent servers (``responses_api_agents``: agent-tune's runner is the agent) and model
servers, ``ng_run``'s config composition and server start-up (serve the resource server yourself, give its URL),
Gym-owned MCP tools (``MCPResourcesServer`` tools reached through ``/mcp``; its plain HTTP tool endpoints work),
non-text input items (images, files, earlier function calls in the prompt) and ``/aggregate_metrics``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Mapping

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, SamplerHints, Step, StopReason, ToolResult
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.nemo_gym.protocol import PARAMS, ResponseLog, prompt_messages, row_fields, tool_schemas
from agent_tune.envs.registry import register_env
from agent_tune.envs.remote_tools import check_limits, refusal
from agent_tune.envs.tasks import task_fields
from agent_tune.envs.time_limits import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    TimeLimits,
    bounded,
    step_time_limit,
    timeout_text,
)
from agent_tune.errors import BackendGoneError, error_text
from agent_tune.parsing.response import ResponseParser
from agent_tune.sync import on_background_loop, submit, wait
from agent_tune.utils.jsonl import json_safe, jsonl_lines

# Extra seconds the waits on the background loop allow beyond each request's own bound (a backstop).
_SLACK = 5.0


def nemo_gym_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of NeMo Gym JSONL datasets as tasks: ``path`` is one file per split (``{"train": "train.jsonl",
    "test": "validation.jsonl"}``) or one file, every row of which is in the split asked for. A task's id is
    ``<file stem>:<line>``; ``reset`` receives the row's fields."""
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
class NemoGymEnv(BaseToolEnv):
    """A NeMo Gym resource server, played over its HTTP protocol; see the module docstring."""

    description = "NeMo Gym resource server (HTTP): seed_session, its tool endpoints, verify's reward"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset waits on the server's /seed_session
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=nemo_gym_tasks, row_prompt=nemo_gym_row_prompt)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Check the options, then that a server answers at ``base_url`` (any HTTP answer to ``GET /``, NeMo Gym's
        liveness route), within ``start_timeout``; else a ``ValueError`` naming the URL."""
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
        check_limits(int(max_steps))
        limits = TimeLimits(call_timeout=call_timeout, start_timeout=start_timeout)
        self.base_url = base_url.rstrip("/")
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = int(max_steps)
        self.success_reward = float(success_reward)
        self.model = model
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self._client: Any = None
        self._schemas: dict[str, Any] = {}
        self.row: dict[str, Any] = {}
        self.log = ResponseLog()
        self.reward: float | None = None
        self.verify_fields: dict[str, Any] = {}

    # ------------------------------------------------------------------ HTTP, on the background loop
    async def _post(self, path: str, body: Any, timeout: float) -> Any:
        """``POST path`` on this episode's client (its cookie jar is the session), the whole request bounded by
        ``timeout`` seconds: :class:`EnvTimeoutError` (``no answer in N s (nemo_gym POST path)``) when it runs
        out, :class:`BackendGoneError` when the connection fails."""
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
        """Close the session's client."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(BaseException):
                await client.aclose()

    # ------------------------------------------------------------------ the episode
    def reset(self, row: str | Mapping[str, Any] | None = None, **fields: Any) -> Observation:
        """Start an episode on a NeMo Gym dataset row's fields (``row``: the deprecated form,
        :func:`~agent_tune.envs.tasks.task_fields`): ``/seed_session``, then the row's prompt and tools."""
        data = task_fields("nemo_gym env", row, fields)
        params = row_fields(data)[PARAMS]
        messages, tools = prompt_messages(params), tool_schemas(params)
        try:
            wait(self._seed(data), self.start_timeout + _SLACK)
        except EnvTimeoutError:  # the time-limit rule: the runner counts the episode as not played
            submit(self._drop())
            raise StartTimeoutError(self.start_timeout, "nemo_gym POST /seed_session") from None
        except Exception as exc:  # noqa: BLE001 - httpx's errors, a refusal
            submit(self._drop())
            raise BackendGoneError(f"nemo_gym env: the server at {self.base_url} did not start an episode: "
                                     f"{exc if isinstance(exc, BackendGoneError) else error_text(exc)}") from None
        self.row, self.tools = data, tools
        self._schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools or []}
        self.log, self.reward, self.verify_fields = ResponseLog(), None, {}
        super().reset()
        return Observation(messages=messages, tools=tools)

    async def _run_calls(self, step: Step) -> None:
        for call in step.parsed.calls:
            refused = refusal(call, self._schemas)
            if refused is not None:
                step.results.append(ToolResult(refused, call.name, error=True))
                step.format_errors += 1
                continue
            try:
                answer = await self._post(f"/{call.name}", dict(call.arguments), self.call_timeout)
            except (BackendGoneError, EnvTimeoutError) as exc:
                await self._drop()
                step.fail(StopReason.of(exc), str(exc),
                          ToolResult(f"Error: the environment server stopped ({exc})", call.name))
                return
            text = answer.text
            rejected = answer.status_code == 422  # the tool's request model refused the arguments
            step.results.append(ToolResult(text, call.name, error=rejected))
            step.format_errors += rejected
            self.status.tool_errors += answer.status_code >= 400 and not rejected
            if not rejected:
                self.log.call(call, text)
        step.answer_undecodable()

    async def act(self, step: Step) -> None:
        """An answer ends the episode; else each decoded call is one ``POST /<tool>`` on the background loop (where
        the session's client lives), each bounded by ``call_timeout``."""
        self.log.message(step.parsed.content)
        if step.answer:
            step.end_turn()
            return
        timeout = step_time_limit(self.call_timeout, len(step.parsed.calls))
        try:
            await on_background_loop(self._run_calls(step), timeout)
        except Exception as exc:  # noqa: BLE001 - a backstop (each request has its own bound), or an adapter bug
            timed_out = isinstance(exc, EnvTimeoutError)
            submit(self._drop())
            if not step.done:
                step.fail(StopReason.TIMEOUT if timed_out else StopReason.SERVER_ERROR,
                          timeout_text(timeout, "nemo_gym step") if timed_out else f"adapter error: {error_text(exc)}")

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
        """``/verify``'s reward (none after a server failure); its own keys beside the request's in
        ``nemo_gym_verify``."""
        if self.status.error is None:
            try:
                verdict = wait(self._verify(), self.call_timeout + _SLACK)
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
                wait(self._drop(), _SLACK)


__all__ = ["NemoGymEnv", "nemo_gym_tasks"]
