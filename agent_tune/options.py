"""The ``agent_tune:`` config block, typed: :class:`AgentTuneOptions`, and the checker that validates it.

The block (``config/base/agent_tune.yaml``, plus what the env, recipe, device and async configs add) is read
by the launchers and, in every rollout worker, by the agent loop (``verl_ext/agent_loop.py``).
:func:`parse_options` turns it into :class:`AgentTuneOptions`; ``agent-tune train`` runs it at start-up
(``agent_tune.launch.train.check_options``), so an unknown key or a bad value fails there, naming the key,
and not inside a Ray worker. The agent loop reads the same dataclass.

One generic checker, :func:`check_value`, is driven by type annotations (``typing.get_type_hints``): ``bool``,
``int``, ``float`` (an int is widened), ``str``, ``None``, ``X | Y``, ``Literal[...]`` (the allowed values),
``dict[K, V]`` / ``Mapping``, ``list`` / ``tuple`` / ``Sequence``, and dataclasses (built from a mapping:
unknown keys refused, naming the known ones; each field checked against its annotation; the dataclass's own
``__post_init__`` then checks ranges). Annotations it cannot check (any other class, ``Callable``, ...) are
accepted as they are. Every error is an :class:`OptionError` naming the dotted key, the value and what was
expected. The same checker types the environments' options: :func:`check_arguments` checks constructor
kwargs against the constructor's annotations (``BaseToolEnv.check_kwargs``).

A leaf module: at module level it imports nothing from ``agent_tune`` but :mod:`agent_tune.errors` (the rollout
worker's gc settings, :mod:`agent_tune.rollout.worker_gc`, and the task weighting, :mod:`verl_ext.task_weighting`,
import their dataclasses from here); checking ``reasoning_tags`` imports the tag rule of
:mod:`agent_tune.parsing.reasoning` when it runs.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Union, get_args, get_origin, get_type_hints

from agent_tune.errors import ConfigError

PREFIX = "agent_tune"

# Choices of the block's string options (one Literal each; tests/test_options.py ties each to the table of the
# module that acts on it: agent_tune.launch.launcher, agent_tune.launch.attention, verl_ext.cpu.precision,
# verl_ext.trainers, verl_ext.task_weighting).
ConsoleMode = Literal["quiet", "verbose"]
AttentionFallback = Literal["error", "sdpa"]
CpuPrecision = Literal["auto", "bf16", "fp32"]
TrainerName = Literal["main_ppo", "one_step_off_policy", "fully_async_policy"]
TaskWeightingMode = Literal["sample", "advantage"]


class OptionError(ConfigError):
    """A bad option: ``key`` is its dotted config key (relative, e.g. ``gen2_threshold``, when raised by a
    dataclass's ``__post_init__``; :meth:`under` puts it under its block), ``problem`` what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"config key {key!r}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (Ray) with both fields
        return (type(self), (self.key, self.problem))

    def under(self, prefix: str) -> OptionError:
        """The same error with its key under ``prefix`` (``prefix.key``)."""
        return OptionError(f"{prefix}.{self.key}" if self.key else prefix, self.problem)


# ----------------------------------------------------------------------------------------- the checker
_NONE = type(None)
_SCALARS = (bool, int, float, str)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)


def _is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def checkable(annotation: Any) -> bool:
    """Whether :func:`check_value` checks values of ``annotation`` (else it accepts any value)."""
    if annotation is Any or annotation is _NONE or annotation in _SCALARS or _is_dataclass_type(annotation):
        return True
    origin = get_origin(annotation)
    if _is_union(annotation) or origin is Literal:
        return True
    return (origin or annotation) in _MAPPINGS + _SEQUENCES


def describe(annotation: Any) -> str:
    """``annotation`` as an error message names the expected type: ``int | null``, ``'quiet' | 'verbose'``."""
    if annotation is _NONE:
        return "null"
    if _is_union(annotation):
        return " | ".join(describe(arm) for arm in get_args(annotation))
    if get_origin(annotation) is Literal:
        return " | ".join(repr(choice) for choice in get_args(annotation))
    if _is_dataclass_type(annotation):
        names = ", ".join(f.name for f in dataclasses.fields(annotation) if f.init)
        return f"a mapping {{{names}}}"
    args = get_args(annotation)
    container = get_origin(annotation) or annotation
    name = getattr(container, "__name__", None) or str(container).replace("typing.", "")
    if not args:
        return "Any" if annotation is Any else name
    return f"{name}[{', '.join('...' if a is Ellipsis else describe(a) for a in args)}]"


def _mismatch(key: str, value: Any, annotation: Any) -> OptionError:
    return OptionError(key, f"got {value!r} ({type(value).__name__}), expected {describe(annotation)}")


def check_value(key: str, value: Any, annotation: Any) -> Any:
    """``value`` (a config value, as ``OmegaConf.to_container`` gives it) checked against ``annotation``.

    Returns it, with dataclasses built from mappings, ints widened to float where a float is expected,
    mappings and sequences copied with their items checked. Raises :class:`OptionError` naming ``key`` (or the
    nested key, ``key.field`` / ``key[i]``), the value and the expected type. An annotation it cannot check
    (:func:`checkable`) accepts any value."""
    if annotation is Any or not checkable(annotation):
        return value
    if _is_union(annotation):
        return _check_union(key, value, get_args(annotation))
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        if any(type(value) is type(choice) and value == choice for choice in args):
            return value
        raise OptionError(key, f"{value!r} is not one of {', '.join(map(repr, args))}")
    if annotation is _NONE:
        if value is None:
            return None
        raise _mismatch(key, value, annotation)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _mismatch(key, value, annotation)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _mismatch(key, value, annotation)
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _mismatch(key, value, annotation)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _mismatch(key, value, annotation)
    if _is_dataclass_type(annotation):
        return value if isinstance(value, annotation) else build_dataclass(key, value, annotation)
    container = origin or annotation
    if container in _MAPPINGS:
        if not isinstance(value, Mapping):
            raise _mismatch(key, value, annotation)
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        out = {}
        for item_key, item in value.items():
            check_value(f"{key}.{item_key}", item_key, key_type)
            out[item_key] = check_value(f"{key}.{item_key}", item, value_type)
        return out
    # a sequence: list[X], Sequence[X], tuple[X, ...] or tuple[X, Y]
    if not isinstance(value, (list, tuple)):
        raise _mismatch(key, value, annotation)
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            raise _mismatch(key, value, annotation)
        item_types = args
    else:
        item_types = (args[0] if args else Any,) * len(value)
    items = [check_value(f"{key}[{i}]", item, item_type) for i, (item, item_type) in enumerate(zip(value, item_types))]
    return tuple(items) if container is tuple else items


def _check_union(key: str, value: Any, arms: tuple[Any, ...]) -> Any:
    """The first arm ``value`` fits, trying plain types before dataclasses (a mapping stays a mapping where
    the union allows one); else any value when an arm is uncheckable, else the error of the arm that got
    deepest (a dataclass arm refusing a field names that field), else a mismatch naming every arm."""
    ordered = sorted((arm for arm in arms if checkable(arm)), key=_is_dataclass_type)
    deeper: OptionError | None = None
    for arm in ordered:
        try:
            return check_value(key, value, arm)
        except OptionError as exc:
            if deeper is None and exc.key != key:
                deeper = exc
    if len(ordered) < len(arms):
        return value
    if deeper is not None:
        raise deeper
    raise _mismatch(key, value, Union[arms])


@functools.lru_cache(maxsize=None)
def _field_hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def build_dataclass(key: str, raw: Any, cls: type) -> Any:
    """The dataclass ``cls`` from the mapping ``raw`` at config key ``key``: an unknown key is refused naming
    ``key.<unknown>`` and the known keys, a missing required one naming it; each value is checked against its
    field's annotation, then ``cls`` is constructed (its ``__post_init__``'s :class:`OptionError` put under
    ``key``, another ``ValueError`` / ``TypeError`` reported at ``key``)."""
    init_fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in init_fields]
    if not isinstance(raw, Mapping):
        raise _mismatch(key, raw, cls)
    unknown = [name for name in raw if name not in names]
    if unknown:
        raise OptionError(f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(names)})")
    for f in init_fields:
        if f.name not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise OptionError(f"{key}.{f.name}", "required, missing")
    hints = _field_hints(cls)
    values = {name: check_value(f"{key}.{name}", raw[name], hints.get(name, Any)) for name in names if name in raw}
    try:
        return cls(**values)
    except OptionError as exc:
        raise exc.under(key) from None
    except (TypeError, ValueError) as exc:
        raise OptionError(key, str(exc)) from None


def check_fields(obj: Any) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation (for a ``__post_init__``:
    direct construction is checked as parsing is); converted values (an int widened to float, a mapping built
    into its dataclass) are stored back. :class:`OptionError` names the field (relative key)."""
    hints = _field_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        checked = check_value(f.name, value, hints.get(f.name, Any))
        if checked is not value:
            object.__setattr__(obj, f.name, checked)


def callable_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The parameter annotations of ``func``, evaluated; one that does not evaluate (a name imported only for
    type checking) is left out, so it is not checked."""
    try:
        return {k: v for k, v in get_type_hints(func).items() if k != "return"}
    except Exception:  # noqa: BLE001 - fall back to evaluating each annotation on its own
        pass
    hints: dict[str, Any] = {}
    namespace = getattr(func, "__globals__", {})
    for name, annotation in getattr(func, "__annotations__", {}).items():
        if name == "return":
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - the function's own source annotation
            except Exception:  # noqa: BLE001
                continue
        hints[name] = annotation
    return hints


def check_arguments(func: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Each of ``kwargs`` checked against ``func``'s annotation of that parameter (:func:`check_value`;
    :class:`OptionError` keyed by the parameter's name). Names ``func`` does not take are not checked here."""
    hints = callable_hints(func)
    for name, value in kwargs.items():
        if name in hints:
            check_value(name, value, hints[name])


# ----------------------------------------------------------------------------------------- the block
@dataclass(frozen=True)
class WorkerGC:
    """``agent_tune.worker_gc`` (:mod:`agent_tune.rollout.worker_gc`): freeze the start-up heap; the gen-2
    threshold (``None``: Python's)."""

    freeze: bool = False
    gen2_threshold: int | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.gen2_threshold is not None and self.gen2_threshold < 1:
            raise OptionError("gen2_threshold", f"a positive integer, or null for Python's (10), got "
                                                f"{self.gen2_threshold!r}")


TASK_WEIGHTING_KEY = f"{PREFIX}.task_weighting"


@dataclass(frozen=True)
class TaskWeightingConfig:
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

    def __post_init__(self) -> None:
        check_fields(self)
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

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> TaskWeightingConfig:
        """From the config's ``agent_tune.task_weighting`` mapping (``None``: disabled)."""
        return cls() if raw is None else check_value(TASK_WEIGHTING_KEY, raw, cls)


@dataclass(frozen=True)
class ReasoningTags:
    """``agent_tune.reasoning_tags`` (T3RL's ``think_start_token`` / ``think_end_token``): the reasoning block's
    tags, for a model family without a named reasoning parser; the envs get the reasoning parser spec
    ``tags:start=<start>,end=<end>`` (:class:`agent_tune.parsing.TagReasoningParser`). ``opened_in_prompt``: the
    chat template opens the block in the prompt, so an untagged response is unfinished reasoning."""

    start: str
    end: str
    opened_in_prompt: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        from agent_tune.parsing.reasoning import tags_problem  # the parser's own rule; no parser at module level

        problem = tags_problem(self.start, self.end)
        if problem is not None:
            raise OptionError(*problem)

    @property
    def spec(self) -> str:
        """The reasoning parser spec of these tags (what ``get_reasoning_parser`` reads)."""
        from agent_tune.parsing.reasoning import tags_spec

        return tags_spec(self.start, self.end, self.opened_in_prompt)


@dataclass(frozen=True)
class DebugModes:
    """``agent_tune.debug`` (T3RL's debugging modes; :mod:`agent_tune.launch.debug_modes`, docs/debugging.md):
    ``rollout_only`` plays the training rows as training samples them, dumps every sample to ``dump_dir``
    (``None``: ``<trainer.default_local_dir>/rollout_dump``) and skips the update; ``replay`` trains on the samples
    a rollout-only run dumped to ``replay_dir``, step by step, instead of generating. At most one of the two."""

    rollout_only: bool = False
    dump_dir: str | None = None
    replay: bool = False
    replay_dir: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.rollout_only and self.replay:
            raise OptionError("replay", "set together with rollout_only: a run either dumps rollouts or replays them")
        if self.replay and not self.replay_dir:
            raise OptionError("replay_dir", "replay needs the folder a rollout-only run dumped to (its dump_dir)")
        if self.replay_dir and not self.replay:
            raise OptionError("replay", f"false while replay_dir={self.replay_dir!r}: set true to replay that "
                                        "dump (+debug=replay does), or drop replay_dir")

    @property
    def active(self) -> bool:
        """Whether a debugging mode is on."""
        return self.rollout_only or self.replay


@dataclass(frozen=True)
class AgentTuneOptions:
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
    trainer: TrainerName | None = None  # None: main_ppo
    # the agent loop
    template: str | None = None  # None (or ""): the tokenizer's own
    chat_template_kwargs: dict[str, Any] | None = field(default_factory=dict)
    tool_parser: str | None = None  # None: not given to the envs
    reasoning_parser: str | None = None  # a name, or a spec such as tags:start=<S>,end=<E>
    reasoning_tags: ReasoningTags | None = None  # set: the reasoning parser is these tags (reasoning_parser none)
    max_generations: int | None = None
    env_kwargs: dict[str, dict[str, Any] | None] | None = field(default_factory=dict)
    worker_gc: WorkerGC | None = field(default_factory=WorkerGC)
    debug_drift: bool = False
    dump_rollouts_dir: str | None = None
    dump_rollout_tokens: bool = False
    metrics_file: str | None = None
    sample_metrics_dir: str | None = None
    task_weighting: TaskWeightingConfig | None = field(default_factory=TaskWeightingConfig)
    debug: DebugModes | None = field(default_factory=DebugModes)  # None: no debugging mode

    def __post_init__(self) -> None:
        check_fields(self)
        if self.max_generations is not None and self.max_generations < 1:
            raise OptionError("max_generations", f"must be >= 1, or null for no limit, got {self.max_generations!r}")
        if self.reasoning_tags is not None and self.reasoning_parser not in (None, "none"):
            raise OptionError("reasoning_tags", f"set together with reasoning_parser={self.reasoning_parser!r}: "
                                                f"give one of the two (reasoning_parser: none with reasoning_tags)")
        for name, empty in (("chat_template_kwargs", dict), ("env_kwargs", dict), ("worker_gc", WorkerGC),
                            ("task_weighting", TaskWeightingConfig), ("debug", DebugModes)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, empty())

    @property
    def reasoning_parser_spec(self) -> str | None:
        """What the envs get as ``reasoning_parser``: the spec of ``reasoning_tags`` when set, else
        ``reasoning_parser`` (``None``: not given)."""
        return self.reasoning_tags.spec if self.reasoning_tags is not None else self.reasoning_parser


def parse_options(mapping: Mapping[str, Any] | None, prefix: str = PREFIX) -> AgentTuneOptions:
    """The ``agent_tune:`` block (a mapping, or an OmegaConf node, resolved; ``None``: every default) as
    :class:`AgentTuneOptions`. Raises :class:`OptionError` (a :class:`~agent_tune.errors.ConfigError`) naming
    ``<prefix>.<key>``: an unknown key (with the known ones), a value of the wrong type (with the value and
    the expected type), a value out of range."""
    if mapping is None:
        return AgentTuneOptions()
    from omegaconf import OmegaConf

    if OmegaConf.is_config(mapping):
        mapping = OmegaConf.to_container(mapping, resolve=True)
    return check_value(prefix, mapping, AgentTuneOptions)
