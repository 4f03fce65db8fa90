"""One episode's BFCL backend: the bfcl-eval classes instantiated for this episode only.

Calls are dispatched directly to bound methods (``getattr(instance, name)(**arguments)``), never
through ``eval``. Results and errors are rendered exactly as bfcl-eval's engine renders them, so a
model sees the same text here as on the leaderboard.
"""

from __future__ import annotations

import copy
import copyreg
import datetime
import importlib
import inspect
import io
import json
import json.encoder
import pickle
import random
import types
from functools import lru_cache
from typing import Any, Callable

from agent_tune.envs.bfcl.multi_turn.data import BACKEND_MODULES, STATELESS_CLASSES, BFCLDataError, load_entry

# Names bfcl-eval's engine refuses to call, with its message.
_BLOCKED_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})


_JSON = json.JSONEncoder()  # json.dumps's encoder: default options
_C_ENCODER = json.encoder.c_make_encoder  # type: ignore[attr-defined]


def _make_encoder() -> Callable[[Any, int], Any]:
    """``json.dumps``'s encoder, built once instead of at every call: ``encode(value, 0)`` gives the text in
    chunks, ``"".join`` of them is ``json.dumps(value)``.

    The C encoder, built without circular-reference markers (shared ones would make a dict two threads encode at
    once look circular): a circular value then raises RecursionError instead of ValueError, and either way
    :meth:`BFCLBackend.execute` falls back to ``str``, the same text.
    """
    if _C_ENCODER is None:  # no C accelerator: json.dumps itself
        return lambda value, _indent_level: (_JSON.encode(value),)
    return _C_ENCODER(None, _JSON.default, json.encoder.encode_basestring_ascii, None, _JSON.key_separator,
                      _JSON.item_separator, _JSON.sort_keys, _JSON.skipkeys, _JSON.allow_nan)


_encode = _make_encoder()


def format_exception(exc: BaseException) -> str:
    """bfcl-eval's text for a call that raised."""
    return f"Error during execution: {exc}"


_method_names: dict[type, tuple[str, ...]] = {}


def _public_method_names(cls: type, instance: Any) -> tuple[str, ...]:
    """Names of the public bound methods of ``cls`` instances (computed once per class)."""
    names = _method_names.get(cls)
    if names is None:
        names = tuple(n for n, _ in inspect.getmembers(instance, predicate=inspect.ismethod) if not n.startswith("_"))
        _method_names[cls] = names
    return names


def _restore_random(cls: type[random.Random], state: tuple[Any, ...], attrs: dict[str, Any]) -> random.Random:
    """A ``Random`` in exactly the pickled state, built without seeding it first."""
    rng = cls.__new__(cls)
    rng.setstate(state)
    rng.__dict__.update(attrs)
    return rng


# Immutable objects a copy shares with the pristine instances instead of rebuilding them: datetimes (every
# file's modification time, rebuilt by a call each) and strings but short ones (names, attribute names:
# cheaper decoded once per copy, then taken from the pickle's memo, than fetched at each use).
_SHARED_TYPES = (str, datetime.datetime)
_SHARED_MIN_LEN = 16
# Globals, classes and functions, are shared too: unpickling one by name goes through the import system
# (``find_class`` -> ``__import__``), about 20k instructions each, three or more per copy.
_GLOBAL_KINDS = (types.FunctionType, types.BuiltinFunctionType)


class _PristinePickler(pickle.Pickler):
    """Pickles the pristine instances: the same objects as plain pickling, except that a ``Random`` is
    rebuilt without being seeded first, and immutable objects (its state, a tuple of ints that ``setstate``
    copies; datetimes; strings of 16 characters or more; the classes and functions the stream would name) are
    kept out of the stream, in :attr:`shared`, for every copy to use as is."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = {**copyreg.dispatch_table, random.Random: self._reduce_random}
        self.shared: list[Any] = []
        self._shared_ids: dict[int, int] = {}  # id of an object in ``shared`` -> its index

    def _reduce_random(self, rng: random.Random) -> tuple[Any, ...]:
        # Plain pickling rebuilds a Random by calling Random(), which seeds it from os.urandom (~90 us) only
        # for setstate to overwrite that seed; several backends hold one. Its state, 625 ints, would be
        # rebuilt int by int in every copy.
        state = rng.getstate()
        self._shared_ids[id(state)] = len(self.shared)
        self.shared.append(state)
        return _restore_random, (type(rng), state, {k: v for k, v in vars(rng).items() if k != "gauss_next"})

    def persistent_id(self, obj: Any) -> int | None:
        kind = type(obj)
        if kind is tuple:
            return self._shared_ids.get(id(obj))
        if kind in _SHARED_TYPES:
            if kind is str and len(obj) < _SHARED_MIN_LEN:
                return None
        elif not (isinstance(obj, type) or kind in _GLOBAL_KINDS):
            return None
        index = self._shared_ids.get(id(obj))
        if index is None:
            index = self._shared_ids[id(obj)] = len(self.shared)
            self.shared.append(obj)
        return index


_owners_by_classes: dict[tuple[tuple[str, type], ...], dict[str, str]] = {}


def _method_owners(instances: dict[str, Any]) -> dict[str, str]:
    """Public method name -> the class whose instance runs it, resolved as bfcl-eval does: public bound
    methods, a later class winning a name clash (computed once per set of classes; read-only)."""
    key = tuple((class_name, type(instance)) for class_name, instance in instances.items())
    owners = _owners_by_classes.get(key)
    if owners is None:
        owners = {}
        for class_name, instance in instances.items():
            for name in _public_method_names(type(instance), instance):
                owners[name] = class_name
        _owners_by_classes[key] = owners
    return owners


@lru_cache(maxsize=256)
def _pristine_instances(test_id: str) -> tuple[bytes, dict[int, Any], dict[str, str]]:
    """The pristine instances of ``test_id``, pickled, the immutable objects kept out of the stream (by index), and
    their :func:`_method_owners`."""
    entry = load_entry(test_id)
    instances = BFCLBackend(entry.involved_classes, entry.initial_config, entry.long_context).instances
    buffer = io.BytesIO()
    pickler = _PristinePickler(buffer)
    pickler.dump(instances)
    # index -> object: a dict's __getitem__ takes its argument as is, a tuple's builds an argument tuple per call
    return buffer.getvalue(), dict(enumerate(pickler.shared)), _method_owners(instances)


class BFCLBackend:
    """The backend instances of one episode (or of its ground truth), isolated from every other."""

    def __init__(self, involved_classes: list[str], initial_config: dict[str, Any], long_context: bool) -> None:
        instances: dict[str, Any] = {}
        for class_name in involved_classes:
            if class_name not in BACKEND_MODULES:
                raise BFCLDataError(f"unsupported BFCL backend class {class_name!r}")
            cls = getattr(importlib.import_module(BACKEND_MODULES[class_name]), class_name)
            instance = cls()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            instances[class_name] = instance
        self._bind(instances)

    @classmethod
    def for_entry(cls, test_id: str) -> "BFCLBackend":
        """Fresh backend instances in the initial state of ``test_id``.

        Equivalent to building them from the entry's config, about 8x cheaper: the pristine
        instances are built once per entry and kept pickled (bounded cache); every call unpickles
        a new, fully independent copy (only immutable objects are shared).
        """
        blob, shared, owners = _pristine_instances(test_id)
        # a new, independent copy of what _pristine_instances pickled (``shared`` is only read)
        unpickler = pickle.Unpickler(io.BytesIO(blob))
        unpickler.persistent_load = shared.__getitem__
        backend = cls.__new__(cls)
        backend.instances, backend._owners = unpickler.load(), owners  # = _bind(...), the owners shared
        return backend

    def _bind(self, instances: dict[str, Any], owners: dict[str, str] | None = None) -> None:
        self.instances = instances
        self._owners = _method_owners(instances) if owners is None else owners  # read-only, maybe shared

    def _method(self, name: str) -> Callable[..., Any] | None:
        """The bound method a call of ``name`` runs, or None (bound when called: only a few are, per episode)."""
        owner = self._owners.get(name)
        return None if owner is None else getattr(self.instances[owner], name)

    def param_names(self, name: str) -> list[str]:
        """Parameter names of a method in signature order (for positional ground-truth calls)."""
        method = self._method(name)
        if method is None:
            raise KeyError(name)
        return [p for p in inspect.signature(method).parameters]

    def execute(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one call; returns the result text, or bfcl-eval's error text if it raised."""
        if name in _BLOCKED_NAMES:
            return format_exception(Exception(f"Function call {name} is not allowed."))
        owner = self._owners.get(name)  # = self._method(name), inlined: one per call of every step
        if owner is None:
            return format_exception(NameError(f"name '{name}' is not defined"))
        method = getattr(self.instances[owner], name)
        try:
            value = method(**arguments)
            # the value rendered as bfcl-eval renders it: strings as is, dicts as JSON, the rest str
            if type(value) is str:
                return value
            if type(value) is dict:
                try:
                    return "".join(_encode(value, 0))  # = json.dumps(value)
                except Exception:
                    return str(value)
            return str(value)
        except Exception as exc:  # the backend's own errors are observations, as in bfcl-eval
            return format_exception(exc)

    def public_state(self, class_name: str) -> dict[str, Any]:
        """The attributes bfcl-eval's state checker compares (those not starting with ``_``)."""
        return {k: v for k, v in vars(self.instances[class_name]).items() if not k.startswith("_")}
