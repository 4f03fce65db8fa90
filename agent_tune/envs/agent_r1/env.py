"""Any Agent-R1 tool env played through agent-tune's runner ("agent_r1", :class:`AgentR1Env`), each generation
handed unchanged to its ``extract_tool_calls`` / ``step`` (or ``batch_step``) / ``stop``; spec: docs/envs.md,
"Agent-R1 envs".
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Mapping, Sequence

from pydantic import model_validator

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.agent_r1.loading import Built, build, resolve_env_class, resolve_tools, shared_build, shared_key
from agent_tune.envs.agent_r1.tasks import ROW_FIELDS, agent_r1_tasks, row_prompt
from agent_tune.envs.base import Observation, Outcome, SamplerHints, Step, StopReason, WholeTextEnv
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.tasks import chat_prompt, task_fields
from agent_tune.envs.time_limits import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    timeout_text,
)
from agent_tune.errors import error_text
from agent_tune.sync import acall_in_thread, await_future, call_in_thread, start_in_thread, wait_future
from agent_tune.utils.imports import import_callable
from agent_tune.utils.jsonl import json_safe
from agent_tune.utils.rows import says_correct
from agent_tune.utils.typed_config import OptionError

# Keys of a score dict that say the answer is correct (true, or a number >= 1).
ACCURACY_KEYS = ("acc", "accuracy")


class AgentR1Options(AdapterOptions):
    """The agent_r1 env's option values (see :class:`AdapterOptions`), with the env's other constructor arguments
    (``env_kwargs``: a mapping without ``tools``, which has its own option) and the batching window (> 0 s)."""

    env_kwargs: Mapping[str, Any] = {}
    batch_window: float = 0.05

    @model_validator(mode="after")
    def _agent_r1(self) -> AgentR1Options:
        if "tools" in self.env_kwargs:
            raise OptionError("env_kwargs.tools", "give the env's tools with the `tools` option")
        if not self.batch_window > 0:
            raise OptionError("batch_window", f"must be > 0, got {self.batch_window}")
        return self


def _step_output(out: Any) -> tuple[str, list[bool], bool]:
    """``step``'s ``(tool_response, success, active)``, checked (``TypeError`` saying what came instead)."""
    if not (isinstance(out, (tuple, list)) and len(out) == 3):
        raise TypeError(f"step() returned {type(out).__name__} {out!r:.120}, not (tool_response, success, active)")
    response, success, active = out
    if not isinstance(response, str):
        raise TypeError(f"step() returned a tool_response of type {type(response).__name__}, not str")
    if not (isinstance(success, (list, tuple)) and all(isinstance(s, (bool, int)) for s in success)):
        raise TypeError(f"step() returned success {success!r:.120}, not a list of bools")
    if not isinstance(active, (bool, int)):
        raise TypeError(f"step() returned active {active!r:.120}, not a bool")
    return response, [bool(s) for s in success], bool(active)


def _call_name(call: Any, tools: Sequence[Any]) -> str:
    """What a decoded call is called in the step's record: its ``name`` (Nous), else the env's only tool's."""
    if isinstance(call, Mapping) and isinstance(call.get("name"), str):
        return call["name"]
    return tools[0].name if len(tools) == 1 else "call"


@register_env("agent_r1")
class AgentR1Env(WholeTextEnv):
    """An Agent-R1 ``BaseToolEnv`` and its tools: the env steps the raw text, its answer is appended as it is."""

    description: ClassVar[str] = ("any Agent-R1 tool env (module:Class) with its tools: raw-text steps "
                                  "(tool_response, success, active), a verl-style reward function")
    # the rows an Agent-R1 preprocessing script writes (verl's format), as they are
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=agent_r1_tasks, row_prompt=row_prompt)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """The options, then the env and its tools built once (within ``start_timeout``)."""
        super().check_kwargs(kwargs)
        env = cls(**kwargs)
        try:
            env._built()
        except StartTimeoutError:
            pass  # slow, not broken: the episodes' starts wait for the same build

    def __init__(
        self,
        env: str,
        tools: Sequence[Any] = (),
        env_kwargs: Mapping[str, Any] | None = None,
        stop: Sequence[str] = (),
        reward_fn: str | None = None,
        custom_system_prompt: bool = False,
        max_steps: int | None = None,
        batch_tool_calls: bool = False,
        batch_window: float = 0.05,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.env_class = resolve_env_class(env)
        self.env_path = env
        self.tool_specs = resolve_tools(tools)
        self.limits = AgentR1Options.of(dict(
            stop=stop, max_steps=max_steps, env_kwargs={} if env_kwargs is None else env_kwargs,
            batch_window=batch_window, call_timeout=call_timeout, start_timeout=start_timeout))
        self.batch_window = self.limits.batch_window if batch_tool_calls else None
        self.env_kwargs = dict(self.limits.env_kwargs)
        self.reward_fn = import_callable(reward_fn, "reward_fn") if reward_fn is not None else None
        self.custom_system_prompt = bool(custom_system_prompt)
        self.max_steps = self.limits.max_steps  # the tier's: the last one is stepped
        # reset may wait for the process's first build of the env and its tools: the runner calls it off its loop
        self.sampler_hints = SamplerHints(stop=tuple(self.limits.stop), include_stop_str_in_output=True,
                                          observation_kind="text", blocking_reset=True)
        self._key = shared_key(env, list(tools), self.env_kwargs)
        self.r1: Built | None = None
        self.task: dict[str, Any] = {}
        self.segments: list[str] = []

    def _built(self) -> Built:
        """The process's shared build of the env and its tools, waited for at most ``start_timeout``."""
        what = f"agent_r1 env {self.env_path} build"
        future = shared_build(self._key, lambda: start_in_thread(build, self.env_class, self.tool_specs,
                                                                 self.env_kwargs, what=what))
        try:
            return wait_future(future, self.limits.start_timeout, what, error=StartTimeoutError)
        except (StartTimeoutError, OptionError):
            raise
        except Exception as exc:
            raise ValueError(f"agent_r1 env {self.env_path}: the env or its tools could not be built "
                             f"({type(exc).__name__}: {exc})") from exc

    def _play(self, raw: str, stage: list[str]) -> tuple[Any, Any, Any]:
        """The env's three calls on one generation, as Agent-R1 makes them (``stage`` says which one is running)."""
        env = self.r1.env  # type: ignore[union-attr]
        stage[0] = "extract_tool_calls()"
        calls = env.extract_tool_calls(raw)
        stage[0] = "step()"
        out = env.step(raw)
        stage[0] = "stop()"
        return calls, out, env.stop(raw)

    async def _calls(self, raw: str, stage: list[str]) -> tuple[Any, Any, Any]:
        """:meth:`_play` (or, batching, ``batch_step``: :mod:`.batching`), each call within ``call_timeout``."""
        what, seconds = f"agent_r1 env {self.env_path}", self.limits.call_timeout
        if self.batch_window is None:
            return await acall_in_thread(self._play, raw, stage, timeout=seconds, what=what)
        assert self.r1 is not None
        env = self.r1.env
        calls = await acall_in_thread(env.extract_tool_calls, raw, timeout=seconds, what=what)
        stage[0] = "batch_step()"
        out = await await_future(self.r1.batcher(self.batch_window).submit(raw), seconds, what)
        stage[0] = "stop()"
        return calls, out, await acall_in_thread(env.stop, raw, timeout=seconds, what=what)

    def reset(self, prompt: Sequence[Mapping[str, Any]] | str | None = None,
              reward_model: Mapping[str, Any] | None = None, data_source: str | None = None,
              extra_info: Mapping[str, Any] | None = None, ground_truth: Any = None,
              row: str | Mapping[str, Any] | None = None) -> Observation:
        """Start an episode on an Agent-R1 dataset row's fields; ``row`` is the deprecated form."""
        given = {"prompt": prompt, "reward_model": reward_model, "data_source": data_source, "extra_info": extra_info}
        fields = task_fields("agent_r1 env", row, {k: v for k, v in given.items() if v is not None})
        fields = {k: fields[k] for k in ROW_FIELDS if k in fields}
        if fields.get("prompt") is None:
            raise TypeError("agent_r1 env: reset() needs a prompt")
        truth = ground_truth
        if truth is None and isinstance(fields.get("reward_model"), Mapping):
            truth = fields["reward_model"].get("ground_truth")
        messages = chat_prompt(fields["prompt"], "agent_r1 env")
        self.task = {"data_source": fields.get("data_source"), "ground_truth": truth,
                     "extra_info": fields.get("extra_info")}
        self.segments = []
        self.r1 = self._built()
        self.tools = None if self.custom_system_prompt else [dict(t) for t in self.r1.schemas] or None
        # use_custom_system_prompt: the env's system prompt after the system message, or as one
        system_prompt = self.r1.system_prompt if self.custom_system_prompt else ""
        if system_prompt and messages and messages[0]["role"] == "system":
            messages = [{**messages[0], "content": messages[0]["content"] + system_prompt}, *messages[1:]]
        elif system_prompt:
            messages = [{"role": "system", "content": system_prompt}, *messages]
        super().reset()
        return Observation(messages=messages, tools=self.tools)

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        """The env's ``tool_response``, appended as it is."""
        return Observation(text=results[0]) if results else Observation()

    async def act(self, step: Step) -> None:
        """The env's calls on the generation: its answer is the observation; ``active`` false or ``stop`` ends it."""
        self.segments.append(step.raw)
        stage = ["extract_tool_calls()"]
        try:
            calls, out, stopped = await self._calls(step.raw, stage)
            stage[0] = "step()" if self.batch_window is None else "batch_step()"  # what answered `out`
            response, success, active = _step_output(out)
            stopped = bool(stopped)
        except EnvTimeoutError as exc:  # the time-limit rule; the abandoned call's thread keeps only itself
            return step.fail(StopReason.TIMEOUT, timeout_text(exc.seconds, f"agent_r1 env {self.env_path} {stage[0]}"))
        except Exception as exc:  # noqa: BLE001 - the env failed on the policy's text: counted, never a crash
            step.format_errors += 1
            return step.fail(StopReason.ENV_ERROR,
                             f"agent_r1 env {self.env_path}: {stage[0]} failed ({error_text(exc)})")
        calls = list(calls) if isinstance(calls, (list, tuple)) else []
        undecodable = sum(c is None for c in calls)
        unread = not calls and any(step.raw.endswith(s) for s in self.sampler_hints.stop)
        step.format_errors += undecodable + unread
        tools = self.r1.tools  # type: ignore[union-attr]
        decoded = [c for c in calls if c is not None]
        step.info.update(calls=[_call_name(c, tools) for c in decoded[:len(success)]], tool_success=success,
                         active=active, stopped=stopped)
        self.status.num_calls += len(success)
        self.status.tool_errors += success.count(False)
        if not active or stopped:
            step.done = True
            self.status.turns_completed = 1
            return None
        step.results.append(response)
        self.segments.append(response)

    def outcome(self) -> Outcome:
        """The reward function on the response (docs/envs.md, "Agent-R1 envs"); an episode the env failed scores 0."""
        extras: dict[str, Any] = {"agent_r1_env": self.env_path, "tool_failures": self.status.tool_errors}
        if self.status.error is not None:
            return Outcome(0.0, 0.0, extras=extras)
        # the answer of a generation that hit the step limit was never shown to the policy: not part of the response
        segments = self.segments[:-1] if self.status.stop_reason is StopReason.STEP_LIMIT else self.segments
        fn = self.reward_fn
        if fn is None and self.r1 is not None and callable(getattr(self.r1.env, "compute_score", None)):
            fn = self.r1.env.compute_score
        if fn is None:
            extras["reward_source"] = "none"
            return Outcome(0.0, 0.0, extras=extras)
        task = self.task
        try:
            score = call_in_thread(lambda: fn(data_source=task["data_source"], solution_str="".join(segments),
                                              ground_truth=task["ground_truth"], extra_info=task["extra_info"]),
                                   timeout=self.limits.call_timeout, what=f"agent_r1 env {self.env_path} reward")
            reward, accuracy, more = self._read_score(score)
        except EnvTimeoutError as exc:  # the scoring is a call too: the time-limit rule's outcome
            self.status.fail(StopReason.TIMEOUT, str(exc))
            return Outcome(0.0, 0.0, extras=extras)
        except Exception as exc:  # noqa: BLE001 - a reward function's failure is counted, the episode scores 0
            extras["reward_error"] = error_text(exc)
            self.status.fail(StopReason.ENV_ERROR, f"agent_r1 env {self.env_path}: the reward function failed "
                                                   f"({extras['reward_error']})")
            return Outcome(0.0, 0.0, extras=extras)
        if more:
            extras["reward_extra"] = more
        return Outcome(reward, accuracy, extras=extras)

    @staticmethod
    def _read_score(score: Any) -> tuple[float, float, dict[str, Any]]:
        """(reward, accuracy, the score dict's other keys) of what a verl-style reward function returned."""
        more: dict[str, Any] = {}
        if isinstance(score, Mapping):
            if "score" not in score:
                raise TypeError(f"the reward function returned a dict without 'score': {dict(score)!r:.200}")
            more = {str(k): json_safe(v) for k, v in score.items() if k != "score"}
            value = score["score"]
        else:
            value = score
        if not isinstance(value, numbers.Real):  # numpy's floats included
            raise TypeError(f"the reward function returned {type(value).__name__}, not a number")
        reward = float(value)
        found = [score[k] for k in ACCURACY_KEYS if isinstance(score, Mapping) and k in score]
        correct = says_correct(found[0]) if found else reward >= 1.0
        return reward, float(correct), more


__all__ = ["AgentR1Env"]
