"""The ``agent_tune:`` config block, typed: :class:`AgentTuneOptions` (a :class:`ConfigModel`, pydantic v2).

The block (``config/base/agent_tune.yaml``, plus what the env, recipe, device and async configs add) is parsed
once by the launchers at start-up (:func:`parse_options`, through :class:`agent_tune.launch.run_config.RunConfig`),
so an unknown key or a bad value fails there, naming the key, and not inside a Ray worker; the agent loop
(``verl_ext/agent_loop.py``) parses the same block the same way in each rollout worker.

Each sub-block is defined by the code that reads it: ``worker_gc`` (:class:`agent_tune.rollout.worker_gc.WorkerGC`),
``reasoning_tags`` (:class:`agent_tune.parsing.reasoning.ReasoningTags`). ``task_weighting`` and ``debug`` are
here: their readers are verl's sampler and advantage hook (``verl_ext``) and the debugging modes' launcher and
loops (``agent_tune/launch/debug_modes.py``, ``verl_ext/replay_loop.py``), which the library does not import
(tests/test_import_cycles.py checks the layers). A choice is a ``Literal``
here; the module acting on it takes its table's keys from it (``typing.get_args``), so each list is written once.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field, field_validator, model_validator

from agent_tune.parsing.reasoning import ReasoningTags
from agent_tune.rollout.records import EpisodeRecording
from agent_tune.rollout.worker_gc import WorkerGC
from agent_tune.utils.typed_config import ConfigModel, OptionError

PREFIX = "agent_tune"

# Choices of the block's string options: each module that acts on one reads its choices from here
# (agent_tune.launch.launcher, agent_tune.launch.attention, verl_ext.cpu.precision, verl_ext.trainers,
# verl_ext.task_weighting).
ConsoleMode = Literal["quiet", "verbose"]
AttentionFallback = Literal["error", "sdpa"]
CpuPrecision = Literal["auto", "bf16", "fp32"]
TrainerName = Literal["main_ppo", "one_step_off_policy", "fully_async_policy"]
TaskWeightingMode = Literal["sample", "advantage"]


TASK_WEIGHTING_KEY = f"{PREFIX}.task_weighting"


class TaskWeightingConfig(ConfigModel):
    """``agent_tune.task_weighting`` (:mod:`verl_ext.task_weighting`): per-task weights from running success
    rates (defaults: Tau2-RL-Pipeline's). ``mode``: ``sample`` draws tasks with them; ``advantage`` draws
    uniformly and multiplies each sample's GRPO advantage by its task's weight (the pipeline's way,
    :mod:`verl_ext.advantage_weighting`). A bad value raises :class:`OptionError` naming the field."""

    enable: bool = False
    mode: TaskWeightingMode = "sample"
    min_attempts: int = 5  # attempts before a task's weight moves from 1
    solved_threshold: float = 0.75  # success rate above this: solved_weight
    hard_threshold: float = 0.25  # success rate below this: hard_weight
    solved_weight: float = 0.1
    hard_weight: float = 0.5
    success_threshold: float = 1.0  # an episode with acc >= this is a success
    seed: int | None = None  # the draws' generator; None: data.seed, else 1

    @model_validator(mode="after")
    def _in_range(self) -> TaskWeightingConfig:
        if self.min_attempts < 1:
            raise OptionError("min_attempts", f"{self.min_attempts!r} must be an integer >= 1")
        for key in ("solved_threshold", "hard_threshold", "success_threshold"):
            if not 0 <= getattr(self, key) <= 1:
                raise OptionError(key, f"{getattr(self, key)!r} must be a number in [0, 1]")
        if self.hard_threshold > self.solved_threshold:
            raise OptionError("hard_threshold", f"{self.hard_threshold} must be <= solved_threshold="
                                                f"{self.solved_threshold}")
        for key in ("solved_weight", "hard_weight"):
            if not 0 < getattr(self, key) <= 1:
                raise OptionError(key, f"{getattr(self, key)!r} must be a number in (0, 1]")
        return self


class DebugModes(ConfigModel):
    """``agent_tune.debug`` (T3RL's debugging modes; :mod:`agent_tune.launch.debug_modes`, docs/debugging.md):
    ``rollout_only`` plays the training rows as training samples them, dumps every sample
    to ``dump_dir`` (``None``: ``<trainer.default_local_dir>/rollout_dump``) and skips the update; ``replay``
    trains on the samples a rollout-only run dumped to ``replay_dir``, step by step, instead of generating. At
    most one of the two."""

    rollout_only: bool = False
    dump_dir: str | None = None
    replay: bool = False
    replay_dir: str | None = None

    @model_validator(mode="after")
    def _one_mode(self) -> DebugModes:
        if self.rollout_only and self.replay:
            raise OptionError("replay", "set together with rollout_only: a run either dumps rollouts or replays them")
        if self.replay and not self.replay_dir:
            raise OptionError("replay_dir", "replay needs the folder a rollout-only run dumped to (its dump_dir)")
        if self.replay_dir and not self.replay:
            raise OptionError("replay", f"false while replay_dir={self.replay_dir!r}: set true to replay that "
                                        "dump (+debug=replay does), or drop replay_dir")
        return self

    @property
    def active(self) -> bool:
        """Whether a debugging mode is on."""
        return self.rollout_only or self.replay


class AgentTuneOptions(ConfigModel):
    """The ``agent_tune:`` block; what each key does: ``config/base/agent_tune.yaml``. Defaults are what a
    missing key means (not the shipped values). ``null`` for ``chat_template_kwargs`` / ``env_kwargs`` is
    ``{}``; for ``worker_gc`` / ``task_weighting`` / ``debug`` their defaults (collector untouched, task weighting
    off, no debugging mode)."""

    # the launchers
    model_cache_dir: str | None = None  # None: ~/.cache/agent_tune/models
    cleanup_shm: bool = True
    attention_fallback: AttentionFallback = "error"
    console: ConsoleMode = "quiet"
    cpu_precision: CpuPrecision | None = None  # config/device/cpu.yaml sets it
    cpu_shared_prefix: bool | None = None  # config/device/cpu.yaml sets it (verl_ext/cpu/engine.py)
    cpu_threads: int | None = None  # config/device/cpu.yaml sets it (verl_ext/cpu/engine.py)
    trainer: TrainerName | None = None  # None: main_ppo
    # the agent loop
    template: str | None = None  # None (or ""): the tokenizer's own
    chat_template_kwargs: dict[str, Any] | None = Field(default_factory=dict)
    tool_parser: str | None = None  # None: not given to the envs
    reasoning_parser: str | None = None  # a name, or a spec such as tags:start=<S>,end=<E>
    reasoning_tags: ReasoningTags | None = None  # set: the reasoning parser is these tags (reasoning_parser none)
    max_generations: int | None = None
    env_kwargs: dict[str, dict[str, Any] | None] | None = Field(default_factory=dict)
    worker_gc: WorkerGC | None = Field(default_factory=WorkerGC)
    debug_drift: bool = False
    dump_rollouts_dir: str | None = None
    dump_rollout_tokens: bool = False
    metrics_file: str | None = None
    sample_metrics_dir: str | None = None
    episodes: EpisodeRecording = Field(default_factory=EpisodeRecording)  # every trained episode's record
    task_weighting: TaskWeightingConfig | None = Field(default_factory=TaskWeightingConfig)
    debug: DebugModes | None = Field(default_factory=DebugModes)  # None: no debugging mode

    @field_validator("chat_template_kwargs", "env_kwargs", "worker_gc", "task_weighting", "debug", mode="after")
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        """``null`` for a mapping or a sub-block means its default (``{}``, collector untouched, weighting off,
        no debugging mode)."""
        if value is not None:
            return value
        return {"chat_template_kwargs": dict, "env_kwargs": dict, "worker_gc": WorkerGC,
                "task_weighting": TaskWeightingConfig, "debug": DebugModes}[info.field_name]()

    @model_validator(mode="after")
    def _consistent(self) -> AgentTuneOptions:
        if self.max_generations is not None and self.max_generations < 1:
            raise OptionError("max_generations", f"must be >= 1, or null for no limit, got {self.max_generations!r}")
        if self.reasoning_tags is not None and self.reasoning_parser not in (None, "none"):
            raise OptionError("reasoning_tags", f"set together with reasoning_parser={self.reasoning_parser!r}: "
                                                f"give one of the two (reasoning_parser: none with reasoning_tags)")
        return self

    @property
    def reasoning_parser_spec(self) -> str | None:
        """What the envs get as ``reasoning_parser``: the spec of ``reasoning_tags`` when set, else
        ``reasoning_parser`` (``None``: not given)."""
        return self.reasoning_tags.spec if self.reasoning_tags is not None else self.reasoning_parser


def options_of(config: Any) -> AgentTuneOptions:
    """The ``agent_tune`` block of a whole composed config (an OmegaConf node, as verl hands it to its workers),
    parsed; the one place the block is read out of a composed config."""
    from omegaconf import OmegaConf

    return parse_options(OmegaConf.select(config, PREFIX, default=None))


def parse_options(mapping: Mapping[str, Any] | None, prefix: str = PREFIX) -> AgentTuneOptions:
    """The ``agent_tune:`` block (a mapping, or an OmegaConf node, resolved; ``None``: every default) as
    :class:`AgentTuneOptions`. Raises :class:`OptionError` (a :class:`~agent_tune.errors.ConfigError`) naming
    ``<prefix>.<key>``: an unknown key (with the known ones), a value of the wrong type (with the value and
    the expected type), a value out of range."""
    return AgentTuneOptions.parse(mapping, prefix)
