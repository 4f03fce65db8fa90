"""Any SkyRL-gym text env played through agent-tune's runner ("skyrl", :class:`SkyRLGymEnv`): every generation goes
whole to the SkyRL env's ``step``. Spec: docs/envs.md, "Any SkyRL-gym text env".
"""

from __future__ import annotations

import contextlib
import copy
import functools
from typing import Any, Mapping, Sequence

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import Observation, Outcome, SamplerHints, Step, StopReason, WholeTextEnv
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.tasks import chat_messages, chat_prompt, dataset_row_kwargs, task_fields
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, EnvTimeoutError, StartTimeoutError
from agent_tune.errors import error_text
from agent_tune.sync import acall_in_thread, call_in_thread
from agent_tune.utils.imports import import_callable
from agent_tune.utils.jsonl import json_safe
from agent_tune.utils.rows import says_correct, split_rows, truth_text

# Keys of a step's metadata that say the answer is correct (true, or a number >= 1).
CORRECT_KEYS = ("acc", "accuracy", "correct", "is_correct", "success")
# SkyRL dataset columns that are not env extras.
ROW_PROMPT, ROW_ENV = "prompt", "env_class"


def _skyrl() -> Any:
    try:
        import skyrl_gym
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError("the skyrl env needs skyrl-gym: pip install 'agent-tune[skyrl]'") from exc
    return skyrl_gym


class SkyRLOptions(AdapterOptions):
    """The skyrl env's option values (see :class:`AdapterOptions`), with SkyRL's ``env_config`` (a mapping)."""

    env_config: Mapping[str, Any] | None = None


def skyrl_tasks(split: str, path: str | Mapping[str, str], row_env: bool = True) -> list[Task]:
    """The rows of SkyRL dataset files as tasks (:func:`~agent_tune.utils.rows.split_rows`); a row's ``env_class``
    is its task's ``env`` kwarg unless ``row_env=False`` (the run's ``env`` / ``env_class`` then plays every row)."""
    file, chosen = split_rows(split, path, "skyrl env", ROW_PROMPT)
    tasks = []
    for number, row in chosen:
        env_id = row.get(ROW_ENV)
        fields = dataset_row_kwargs({k: v for k, v in row.items() if k != ROW_ENV}, "skyrl env", f"{file} row {number}")
        reward_spec = row.get("reward_spec") if isinstance(row.get("reward_spec"), Mapping) else {}
        reference = truth_text(reward_spec.get("ground_truth"))
        tasks.append(Task(
            id=f"{file.stem}:{number}", kwargs=fields,
            category=str(env_id or row.get("data_source") or "skyrl"),
            env_kwargs={"env": str(env_id)} if env_id and row_env else {}, reference=reference,
        ))
    return tasks


@register_env("skyrl")
class SkyRLGymEnv(WholeTextEnv):
    """A SkyRL-gym ``BaseTextEnv``: it parses the policy's whole text, answers with chat messages and rewards."""

    description = "any SkyRL-gym text env (a skyrl_gym id or module:Class): it parses the raw text, answers, rewards"
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=skyrl_tasks)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """The options, then the env itself when they name it (else the rows do)."""
        super().check_kwargs(kwargs)
        if "env" in kwargs or "env_class" in kwargs:
            cls(**kwargs)
        else:
            SkyRLOptions.of(kwargs)

    def __init__(
        self,
        env: str | None = None,
        env_class: str | None = None,
        env_config: Mapping[str, Any] | None = None,
        max_steps: int | None = None,
        stop: Sequence[str] = (),
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.limits = SkyRLOptions.of(dict(env_config=env_config, max_steps=max_steps, stop=stop,
                                           call_timeout=call_timeout, start_timeout=start_timeout))
        skyrl_gym = _skyrl()
        if (env is None) == (env_class is None):
            raise ValueError("skyrl env: give one of env (a skyrl_gym id) or env_class (module:Class), "
                             f"got env={env!r}, env_class={env_class!r}")
        if env is not None:
            if env not in skyrl_gym.registry:
                raise ValueError(f"skyrl env: {env!r} is not a registered skyrl_gym env; registered: "
                                 f"{', '.join(sorted(skyrl_gym.registry))}")
            self.env_id, self._factory = env, None
        else:
            factory = import_callable(str(env_class), "env_class")
            if not (isinstance(factory, type) and issubclass(factory, skyrl_gym.Env)):
                raise ValueError(f"skyrl env: env_class {env_class!r} is not a skyrl_gym.Env subclass")
            self.env_id, self._factory = str(env_class), factory
        self.env_config = dict(env_config or {})
        self.max_steps = self.limits.max_steps  # the tier's: the last generation is stepped
        # reset builds the env and calls its init, bounded by start_timeout: off the runner's start thread
        self.sampler_hints = SamplerHints(stop=tuple(self.limits.stop), blocking_reset=True)
        self.skyrl_env: Any = None
        self.rewards: list[float] = []
        self.last_metadata: dict[str, Any] = {}
        self.skyrl_done = False

    def reset(self, prompt: list[dict[str, Any]] | str | None = None, row: str | Mapping[str, Any] | None = None,
              **extras: Any) -> Observation:
        """Start an episode on a SkyRL dataset row's fields (``prompt`` and the SkyRL extras); ``row`` is the
        deprecated form."""
        self.close()
        fields = task_fields("skyrl env", row, extras if prompt is None else {**extras, ROW_PROMPT: prompt})
        row_env = fields.pop(ROW_ENV, None)
        if row_env is not None and row_env != self.env_id:
            raise ValueError(f"skyrl env: the row's env_class {row_env!r} is not this env's {self.env_id!r}")
        prompt = fields.pop(ROW_PROMPT, None)
        if prompt is None:
            raise TypeError("skyrl env: reset() needs a prompt")
        messages = chat_prompt(prompt, "skyrl env")
        if self.max_steps is not None:
            fields.setdefault("max_turns", self.max_steps)  # as SkyRL's generator passes generator.max_turns
        try:
            self.skyrl_env, first = call_in_thread(self._start, fields, messages, timeout=self.limits.start_timeout,
                                                   what=f"skyrl env {self.env_id} start", error=StartTimeoutError)
        except StartTimeoutError:
            raise  # the thread still runs: nothing to close; the runner counts the episode (stop reason timeout)
        except Exception as exc:
            self.close()
            raise ValueError(f"skyrl env {self.env_id!r}: cannot start the task "
                             f"({type(exc).__name__}: {exc})") from exc
        first = chat_messages(first, f"skyrl env {self.env_id!r}: init()")
        self.rewards, self.last_metadata, self.skyrl_done = [], {}, False
        super().reset()
        return Observation(messages=first)

    def _start(self, fields: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[Any, Any]:
        from omegaconf import OmegaConf

        config = OmegaConf.create(copy.deepcopy(self.env_config))
        make = self._factory or functools.partial(_skyrl().make, self.env_id)
        env = make(env_config=config, extras=fields)
        first, _metadata = env.init(copy.deepcopy(messages))
        return env, first

    async def act(self, step: Step) -> None:
        """``skyrl_env.step(raw)`` within ``call_timeout``: its observations are the step's messages."""
        try:
            out = await acall_in_thread(self.skyrl_env.step, step.raw, timeout=self.limits.call_timeout,
                                        what=f"skyrl env {self.env_id} step")
            if not isinstance(out, Mapping):
                raise TypeError(f"step() returned {type(out).__name__}, not a BaseTextEnvStepOutput")
            observations = chat_messages(out.get("observations") or [], "step() observations")
            reward, done, metadata = float(out.get("reward") or 0.0), bool(out.get("done")), out.get("metadata") or {}
        except EnvTimeoutError as exc:
            self.skyrl_env = None  # its thread may still be inside it: dropped, never used or closed again
            step.fail(StopReason.TIMEOUT, str(exc), f"Error: the environment did not answer ({exc})")
            return
        except Exception as exc:  # noqa: BLE001 - the env failed on model output: counted, never a crash
            why = error_text(exc)
            step.format_errors += 1
            step.fail(StopReason.ENV_ERROR, why, f"Error: the environment could not process the response ({why})")
            return
        self.rewards.append(reward)
        self.last_metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        step.messages.extend(observations)
        step.info["skyrl_reward"] = reward
        if self.last_metadata:
            step.info["skyrl_metadata"] = json_safe(self.last_metadata)
        tool = self.last_metadata.get("tool_name")
        step.info["calls"] = [str(tool)] if tool else []
        self.status.num_calls += bool(tool)
        if done:
            self.skyrl_done = step.done = True
            self.status.turns_completed += 1

    def outcome(self) -> Outcome:
        last = self.rewards[-1] if self.rewards else 0.0
        solved = last >= 1.0 or any(says_correct(self.last_metadata.get(k)) for k in CORRECT_KEYS)
        extras: dict[str, Any] = {"skyrl_env": self.env_id, "skyrl_rewards": list(self.rewards),
                                  "skyrl_done": self.skyrl_done}
        if self.skyrl_env is not None:
            try:
                metrics = call_in_thread(self.skyrl_env.get_metrics, timeout=self.limits.call_timeout,
                                         what=f"skyrl env {self.env_id} get_metrics")
            except Exception as exc:  # noqa: BLE001 - a metric is not worth the episode
                metrics = {"error": f"{type(exc).__name__}: {exc}"}
            if metrics:
                extras["skyrl_metrics"] = json_safe(metrics)
        return Outcome(reward=float(sum(self.rewards)), accuracy=float(solved), extras=extras)

    def close(self) -> None:
        """Close the SkyRL env, within ``call_timeout`` (one that timed out was dropped already)."""
        env, self.skyrl_env = self.skyrl_env, None
        if env is not None:
            with contextlib.suppress(EnvTimeoutError):
                call_in_thread(env.close, timeout=self.limits.call_timeout, what=f"skyrl env {self.env_id} close")


__all__ = ["CORRECT_KEYS", "SkyRLGymEnv"]
