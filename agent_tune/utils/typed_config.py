"""The one typed-configuration mechanism: :class:`ConfigModel` (pydantic v2) and :class:`OptionError`.

Every option block of agent-tune (the ``agent_tune:`` block and its sub-blocks, an env's options, a reward's
config, a curriculum's stages) is a :class:`ConfigModel` subclass defined next to the code that reads it.
A model is strict (``"3"`` is not an int, ``1`` is not a bool; an int is widened where a float is expected),
refuses unknown keys and is frozen; a field that OmegaConf fills with a list is annotated ``list[...]``.
Range rules are ``model_validator(mode="after")`` methods raising :class:`OptionError` with the field's
relative key.

Whatever fails, construction (``Model(**kwargs)``) and parsing (``Model.parse(raw, key)``) raise one
:class:`OptionError` naming the dotted key and what was wrong, as the launchers print it::

    config key 'agent_tune.worker_gc.freeze': got 'yes' (str), expected bool
    config key 'agent_tune.max_generation': unknown key (known: model_cache_dir, ...)
    config key 'agent_tune.console': 'loud' is not one of 'quiet', 'verbose'

:func:`check_value` checks one value against any annotation the same way (an env constructor's parameter,
:func:`check_arguments`), a list and a tuple standing for each other there; an annotation pydantic cannot build
a schema for is accepted as it is.
"""

from __future__ import annotations

import collections.abc
import functools
import types
from typing import Annotated, Any, Callable, ClassVar, Literal, Mapping, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Strict, TypeAdapter, ValidationError

from agent_tune.errors import ConfigError


class OptionError(ConfigError):
    """A bad option: ``key`` is its dotted config key (relative, e.g. ``gen2_threshold``, when raised by a
    model's validator; :meth:`under` puts it under its block), ``problem`` what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"config key {key!r}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (Ray) with both fields
        return (type(self), (self.key, self.problem))

    def under(self, prefix: str) -> OptionError:
        """The same error with its key under ``prefix`` (``prefix.key``)."""
        if not prefix:
            return self
        return OptionError(f"{prefix}.{self.key}" if self.key else prefix, self.problem)


_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


class ConfigModel(BaseModel):
    """A typed option block: strict, unknown keys refused, frozen; errors are :class:`OptionError`.

    ``Model(**values)`` checks as parsing does; :meth:`parse` builds one from a config mapping (an OmegaConf
    node is resolved first; ``None``: every default) and names errors under ``key``."""

    model_config: ClassVar[ConfigDict] = ConfigDict(strict=True, extra="forbid", frozen=True,
                                                    arbitrary_types_allowed=True)
    # How this block words an unknown key ({key}: that key, {known}: the block's keys); a block whose callers
    # read an older wording keeps it here.
    unknown_key_problem: ClassVar[str] = "unknown key (known: {known})"

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise option_error(exc, type(self), "") from None

    @classmethod
    def parse(cls, raw: Any, key: str = "") -> Any:
        """``raw`` (a mapping, an OmegaConf node, an instance, or ``None`` for every default) as this model;
        :class:`OptionError` names ``key.<field>``."""
        if raw is None:
            return cls()
        if isinstance(raw, cls):
            return raw
        return check_value(key, _plain(raw), cls)


def _plain(value: Any) -> Any:
    """An OmegaConf node as plain containers, resolved; anything else as it is."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - omegaconf comes with hydra
        return value
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


# ----------------------------------------------------------------------------------------- annotations
_NONE = type(None)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_LEAVES = (Any, _NONE, bool, int, float, str)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _strip(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[...]`` metadata."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def checked_form(annotation: Any) -> Any:
    """``annotation`` as :func:`check_value` checks it: any list / tuple type accepts a list or a tuple (items stay
    strict), and a part it has no rule for (a class that is not a :class:`ConfigModel`, ``Callable``, an
    unresolved name) is ``Any``, so a union holding one accepts any value; the same object when nothing
    changes."""
    annotation_ = _strip(annotation)
    if annotation_ in _LEAVES or annotation_ is None or _is_model(annotation_):
        return annotation
    origin, args = get_origin(annotation_), get_args(annotation_)
    if origin is Literal:
        return annotation
    if _is_union(annotation_):
        arms = tuple(checked_form(arm) for arm in args)
        return annotation if all(a is b for a, b in zip(arms, args)) else Union[arms]
    container = origin or annotation_
    if container not in _SEQUENCES + _MAPPINGS:
        return Any
    if not args:
        return Annotated[annotation_, Strict(False)] if container in (list, tuple) else annotation
    inner = tuple(arg if arg is Ellipsis else checked_form(arg) for arg in args)
    rebuilt = annotation_ if all(a is b for a, b in zip(inner, args)) else _subscript(origin, inner)
    if container in (list, tuple):  # a strict abstract Sequence already takes both, and refuses a str
        return Annotated[rebuilt, Strict(False)]
    return rebuilt


def _subscript(origin: Any, args: tuple[Any, ...]) -> Any:
    try:
        return origin[args]
    except TypeError:  # a typing alias whose origin does not subscript: leave it as it was
        return origin


def describe(annotation: Any) -> str:
    """``annotation`` as an error names the expected type: ``int | null``, ``'quiet' | 'verbose'``."""
    annotation = _strip(annotation)
    if annotation is _NONE or annotation is None:
        return "null"
    if _is_union(annotation):
        return " | ".join(describe(arm) for arm in get_args(annotation))
    if get_origin(annotation) is Literal:
        return " | ".join(repr(choice) for choice in get_args(annotation))
    if _is_model(annotation):
        return f"a mapping {{{', '.join(annotation.model_fields)}}}"
    args = get_args(annotation)
    container = get_origin(annotation) or annotation
    name = getattr(container, "__name__", None) or str(container).replace("typing.", "")
    if not args:
        return "Any" if annotation is Any else name
    return f"{name}[{', '.join('...' if a is Ellipsis else describe(a) for a in args)}]"


# ----------------------------------------------------------------------------------------- checking values
@functools.lru_cache(maxsize=512)
def _adapter(annotation: Any) -> TypeAdapter | None:
    form = checked_form(annotation)
    if form is Any:
        return None
    try:
        if _is_model(annotation):
            return TypeAdapter(annotation)
        return TypeAdapter(form, config=_STRICT)
    except Exception:  # noqa: BLE001 - an annotation pydantic has no schema for: not checked
        return None


def check_value(key: str, value: Any, annotation: Any) -> Any:
    """``value`` checked against ``annotation`` (strict, as :class:`ConfigModel` fields are); returns it
    validated (models built from mappings, ints widened to float). Raises :class:`OptionError` naming ``key``
    (or the nested key, ``key.field`` / ``key[i]``), the value and the expected type."""
    if annotation is Any:
        return value
    try:
        adapter = _adapter(annotation)
    except TypeError:  # unhashable annotation
        adapter = None
    if adapter is None:
        return value
    literal = _strip(annotation)
    if get_origin(literal) is Literal and not any(type(value) is type(c) and value == c for c in get_args(literal)):
        raise OptionError(key, f"{value!r} is not one of {', '.join(map(repr, get_args(literal)))}")  # True is not 1
    try:
        checked = adapter.validate_python(value)
    except ValidationError as exc:
        raise option_error(exc, annotation, key) from None
    except OptionError as exc:  # raised directly by a nested model's own check
        raise exc.under(key) from None
    if isinstance(value, list) and isinstance(checked, tuple) and get_origin(_strip(annotation)) is not tuple:
        return list(checked)
    return checked


def callable_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The parameter annotations of ``func``, evaluated; one that does not evaluate (a name imported only for
    type checking) is left out, so it is not checked."""
    try:
        return {k: v for k, v in get_type_hints(func, include_extras=True).items() if k != "return"}
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


# ----------------------------------------------------------------------------------------- errors
def option_error(exc: ValidationError, annotation: Any, key: str) -> OptionError:
    """The one :class:`OptionError` a :class:`ValidationError` of ``annotation`` at ``key`` reports: the error
    whose key goes deepest (a model refusing a field names that field, not the union around it)."""
    best: tuple[int, OptionError] | None = None
    for error in exc.errors(include_url=False):
        path, at, parent = _walk(annotation, error["loc"])
        option = _describe_error(error, _join(key, path), at, parent)
        depth = option.key.count(".") + option.key.count("[")
        if best is None or depth > best[0]:
            best = (depth, option)
    assert best is not None  # a ValidationError holds at least one error
    return best[1]


def _join(key: str, path: list[str]) -> str:
    out = key
    for part in path:
        out = f"{out}{part}" if part.startswith("[") else (f"{out}.{part}" if out else part)
    return out


def _walk(annotation: Any, loc: tuple[Any, ...]) -> tuple[list[str], Any, Any]:
    """Follow pydantic's ``loc`` through ``annotation``: the key path (union arm tags dropped), the annotation
    found there and the one around it."""
    path: list[str] = []
    current, parent = annotation, None
    items = list(loc)
    while items:
        part = items.pop(0)
        current_ = _strip(current)
        if _is_union(current_):
            arms = [a for a in get_args(current_) if a is not _NONE]
            if len(arms) == 1:
                current = arms[0]
                items.insert(0, part)
                continue
            arm = _union_arm(arms, part, items)
            if arm is None:  # the tag names no arm we can follow: stop at the union
                break
            current = arm
            continue
        parent = current
        if _is_model(current_):
            field = current_.model_fields.get(part)
            path.append(str(part))
            current = field.annotation if field is not None else Any
        elif (get_origin(current_) or current_) in _MAPPINGS:
            args = get_args(current_)
            path.append(str(part))
            current = args[1] if len(args) == 2 else Any
        elif (get_origin(current_) or current_) in _SEQUENCES and isinstance(part, int):
            args = get_args(current_)
            path.append(f"[{part}]")
            if get_origin(current_) is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
                current = args[part] if part < len(args) else Any
            else:
                current = args[0] if args else Any
        else:
            break
    return path, current, parent


def _union_arm(arms: list[Any], tag: Any, rest: list[Any]) -> Any:
    """The arm of a union pydantic's arm ``tag`` names: a model by class name, else the first arm whose shape
    fits what follows (a mapping for a key, a sequence for an index), else a scalar arm by type name."""
    for arm in arms:
        arm_ = _strip(arm)
        if _is_model(arm_) and tag == arm_.__name__:
            return arm
    nxt = rest[0] if rest else None
    for arm in arms:
        container = get_origin(_strip(arm)) or _strip(arm)
        if rest and isinstance(nxt, str) and container in _MAPPINGS and str(tag).startswith("dict"):
            return arm
        if rest and isinstance(nxt, int) and container in _SEQUENCES and not str(tag).startswith("dict"):
            return arm
    if not rest:
        for arm in arms:
            if getattr(_strip(arm), "__name__", None) == tag:
                return arm
    return None


def _describe_error(error: Mapping[str, Any], key: str, at: Any, parent: Any) -> OptionError:
    kind, value = error["type"], error.get("input")
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, OptionError):  # a model's own range check, keyed relative to the model
        return cause.under(key)
    if kind == "extra_forbidden":
        model = _strip(parent)
        if not _is_model(model) or not model.model_fields:
            return OptionError(key, "unknown key")
        template = getattr(model, "unknown_key_problem", ConfigModel.unknown_key_problem)
        return OptionError(key, template.format(key=error["loc"][-1], known=", ".join(model.model_fields)))
    if kind == "missing":
        return OptionError(key, "required, missing")
    if kind in ("value_error", "assertion_error") and cause is not None:
        return OptionError(key, str(cause))
    if kind == "literal_error" and get_origin(_strip(at)) is Literal:
        choices = ", ".join(map(repr, get_args(_strip(at))))
        return OptionError(key, f"{value!r} is not one of {choices}")
    if at is Any or at is None:
        return OptionError(key, error.get("msg", "invalid value"))
    return OptionError(key, f"got {value!r} ({type(value).__name__}), expected {describe(at)}")
