"""Any PrimeIntellect ``verifiers`` environment played through agent-tune's runner ("verifiers", :class:`VerifiersEnv`):
a ``vf.MultiTurnEnv`` (classic API, verifiers 0.3.1) stepped by verifiers' own code with the runner as the model,
scored by its rubric. Spec: docs/envs.md, "A verifiers environment".
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import Observation, Outcome, SamplerHints, Step, StopReason, WholeTextEnv
from agent_tune.envs.catalogue import Task, TaskCatalogue, reset_prompt
from agent_tune.envs.registry import register_env
from agent_tune.envs.tasks import dataset_row_kwargs, mapping_of, task_fields
from agent_tune.envs.time_limits import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    timeout_text,
)
from agent_tune.errors import error_text
from agent_tune.parsing import ParsedResponse
from agent_tune.parsing.response import ResponseParser
from agent_tune.sync import on_background_loop, wait
from agent_tune.utils.imports import import_object
from agent_tune.utils.jsonl import json_safe
from agent_tune.utils.rows import truth_text

MODEL = "agent-tune"  # the model name verifiers' state records
SPLITS = {"train": "dataset", "test": "eval_dataset"}

_envs: dict[str, Any] = {}
_envs_lock = threading.Lock()
# The failures of the env's call_tool while one step's env_response runs (see _count_tool_failures).
_tool_failures: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "agent_tune_verifiers_tool_failures", default=None)


def _vf() -> Any:
    try:
        import verifiers as vf
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError("the verifiers env needs verifiers: pip install 'agent-tune[verifiers]' and "
                          "pip install --no-deps verifiers==0.3.1 (scripts/install.sh)") from exc
    if not hasattr(vf, "MultiTurnEnv"):
        raise ImportError(f"the verifiers env needs verifiers' classic API (vf.MultiTurnEnv), which verifiers "
                          f"{getattr(vf, '__version__', '?')} does not ship (0.4.0 removed it): install 0.3.1")
    return vf


def _env_args(env_args: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """``env_args`` as a plain dict: a mapping (a Hydra config's too), or its JSON text."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(env_args, DictConfig):
        env_args = OmegaConf.to_container(env_args, resolve=True)  # type: ignore[assignment]
    return mapping_of(env_args, "verifiers env", "env_args")


@contextmanager
def _signals_off_main_thread() -> Iterator[None]:
    """Off the main thread (where ``signal.signal`` refuses to run), verifiers' env build installs no signal
    handlers: its teardown then runs at exit only (its ``atexit`` hook)."""
    if threading.current_thread() is threading.main_thread():
        yield
        return
    import signal as real

    from verifiers.envs import environment as module

    class _NoHandlers:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def signal(signum: int, handler: Any) -> Any:
            return None

    module.signal = _NoHandlers()
    try:
        yield
    finally:
        module.signal = real


def _count_tool_failures(env: Any) -> None:
    """Wrap the env's ``call_tool`` so that a tool raising inside ``env_response`` is recorded for its step (the
    exception still goes on to verifiers' handler)."""
    call = getattr(env, "call_tool", None)
    if call is None or getattr(call, "_agent_tune_counted", False) or not asyncio.iscoroutinefunction(call):
        return

    @functools.wraps(call)
    async def counted(tool_name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await call(tool_name, *args, **kwargs)
        except Exception as exc:
            failures = _tool_failures.get()
            if failures is not None:
                failures.append((str(tool_name), error_text(exc)))
            raise

    counted._agent_tune_counted = True  # type: ignore[attr-defined]
    env.call_tool = counted


def load_environment(environment: str, env_args: Mapping[str, Any] | str | None = None) -> Any:
    """The verifiers environment ``environment`` names (``module:function`` or an installed env id), built with
    ``env_args`` once per process; ``ValueError`` naming what went wrong."""
    vf = _vf()
    args = _env_args(env_args)
    key = json.dumps([environment, args], sort_keys=True, default=repr)
    with _envs_lock:
        if key in _envs:
            return _envs[key]
        try:
            with _signals_off_main_thread():
                if ":" in environment:
                    factory = import_object(environment)
                    built = factory(**args) if callable(factory) and not isinstance(factory, vf.Environment) \
                        else factory
                else:
                    built = vf.load_environment(environment, **args)
        except Exception as exc:
            raise ValueError(f"verifiers env: cannot build {environment!r} with env_args {args} "
                             f"({type(exc).__name__}: {exc})") from exc
        if not isinstance(built, vf.MultiTurnEnv):
            raise ValueError(f"verifiers env: {environment!r} built a {type(built).__name__}, not a vf.MultiTurnEnv "
                             "(SingleTurnEnv, ToolEnv, StatefulToolEnv or a MultiTurnEnv subclass)")
        _count_tool_failures(built)
        _envs[key] = built
        return built


def _no_model_client() -> Any:
    """A verifiers ``Client`` for ``init_state`` that answers nothing: agent-tune's runner is the model."""
    from verifiers.clients.client import Client

    def setup_client(self: Any, *args: Any) -> Any:
        raise RuntimeError("agent-tune's runner generates; verifiers' client is never asked")

    async def never(self: Any, *args: Any, **kwargs: Any) -> Any:
        setup_client(self)

    async def close(self: Any) -> None:
        return None

    asked = ("to_native_tool", "to_native_prompt", "get_native_response", "raise_from_native_response",
             "from_native_response")  # Client's abstract methods: none is ever called
    methods = {name: never for name in asked}
    return type("NoModelClient", (Client,), {**methods, "setup_client": setup_client, "close": close})(None)


def chat_message(message: Any) -> dict[str, Any]:
    """A verifiers message as the chat dict the runner renders (``tool_calls`` in the OpenAI form)."""
    out = message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else dict(message)
    if out.get("role") == "text":
        out["role"] = "user"
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        converted = []
        for call in calls:
            if isinstance(call, Mapping) and "function" not in call and "name" in call:
                arguments: Any = call.get("arguments")
                if isinstance(arguments, str):
                    try:
                        decoded = json.loads(arguments)
                    except ValueError:
                        decoded = None
                    arguments = decoded if isinstance(decoded, dict) else arguments
                call = {"id": call.get("id"), "type": "function",
                        "function": {"name": call["name"], "arguments": arguments}}
            converted.append(call)
        out["tool_calls"] = converted
    out.setdefault("content", "")
    return out


def tool_schemas(tool_defs: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    """verifiers' ``tool_defs`` (``vf.Tool``: name, description, parameters) as OpenAI tool schemas."""
    if not tool_defs:
        return None
    schemas = []
    for tool in tool_defs:
        data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else dict(tool)
        function = {"name": data["name"], "description": data.get("description", ""),
                    "parameters": data.get("parameters") or {"type": "object", "properties": {}}}
        schemas.append({"type": "function", "function": function})
    return schemas


def _with_chat_prompt(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if isinstance(out.get("prompt"), str):  # a completion-style prompt: the runner renders chat messages
        out["prompt"] = [{"role": "user", "content": out["prompt"]}]
    return out


def verifiers_tasks(split: str, environment: str, env_args: Mapping[str, Any] | str | None = None) -> list[Task]:
    """The rows of the environment's ``dataset`` (``train``) or ``eval_dataset`` (``test``), as verifiers formats
    them; each task's env kwargs name the environment, so a row plays alone."""
    if split not in SPLITS:
        raise ValueError(f"verifiers env: no split {split!r}; its splits: {', '.join(SPLITS)}")
    vf_env = load_environment(environment, env_args)
    dataset = vf_env.get_dataset() if split == "train" else vf_env.get_eval_dataset()
    args = _env_args(env_args)
    env_kwargs: dict[str, Any] = {"environment": environment}
    if args:
        env_kwargs["env_args"] = json.dumps(args, sort_keys=True)
    category = vf_env.env_id or environment
    tasks, seen = [], set()
    for number, row in enumerate(dataset):
        row = dataset_row_kwargs(row, "verifiers env", f"{environment!r} {split} row {number}")
        task_id = f"{split}:{row.get('example_id', number)}"
        if task_id in seen:
            task_id = f"{split}:{number}"
        seen.add(task_id)
        tasks.append(Task(id=task_id, kwargs=row, category=str(category), env_kwargs=dict(env_kwargs),
                          reference=truth_text(row.get("answer"))))
    return tasks


def verifiers_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's prompt as chat messages (what ``reset`` shows; no state is set up)."""
    from verifiers.utils.message_utils import normalize_messages

    fields = _with_chat_prompt(task.kwargs)
    if fields.get("prompt") is None:  # a bare question: the env's own formatting (env needed)
        return reset_prompt(env_cls, task, env_kwargs)
    return [chat_message(m) for m in normalize_messages(fields["prompt"], field_name="prompt")]


@register_env("verifiers")
class VerifiersEnv(WholeTextEnv):
    """A verifiers ``MultiTurnEnv`` (ToolEnv, SingleTurnEnv, ...): its dataset the tasks, its rubric the reward."""

    description = "any verifiers MultiTurnEnv / ToolEnv (module:function or an env id): its dataset, its rubric"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset runs verifiers' setup_state (it may start a sandbox)
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=verifiers_tasks, row_prompt=verifiers_row_prompt)
    _check_builds = True  # check_kwargs builds the env: the environment builds and is a ``vf.MultiTurnEnv``

    def __init__(
        self,
        environment: str,
        env_args: Mapping[str, Any] | str | None = None,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps: int | None = None,
        accuracy_metric: str | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        limits = AdapterOptions.of(dict(max_steps=max_steps, call_timeout=call_timeout, start_timeout=start_timeout))
        self.environment = str(environment)
        self.env_args = _env_args(env_args)
        self.vf_env = load_environment(self.environment, self.env_args)
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = limits.max_steps  # the tier's: verifiers sees the last one
        self.accuracy_metric = accuracy_metric
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self.state: Any = None
        self.tool_names: set[str] = set()
        self._prompt: list[Any] = []
        self._finished = False  # verifiers' cleanup ran (the completion is rendered)
        self._scored: Outcome | None = None

    def reset(self, row: str | Mapping[str, Any] | None = None, **fields: Any) -> Observation:
        """Start an episode on a dataset row's fields (``prompt``, or ``question`` formatted by the env); ``row`` is
        the deprecated form."""
        self.close()
        task = _with_chat_prompt(task_fields("verifiers env", row, fields))
        if task.get("prompt") is None:
            if "question" not in task:
                raise TypeError("verifiers env: reset() needs a prompt (chat messages) or a question")
            from datasets import Dataset

            task = dict(self.vf_env._format_dataset_source(Dataset.from_list([task]))[0])
        task.setdefault("example_id", 0)
        try:
            self.state, self._prompt = wait(self._start(task), self.start_timeout)
        except EnvTimeoutError:  # the time-limit rule: the runner counts the episode as not played
            self.state = None
            raise StartTimeoutError(self.start_timeout, f"verifiers env {self.environment} setup_state") from None
        except Exception as exc:
            self.state = None
            raise ValueError(f"verifiers env {self.environment!r}: cannot start the task "
                             f"({type(exc).__name__}: {exc})") from exc
        self.tools = tool_schemas(self.state.get("tool_defs"))
        self.tool_names = {t["function"]["name"] for t in self.tools or []}
        self._finished, self._scored = False, None
        super().reset()
        return Observation(messages=[chat_message(m) for m in self._prompt], tools=self.tools)

    async def _start(self, task: dict[str, Any]) -> tuple[Any, list[Any]]:
        vf = _vf()
        env = self.vf_env
        state = await env.init_state(task, _no_model_client(), MODEL, None)
        state["timing"].generation.start = state["timing"].setup.start = time.time()
        try:
            ready = await env.setup_state(state)
        finally:
            state["timing"].setup.end = time.time()
        state = state if ready is None else ready
        if state.get("error") is not None:
            raise state["error"] if isinstance(state["error"], BaseException) else vf.Error(str(state["error"]))
        return state, list(await env.get_prompt_messages(state))

    # the parser decodes calls only when the env has tools; verifiers decides when the episode ends
    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        if self.tools:
            return self.parser.parse(raw_response)[1]
        return ParsedResponse(content=raw_response)

    async def act(self, step: Step) -> None:
        """verifiers' own step on the background loop, where the episode's state lives, within ``call_timeout``."""
        try:
            await on_background_loop(self._act(step), self.call_timeout)
        except EnvTimeoutError:  # the time-limit rule: the episode ends timed out, unscored (its state is mid-step)
            if not step.done:
                why = timeout_text(self.call_timeout, "verifiers step")
                step.fail(StopReason.TIMEOUT, why, f"Error: the environment did not answer ({why})")
        except Exception as exc:  # noqa: BLE001 - verifiers failed on model output (or a conversation the runner
            # cannot follow): the rollout failed, as in verifiers' own loop (no score); counted, never a crash
            why = error_text(exc)
            step.format_errors += 1
            step.fail(StopReason.ENV_ERROR, why, f"Error: the environment could not process the response ({why})")

    def _assistant_message(self, step: Step) -> tuple[dict[str, Any], list[str]]:
        """The generation as verifiers' assistant message fields, and the names of the calls it makes."""
        reasoning, text = self.parser.reasoning_parser.parse(step.raw)
        parsed = step.parsed
        fields: dict[str, Any] = {"reasoning_content": reasoning}
        if not self.tools:
            fields["content"] = text
            return fields, []
        content = parsed.content
        if parsed.errors:  # the blocks that could not be decoded stay in the content, where they were
            for call in parsed.calls:
                text = text.replace(call.raw, "", 1) if call.raw else text
            content = text.strip()
        calls = [{"id": f"call_{self.status.num_steps}_{i}", "name": call.name,
                  "arguments": json.dumps(call.arguments, ensure_ascii=False)} for i, call in enumerate(parsed.calls)]
        fields["content"] = content
        fields["tool_calls"] = calls or None
        return fields, [call.name for call in parsed.calls]

    async def _act(self, step: Step) -> None:
        """One generation through verifiers: its trajectory, its stop conditions, then its ``env_response``."""
        vf = _vf()
        env, state = self.vf_env, self.state
        fields, names = self._assistant_message(step)
        step.format_errors += len(step.parsed.errors)
        unknown = [n for n in names if n not in self.tool_names]
        if unknown:
            step.format_errors += len(unknown)
            step.info["unknown_tools"] = unknown
        step.info["calls"] = [n for n in names if n in self.tool_names]
        message = vf.ResponseMessage(finish_reason="tool_calls" if fields.get("tool_calls") else "stop",
                                     is_truncated=False, **fields)
        response = vf.Response(id=f"agent-tune-{self.status.num_steps}", created=int(time.time()), model=MODEL,
                               message=message)
        await env.add_model_response(state, self._prompt, response)
        if await env.is_completed(state):
            await self._stopped(step)
            return
        before = [*self._prompt, *state["trajectory"][-1]["completion"]]
        failures: list[tuple[str, str]] = []
        token = _tool_failures.set(failures)
        started = time.time()
        try:
            prompt = await env.get_prompt_messages(state)
            from verifiers.utils.message_utils import maybe_normalize_messages

            prompt = maybe_normalize_messages(prompt, field_name="prompt_messages")
        except vf.Error as exc:  # verifiers' own rule: the error ends the rollout (has_error), which is scored
            state["error"] = exc
            step.format_errors += 1
            self.status.fail(StopReason.ENV_ERROR, error_text(exc))
            await env.is_completed(state)
            await self._stopped(step)
            return
        finally:
            _tool_failures.reset(token)
            state["timing"].env.spans.append(vf.TimeSpan(start=started, end=time.time()))
        failed = [f for f in failures if f[0] in self.tool_names]
        if failed:
            self.status.tool_errors += len(failed)
            step.info["tool_errors"] = [f"{name}: {error}" for name, error in failed]
        if len(prompt) < len(before) or not all(a is b or a == b for a, b in zip(prompt, before)):
            raise ValueError("get_prompt_messages did not continue the conversation (a non-linear prompt)")
        final = state.get("final_env_response")
        if final is not None:
            step.messages.extend(chat_message(m) for m in maybe_normalize_messages(final, field_name="final"))
            await env.is_completed(state)
            await self._stopped(step)
            return
        self._prompt = list(prompt)
        step.messages.extend(chat_message(m) for m in prompt[len(before):])

    async def _stopped(self, step: Step) -> None:
        """verifiers' stop condition fired: the episode's turn is done."""
        step.done = True
        step.info["verifiers_stop"] = self.state.get("stop_condition")
        if self.state.get("stop_condition") != "has_error":
            self.status.turns_completed += 1
        await self._finish()

    async def _finish(self) -> None:
        """verifiers' cleanup (``render_completion`` and the env's ``@vf.cleanup`` handlers), once."""
        if not self._finished:
            self._finished = True
            await self.vf_env.cleanup(self.state)

    async def _score(self) -> None:
        env, state = self.vf_env, self.state
        await self._finish()
        started = time.time()
        rubric = env.rubric
        if not env.score_rollouts:
            await rubric.dummy_score_rollout(state)
        elif rubric.has_group_rewards:
            await rubric.score_group([state])
        else:
            await rubric.score_rollout(state)
        state["timing"].scoring.start, state["timing"].scoring.end = started, time.time()
        await rubric.cleanup(state)

    def outcome(self) -> Outcome:
        if self._scored is not None:
            return self._scored
        extras: dict[str, Any] = {"verifiers_env": self.environment}
        # failed outside verifiers' own error rule (which keeps its error in state["error"] and is scored): no score
        crashed = self.status.error is not None and self.state.get("error") is None
        try:
            wait(self._finish() if crashed else self._score(), self.call_timeout)
        except EnvTimeoutError:  # the time-limit rule: scoring is a call too
            self.status.fail(StopReason.TIMEOUT, timeout_text(self.call_timeout, "verifiers scoring"))
            self.state["reward"] = None
        except Exception as exc:  # noqa: BLE001 - a rubric that fails scores 0, named
            extras["verifiers_score_error"] = error_text(exc)
            self.state["reward"] = None
        state = self.state
        reward = 0.0 if crashed else float(state.get("reward") or 0.0)
        metrics = dict(state.get("metrics") or {})
        judged = metrics.get(self.accuracy_metric, 0.0) if self.accuracy_metric else reward
        solved = float(judged or 0.0) >= float(getattr(self.vf_env, "pass_threshold", 0.5))
        extras.update(verifiers_metrics=json_safe(metrics), verifiers_stop=state.get("stop_condition"))
        self._scored = Outcome(reward=reward, accuracy=float(solved), extras=extras)
        return self._scored

    def close(self) -> None:
        """An episode closed before it ended still runs verifiers' cleanup (its rollout resources)."""
        state, self.state = self.state, None
        if state is not None and not self._finished:
            self.state = state
            try:
                wait(self._finish(), self.call_timeout)
            except Exception:  # noqa: BLE001 - closing never raises
                pass
            self.state = None
        self.status.running = False


__all__ = ["VerifiersEnv", "chat_message", "load_environment", "tool_schemas"]
