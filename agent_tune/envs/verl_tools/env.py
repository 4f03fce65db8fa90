"""verl's own tools as an environment ("verl_tools", :class:`VerlToolsEnv`): loaded by verl (:mod:`.loader`), each
decoded call run as verl's ``ToolAgentLoop`` runs it (:mod:`.calls`) through the ``CallToolEnv`` tier; the reward
from their ``calc_reward`` or a reward function (:mod:`.reward`). Spec: docs/envs.md, "verl's tools".
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any, Literal, Mapping, Sequence

from pydantic import model_validator

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import CallToolEnv, Observation, Outcome, SamplerHints, Step, StopReason, ToolResult
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.remote_tools import input_schemas
from agent_tune.envs.tasks import chat_prompt, mapping_of, task_fields
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, EnvTimeoutError, StartTimeoutError
from agent_tune.envs.verl_tools.calls import CallResult, Failed, call_tool, guarded
from agent_tune.envs.verl_tools.loader import LoadedTools, load_tools
from agent_tune.envs.verl_tools.reward import load_reward, reward_arguments
from agent_tune.envs.verl_tools.rows import verl_row_prompt, verl_rows_tasks
from agent_tune.errors import error_text
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.rewards.verdict import verdict
from agent_tune.sync import bounded, call_in_thread, wait
from agent_tune.utils.typed_config import OptionError

Lifecycle = Literal["episode", "call"]
TruncateSide = Literal["left", "right", "middle"]
WHO = "verl_tools env"


class VerlToolsOptions(AdapterOptions):
    """The verl_tools env's option values (see :class:`AdapterOptions`), with verl's lifecycle and call limits."""

    lifecycle: Lifecycle = "episode"
    tool_response_truncate_side: TruncateSide = "middle"
    max_parallel_calls: int = 1
    max_tool_response_length: int = 256

    @model_validator(mode="after")
    def _counts(self) -> VerlToolsOptions:
        for key in ("max_parallel_calls", "max_tool_response_length"):
            if getattr(self, key) < 1:
                raise OptionError(key, f"must be >= 1, got {getattr(self, key)}")
        return self


@register_env("verl_tools")
class VerlToolsEnv(CallToolEnv):
    """verl's ``BaseTool`` s and function tools, run as verl runs them; the reward: ``calc_reward`` or a function."""

    description = "verl's tools (a tool-config YAML of BaseTools, @function_tool files); reward: calc_reward or a fn"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset creates the episode's tool instances (bounded)
    # a verl recipe's own dataset files (.parquet / .jsonl rows): agent-tune data --env verl_tools --options '{"path"}'
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=verl_rows_tasks, row_prompt=verl_row_prompt)
    _check_builds = True  # check_kwargs builds the env: verl loads the tools, the reward function imports

    def __init__(
        self,
        tool_config: str | None = None,
        function_tools: str | Sequence[str] | None = None,
        reward: str | None = None,
        lifecycle: Lifecycle = "episode",
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps: int | None = None,
        max_parallel_calls: int = 1,
        max_tool_response_length: int = 256,
        tool_response_truncate_side: TruncateSide = "middle",
        validate_arguments: bool = True,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.limits = VerlToolsOptions.of(dict(
            max_steps=max_steps, lifecycle=lifecycle, tool_response_truncate_side=tool_response_truncate_side,
            max_parallel_calls=max_parallel_calls, max_tool_response_length=max_tool_response_length,
            call_timeout=call_timeout, start_timeout=start_timeout))
        self.call_timeout, self.start_timeout = self.limits.call_timeout, self.limits.start_timeout
        self.loaded: LoadedTools = load_tools(tool_config, function_tools)
        self.reward_fn = load_reward(reward) if reward else None
        has_base_tools = any(not self.loaded.is_function_tool(n) for n in self.loaded.tools)
        if self.reward_fn is None and not (lifecycle == "episode" and has_base_tools):
            raise OptionError("reward", "no tool's calc_reward can reward the episode (function tools only, or "
                              "lifecycle='call', where verl never calls it): give a reward function, "
                              "reward='pkg.mod:fn'")
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = self.limits.max_steps
        self.validate_arguments = bool(validate_arguments)
        self.instances: dict[str, str] = {}  # BaseTool name -> this episode's instance id (lifecycle "episode")
        self.transcript: list[dict[str, Any]] = []
        self.task: dict[str, Any] = {}

    def reset(self, prompt: list[dict[str, Any]] | str | None = None, row: str | Mapping[str, Any] | None = None,
              tools_kwargs: Mapping[str, Any] | str | None = None, tool_selection: Sequence[str] | None = None,
              ground_truth: Any = None, data_source: str | None = None,
              extra_info: Mapping[str, Any] | None = None, reward_model: Mapping[str, Any] | None = None,
              ) -> Observation:
        """Start an episode on a verl dataset row's fields (``tools_kwargs`` / ``tool_selection`` /
        ``ground_truth`` over the row's ``extra_info`` and ``reward_model``); ``row`` is the deprecated form."""
        self.close()
        given = {"prompt": prompt, "data_source": data_source, "extra_info": extra_info, "reward_model": reward_model}
        fields = task_fields(WHO, row, {k: v for k, v in given.items() if v is not None})
        info = mapping_of(fields.get("extra_info"), WHO, "extra_info")
        if not fields.get("prompt"):
            raise TypeError("verl_tools env: reset() needs a prompt")
        messages = chat_prompt(fields["prompt"], WHO)
        if ground_truth is None:
            ground_truth = (fields.get("reward_model") or {}).get("ground_truth")
        kwargs = mapping_of(tools_kwargs if tools_kwargs is not None else info.get("tools_kwargs"), WHO, "tools_kwargs")
        selection = tool_selection if tool_selection is not None else info.get("tool_selection")
        names = list(self.loaded.tools)
        if selection:  # verl's per-row selection: the names it gives that are loaded, in its order
            names = [n for n in selection if n in self.loaded.tools]
        self.active = {n: self.loaded.tools[n] for n in names}
        self.tools = [self.loaded.schemas[n] for n in names] or None
        self.call_schemas = input_schemas(self.tools) if self.validate_arguments else None
        self.tools_kwargs = {n: mapping_of(v, WHO, f"tools_kwargs[{n!r}]") for n, v in kwargs.items()}
        self.task = {"ground_truth": ground_truth, "data_source": fields.get("data_source"), "extra_info": info}
        self.transcript = [dict(m) for m in messages]
        self.agent_data: Any = None  # verl's own AgentData for execute(..., agent_data=...); function tools get none
        if not all(self.loaded.is_function_tool(n) for n in self.active):
            from verl.experimental.agent_loop.tool_agent_loop import AgentData

            self.agent_data = AgentData(messages=self.transcript, image_data=None, video_data=None, audio_data=None,
                                        mm_processor_kwargs=None, metrics={}, request_id=uuid.uuid4().hex,
                                        tools_kwargs=self.tools_kwargs)
        self.tool_rewards, self.dropped_calls = [], 0
        self.instances = {}
        super().reset()
        if self.limits.lifecycle == "episode":
            self._create_instances()
        return Observation(messages=messages, tools=self.tools)

    def _create_instances(self) -> None:
        """``create`` of every BaseTool the episode shows, concurrently, within ``start_timeout``; one that raises
        is recorded, ending the episode at its first step."""
        base_tools = [n for n in self.active if not self.loaded.is_function_tool(n)]

        async def create(name: str) -> Failed | None:
            made = await guarded(self.active[name].create(
                create_kwargs=dict(self.tools_kwargs.get(name, {}).get("create_kwargs") or {})))
            if isinstance(made, Failed):
                return Failed(f"tool {name!r}: create failed ({made.error})")
            self.instances[name] = made[0]  # kept at once, so a later timeout still releases it
            return None

        async def create_all() -> list[Failed | None]:
            return list(await asyncio.gather(*(create(n) for n in base_tools)))

        try:
            failures = [f for f in wait(create_all(), self.start_timeout, "verl tools create") if f]
        except EnvTimeoutError as exc:  # the time-limit rule: the runner counts the episode as not played
            raise StartTimeoutError(exc.seconds, exc.what) from None
        if failures:
            self.status.fail(StopReason.ENV_ERROR, "; ".join(f.error for f in failures))

    def refuse(self, call: ToolCall) -> str | None:
        """verl's answer to a tool the episode does not show, else the tier's schema refusal (step reward 0)."""
        if call.name not in self.active:
            refused: str | None = f"Unknown function '{call.name}'. Available tools: {list(self.active)}"
        else:
            refused = super().refuse(call)
        if refused is not None:
            self.tool_rewards.append(0.0)
        return refused

    async def call_tool(self, call: ToolCall) -> ToolResult:
        """One call as verl makes it, within ``call_timeout``; its step reward goes in ``tool_rewards``."""
        result: CallResult = await bounded(call_tool(
            self.active[call.name], dict(call.arguments), instance_id=self.instances.get(call.name),
            create_kwargs=self.tools_kwargs.get(call.name, {}).get("create_kwargs") or {},
            agent_data=self.agent_data, limit=self.limits.max_tool_response_length,
            side=self.limits.tool_response_truncate_side,
        ), self.call_timeout, f"verl tool {call.name!r}")
        self.status.tool_errors += result.failed
        self.tool_rewards.append(result.reward)
        if result.media:
            self.status.fail(StopReason.ENV_ERROR, f"tool {call.name!r} returned {result.media} image(s)/video(s): "
                                                   "this env shows text only (verl needs a vision-language processor "
                                                   "for them)")
        return ToolResult(result.text, call.name)

    async def act(self, step: Step) -> None:
        """The tier's step on the first ``max_parallel_calls`` calls (verl ignores the others), in the transcript."""
        calls = step.parsed.calls
        if len(calls) > self.limits.max_parallel_calls:
            step.info["dropped_calls"] = len(calls) - self.limits.max_parallel_calls
            self.dropped_calls += step.info["dropped_calls"]
            step.parsed = replace(step.parsed, calls=calls[: self.limits.max_parallel_calls])
        message: dict[str, Any] = {"role": "assistant", "content": step.parsed.content}
        if not step.answer:
            message["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in step.parsed.calls]
        self.transcript.append(message)
        await super().act(step)
        self.transcript.extend({"role": "tool", "content": r.content} for r in step.results if r.name is not None)

    def outcome(self) -> Outcome:
        """The reward function's reward, else the sum of the tools' ``calc_reward`` s."""
        scores = self._end_instances()
        extras: dict[str, Any] = {"tool_rewards": list(self.tool_rewards), "tool_scores": dict(scores),
                                  "dropped_calls": self.dropped_calls}
        if self.reward_fn is None:
            total = float(sum(scores.values()))
            return Outcome(total, float(total >= 1.0), None, extras)
        # verl's reward functions read the last generation's text outside its calls
        answer = next((str(m.get("content") or "") for m in reversed(self.transcript) if m["role"] == "assistant"), "")
        given = {"messages": [dict(m) for m in self.transcript], "solution_str": answer,
                 **self.task, "tools_kwargs": dict(self.tools_kwargs), "tool_rewards": list(self.tool_rewards),
                 "tool_scores": dict(scores)}
        try:
            fn, kwargs = self.reward_fn, reward_arguments(self.reward_fn, given)
            what = "verl_tools reward function"
            if asyncio.iscoroutinefunction(fn):  # on the background loop, where the tools live
                value = wait(fn(**kwargs), self.call_timeout, what)
            else:
                value = call_in_thread(lambda: fn(**kwargs), timeout=self.call_timeout, what=what)
            reward, accuracy = verdict(value)
        except EnvTimeoutError as exc:  # the scoring is a call too: the time-limit rule's outcome
            self.status.fail(StopReason.TIMEOUT, str(exc))
            return Outcome(0.0, 0.0, None, extras)
        except Exception as exc:  # noqa: BLE001 - a reward function's failure is recorded, the episode scores 0
            extras["reward_error"] = error_text(exc)
            return Outcome(0.0, 0.0, None, extras)
        return Outcome(reward, accuracy, None, extras)

    def _end_instances(self, score: bool = True) -> dict[str, float]:
        """``calc_reward`` (when ``score`` and nothing failed) then ``release`` of each instance, each bounded."""
        instances, self.instances = dict(self.instances), {}
        # no score after a failure (a tool that timed out or failed to start)
        methods = ("calc_reward", "release") if score and self.status.error is None else ("release",)
        scores: dict[str, float] = {}
        for name, instance_id in instances.items():
            tool, kwargs = self.active[name], self.tools_kwargs.get(name, {})
            for method in methods:
                call = getattr(tool, method)(instance_id, **dict(kwargs.get(f"{method}_kwargs") or {}))
                try:
                    value = wait(guarded(call), self.call_timeout, f"verl tool {name!r} {method}")
                except EnvTimeoutError as exc:
                    self.status.fail(StopReason.TIMEOUT, str(exc))
                    continue
                if method == "calc_reward" and not isinstance(value, Failed):
                    try:
                        scores[name] = float(value)
                        continue
                    except (TypeError, ValueError):
                        value = Failed(f"calc_reward returned {value!r}, not a number")
                if isinstance(value, Failed):  # counted and named; the episode's ending stands
                    self.status.tool_errors += 1
                    self.status.fail(None, f"tool {name!r}: {method} failed ({value.error})")
        return scores

    def close(self) -> None:
        """An episode closed before it ended still releases its tools' instances."""
        if self.instances:
            self._end_instances(score=False)


__all__ = ["VerlToolsEnv"]
