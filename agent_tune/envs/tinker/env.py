"""tinker-cookbook's environments (``Env`` / ``EnvGroupBuilder``) as a token environment ("tinker", :class:`TinkerEnv`):
the env's own renderer makes the tokens, which agent-tune keeps as they are. Spec: docs/envs.md, "tinker-cookbook's
``Env``".
"""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping, Sequence

from pydantic import model_validator

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import Observation, Outcome, SamplerHints, Step, StopReason, WholeTextEnv
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, EnvTimeoutError, StartTimeoutError
from agent_tune.errors import EnvError, error_text
from agent_tune.sync import call_in_thread, on_background_loop, wait
from agent_tune.utils.imports import import_callable, import_object
from agent_tune.utils.jsonl import json_safe
from agent_tune.utils.rows import says_correct
from agent_tune.utils.typed_config import OptionError

# Metrics that say the answer is correct (true, or a number >= 1), newest step first.
CORRECT_KEYS = ("correct", "accuracy", "acc", "success", "is_correct")


class TinkerEnvError(EnvError, RuntimeError):
    """The tinker env could not start an episode (``make_envs`` or ``initial_observation`` failed)."""


def _types() -> Any:
    try:
        from tinker_cookbook.rl import types
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError("the tinker env needs tinker-cookbook and tinker: see docs/envs.md (installed --no-deps "
                          "with the `tinker` extra)") from exc
    return types


def token_ids(model_input: Any, where: str) -> list[int]:
    """The token ids of a ``tinker.ModelInput`` made of text chunks; ``TypeError`` naming ``where`` otherwise."""
    import tinker

    if not isinstance(model_input, tinker.ModelInput):
        raise TypeError(f"{where}: expected a tinker.ModelInput, got {type(model_input).__name__}")
    ids: list[int] = []
    for chunk in model_input.chunks:
        if not isinstance(chunk, tinker.EncodedTextChunk):
            raise TypeError(f"{where}: only text chunks are supported, got a {type(chunk).__name__}")
        ids.extend(int(t) for t in chunk.tokens)
    return ids


def stop_hints(stop: Any, where: str) -> SamplerHints:
    """The runner's hints for a tinker stop condition (stop strings, or stop token ids)."""
    items = list(stop or [])
    if all(isinstance(s, str) for s in items):
        return SamplerHints(stop=tuple(items), observation_kind="tokens", blocking_reset=True)
    if all(isinstance(s, int) and not isinstance(s, bool) for s in items):
        return SamplerHints(stop_token_ids=tuple(items), observation_kind="tokens", blocking_reset=True)
    raise TypeError(f"{where}: a stop condition is a list of strings or of token ids, got {stop!r:.200}")


class TinkerOptions(AdapterOptions):
    """The tinker env's option values (see :class:`AdapterOptions`): the dataset ``split`` its tasks come from and
    the ``member`` of the group the episode plays (>= 0)."""

    split: Literal["train", "test"] = "train"
    member: int = 0

    @model_validator(mode="after")
    def _member(self) -> TinkerOptions:
        if self.member < 0:
            raise OptionError("member", f"must be >= 0, got {self.member}")
        return self


# Datasets built once per process: (path, kwargs as JSON) -> (train, test).
_DATASETS: dict[tuple[str, str], tuple[Any, Any]] = {}


def load_datasets(path: str, kwargs: Mapping[str, Any], timeout: float) -> tuple[Any, Any]:
    """The ``(train, test)`` ``RLDataset`` pair of ``path`` (an ``RLDatasetBuilder`` or a callable) built with
    ``kwargs`` within ``timeout`` seconds, cached per process."""
    key = (path, json.dumps(dict(kwargs), sort_keys=True, default=repr))
    if key not in _DATASETS:
        factory = import_object(path)

        async def build() -> Any:
            made = factory(**kwargs)
            if hasattr(made, "__await__"):
                return await made
            if isinstance(made, tuple):
                return made
            return await made()  # an RLDatasetBuilder instance: awaiting its __call__ builds the datasets

        pair = wait(build(), timeout, f"tinker dataset {path}")
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"tinker env: dataset {path!r} built {type(pair).__name__}, not a (train, test) pair")
        _DATASETS[key] = pair
    return _DATASETS[key]


def tinker_tasks(split: str, dataset: str, dataset_kwargs: Mapping[str, Any] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT) -> list[Task]:
    """The group builders of a tinker ``RLDataset`` as tasks: ``{"batch": i, "slot": j}`` is ``get_batch(i)[j]`` of
    the split's dataset (``train`` the builder's first, ``test`` its second)."""
    train, test = load_datasets(dataset, dataset_kwargs or {}, start_timeout)
    chosen = {"train": train, "test": test}.get(split)
    if chosen is None:
        return []
    tasks = []
    for i in range(len(chosen)):
        for j, group in enumerate(chosen.get_batch(i)):
            tags = group.logging_tags()
            tasks.append(Task(id=f"{i}:{j}", kwargs={"batch": i, "slot": j}, category=str(tags[0]) if tags else "",
                              env_kwargs={"dataset": dataset, "dataset_kwargs": dict(dataset_kwargs or {}),
                                          "split": split}))
    return tasks


def tinker_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A row's prompt: the env's prompt tokens decoded, as one user message (the runner plays the tokens)."""
    env = env_cls(**env_kwargs)
    try:
        ids = env.reset(**task.kwargs).token_ids or []
        tokenizer = getattr(getattr(env._env, "renderer", None), "tokenizer", None)
        text = tokenizer.decode(ids) if tokenizer is not None else f"({len(ids)} prompt tokens rendered by the env)"
    finally:
        env.close()
    return [{"role": "user", "content": text}]


@register_env("tinker")
class TinkerEnv(WholeTextEnv):
    """A tinker-cookbook ``Env`` built by an ``EnvGroupBuilder``, played token in, token out (docs/envs.md)."""

    description = "tinker-cookbook Env / EnvGroupBuilder, token in and token out through the env's own renderer"
    sampler_hints = SamplerHints(observation_kind="tokens", blocking_reset=True)
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=tinker_tasks, row_prompt=tinker_row_prompt)
    _check_builds = True  # check_kwargs builds the env: the builder imports (nothing is built)

    def __init__(
        self,
        builder: str | None = None,
        builder_kwargs: Mapping[str, Any] | None = None,
        dataset: str | None = None,
        dataset_kwargs: Mapping[str, Any] | None = None,
        split: str = "train",
        member: int = 0,
        success_reward: float = 1.0,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        _types()
        if (builder is None) == (dataset is None):
            raise OptionError("builder", f"give one of builder (module:callable making an EnvGroupBuilder) or "
                                         f"dataset (module:callable making RLDatasets), got builder={builder!r}, "
                                         f"dataset={dataset!r}")
        limits = TinkerOptions.of(dict(split=split, member=member, call_timeout=call_timeout,
                                       start_timeout=start_timeout))
        self.builder_path, self.dataset_path = builder, dataset
        self.builder_kwargs, self.dataset_kwargs = dict(builder_kwargs or {}), dict(dataset_kwargs or {})
        self.split, self.member = limits.split, limits.member
        self.success_reward = float(success_reward)
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self._factory = import_callable(builder, "builder") if builder is not None else None
        self._group: Any = None
        self._env: Any = None
        self._context: list[int] = []
        self._next_ids: list[int] = []
        self.rewards: list[float] = []
        self.metrics: dict[str, Any] = {}

    def _group_builder(self, task: Mapping[str, Any]) -> Any:
        if self._factory is not None:
            try:
                return self._factory(**self.builder_kwargs, **task)
            except TypeError as exc:
                raise TypeError(f"tinker env: {self.builder_path}(...) does not take the task's keys "
                                f"{sorted(task)}: {exc}") from None
        if set(task) != {"batch", "slot"}:
            raise TypeError(f"tinker env: a dataset task is {{'batch', 'slot'}}, got the keys {sorted(task)}")
        train, test = load_datasets(str(self.dataset_path), self.dataset_kwargs, self.start_timeout)
        batch = (train if self.split == "train" else test).get_batch(int(task["batch"]))
        return batch[int(task["slot"])]

    async def _make(self, group: Any) -> tuple[Any, Any]:
        envs = list(await group.make_envs())
        if self.member >= len(envs):
            raise TinkerEnvError(f"make_envs() built {len(envs)} envs; member {self.member} is not one of them")
        env = envs[self.member]
        return env, await env.initial_observation()

    def _begin(self, task: Mapping[str, Any], what: str) -> tuple[Any, Any, Any]:
        """The task's group builder, the member env and its initial observation (run in a bounded thread)."""
        group = self._group_builder(task)
        if not isinstance(group, _types().EnvGroupBuilder):
            raise TypeError(f"tinker env: the task's builder is a {type(group).__name__}, not an EnvGroupBuilder")
        try:
            env, first = wait(self._make(group), self.start_timeout)
        except EnvTimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the env's own code raised, named
            raise TinkerEnvError(f"{what}: cannot start the episode ({error_text(exc)})") from exc
        return group, env, first

    def reset(self, **task: Any) -> Observation:
        """The task's ``EnvGroupBuilder``, its envs and the member's initial observation, within ``start_timeout``."""
        self.close()
        types = _types()
        what = f"tinker env {self.builder_path or self.dataset_path}"
        try:
            group, env, first = call_in_thread(self._begin, task, what, timeout=self.start_timeout,
                                               what=f"{what} start", error=StartTimeoutError)
        except EnvTimeoutError:  # the whole start, or one of its waits: the runner counts the episode as not played
            raise StartTimeoutError(self.start_timeout, f"{what} start") from None
        if isinstance(first, types.InitialObservationOverflow):
            raise TinkerEnvError(f"{what}: the initial prompt overflows the env's own token budget")
        ob, stop = first
        ids = token_ids(ob, f"{what}: initial_observation()")
        self.sampler_hints = stop_hints(stop, f"{what}: initial_observation()")
        self._group, self._env, self._context, self._next_ids = group, env, list(ids), []
        self._stop_condition = list(stop or [])
        self.rewards, self.metrics = [], {}
        super().reset()
        return Observation(token_ids=list(ids))

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        """The tokens the last step's observation added (none once the episode ended)."""
        ids, self._next_ids = self._next_ids, []
        return Observation(token_ids=ids)

    def _action(self, step: Step) -> list[int]:
        """The generation's tokens as sampled, else its text encoded by the env's renderer."""
        if step.token_ids is not None:
            return [int(t) for t in step.token_ids]
        renderer = getattr(self._env, "renderer", None) or getattr(self._group, "renderer", None)
        tokenizer = getattr(renderer, "tokenizer", None)
        if tokenizer is None:
            raise TypeError("tinker env: step(text) without token_ids needs the env's renderer (env.renderer) to "
                            "encode the text; the episode runner always passes the tokens")
        return list(tokenizer.encode(step.raw, add_special_tokens=False))

    async def act(self, step: Step) -> None:
        """``env.step(action)``; the tokens its next observation adds after the episode's so far."""
        action = self._action(step)
        stops = self.sampler_hints.stop_token_ids
        stopped = bool(action) and action[-1] in stops or any(step.raw.endswith(s) for s in self.sampler_hints.stop)
        try:
            extra = {"stop_reason": "stop" if stopped else "length"}
            result = await on_background_loop(self._env.step(action, extra=extra), self.call_timeout, "tinker env step")
        except EnvTimeoutError as exc:  # the time-limit rule: ended, scored on the rewards so far
            step.fail(StopReason.TIMEOUT, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - the env failed on the policy's action: counted, never a crash
            step.format_errors += 1
            step.fail(StopReason.ENV_ERROR, f"the env's step raised {error_text(exc)}")
            return
        if not isinstance(result, _types().StepResult):
            step.fail(StopReason.ENV_ERROR, f"the env's step returned a {type(result).__name__}, not a StepResult")
            return
        reward = float(result.reward)
        self.rewards.append(reward)
        self.metrics = dict(result.metrics or {})
        step.info["tinker_reward"] = reward
        if self.metrics:
            step.info["tinker_metrics"] = json_safe(self.metrics)
        fmt = self.metrics.get("format")  # a malformed action: format 0 (ProblemEnv) or stop/parse_error
        step.format_errors += int((fmt is not None and not fmt) or bool(self.metrics.get("stop/parse_error")))
        if result.episode_done:
            step.done = True
            self.status.turns_completed += 1
            return
        if list(result.next_stop_condition or []) != self._stop_condition:
            step.info["tinker_stop_changed"] = True
        try:
            following = token_ids(result.next_observation, "the env's next_observation")
        except TypeError as exc:
            step.fail(StopReason.ENV_ERROR, str(exc))
            return
        context = self._context + action
        if following[: len(context)] != context:
            step.fail(StopReason.ENV_ERROR, "the env's next observation does not extend the episode's tokens (its "
                                            "renderer re-renders the history: use one with the sequence extension "
                                            "property)")
            return
        self._context, self._next_ids = following, following[len(context):]

    def outcome(self) -> Outcome:
        total = float(sum(self.rewards))
        said = [self.metrics[k] for k in CORRECT_KEYS if k in self.metrics]
        solved = says_correct(said[0]) if said else total >= self.success_reward
        extras: dict[str, Any] = {"tinker_rewards": list(self.rewards)}
        if self.metrics:
            extras["tinker_metrics"] = json_safe(self.metrics)
            tinker_stop = [k.partition("/")[2] for k, v in self.metrics.items() if k.startswith("stop/") and v]
            if tinker_stop:
                extras["tinker_stop"] = tinker_stop[0]
        if self.status.error is not None:
            solved = False
        return Outcome(total, float(solved), None, extras)

    def close(self) -> None:
        """Run the group builder's ``cleanup`` (bounded by ``call_timeout``) and drop the episode's env."""
        group, self._group, self._env = self._group, None, None
        if group is not None:
            try:
                wait(group.cleanup(), self.call_timeout)
            except Exception:  # noqa: BLE001 - a cleanup that fails or hangs is not worth the run
                pass


__all__ = ["TinkerEnv", "TinkerEnvError", "load_datasets", "tinker_tasks", "token_ids"]
