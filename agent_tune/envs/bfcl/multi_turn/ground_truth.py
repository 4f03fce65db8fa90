"""The ground-truth trace of an entry: what its ground truth returns and leaves behind, turn by turn.

The ground truth is deterministic (its backends are seeded), so its trace is computed once per
entry and shared read-only by every episode of that entry: results per call, whether each call
respects the tool schema visible at its turn, and a deep copy of every instance's public state
after each turn. A bounded cache keeps memory flat however many entries are played.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agent_tune.envs.bfcl.calls import parse_call_string, syntax_error_text, to_call_string
from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend, format_exception
from agent_tune.envs.bfcl.multi_turn.data import load_entry
from agent_tune.envs.bfcl.schema import tools_by_turn, validate_arguments
from agent_tune.parsing import ToolCall

RunKey = tuple[str, tuple[str, ...], str]


def run_key(call: ToolCall, call_string: str) -> RunKey:
    """What identifies a call as the backends run it: the function, its argument names in order, and its BFCL call
    string (``to_call_string``). Equal keys mean the same method called with the same arguments, type for type (the
    string holds each value's ``repr``: ``1``, ``1.0`` and ``True`` differ; and, the names being given apart, the
    string determines every value, whatever the names hold)."""
    return call.name, tuple(call.arguments), call_string


@dataclass(frozen=True)
class GroundTruthTurn:
    """One turn of the ground truth: its calls' results, which of them a schema-respecting policy
    can reproduce (``schema_valid``), and the public state of every instance after the turn."""

    calls: tuple[str, ...]
    results: tuple[str, ...]
    schema_valid: tuple[bool, ...]
    state: dict[str, dict[str, Any]]
    # every call the ground truth has run on its backends up to the end of this turn, in order (run_key)
    history: tuple[RunKey, ...] = ()
    # the response check's multisets (computed once; read-only): every result (BFCL's), the schema-valid calls' ones
    required_all: Counter[str] = field(init=False, repr=False, compare=False)
    required_valid: Counter[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "required_all", Counter(self.required_results(True)))
        object.__setattr__(self, "required_valid", Counter(self.required_results(False)))

    def required_results(self, all_required: bool) -> list[str]:
        """Results the response check requires: all of them (BFCL), or the schema-valid ones."""
        return [r for r, ok in zip(self.results, self.schema_valid) if all_required or ok]

    def required_counts(self, all_required: bool) -> Counter[str]:
        """:meth:`required_results` as a multiset: :attr:`required_all` or :attr:`required_valid`."""
        return self.required_all if all_required else self.required_valid


def _run(test_id: str) -> tuple[GroundTruthTurn, ...]:
    entry = load_entry(test_id)
    backend = BFCLBackend(entry.involved_classes, entry.initial_config, entry.long_context)
    visible_by_turn = tools_by_turn(entry.functions, entry.missed_function, entry.num_turns)
    turns = []
    history: list[RunKey] = []
    for turn, strings in enumerate(entry.ground_truth):
        results, valid = [], []
        for text in strings:
            error = syntax_error_text(text)
            if error is not None:  # bfcl-eval's engine fails to eval it: that error is the result
                results.append(format_exception(SyntaxError(error)))
                valid.append(False)
                continue
            call = parse_call_string(text, backend.param_names)
            results.append(backend.execute(call.name, call.arguments))
            history.append(run_key(call, to_call_string(call)))
            tool = visible_by_turn[turn].get(call.name)
            valid.append(tool is not None and not validate_arguments(tool, call.arguments))
        state = {name: copy.deepcopy(backend.public_state(name)) for name in backend.instances}
        if turns:
            state = _share_unchanged(turns[-1].state, state)
        turns.append(GroundTruthTurn(tuple(strings), tuple(results), tuple(valid), state, tuple(history)))
    return tuple(turns)


_State = dict[str, dict[str, Any]]  # class -> public attribute -> value


def _share_unchanged(previous: _State, state: _State) -> _State:
    """``state`` with every part equal (as the state check compares: ``!=``) to the previous turn's part at the same
    place replaced by that object: an attribute, then within it a dict's value by key, a list's item by index, an
    object's attribute by name (:func:`_shared`). The verdicts are the same (that equality is transitive: parts of
    one type, compared structurally), the trace is smaller, and a turn's state check walks objects the previous
    turn's check has just walked, still in the CPU's caches: a file system changed in one folder shares every other
    folder and file with the turn before."""
    shared: _State = {}
    for name, attrs in state.items():
        before = previous.get(name, {})
        shared[name] = {attr: _shared(before[attr], value, set()) if attr in before else value
                        for attr, value in attrs.items()}  # an attribute new this turn has nothing to share
    return shared


def _shared(previous: Any, value: Any, walking: set[int]) -> Any:
    """``previous`` when it equals ``value`` (same type, not ``!=``), else ``value`` with its parts shared the same way,
    in place (``value`` is the trace's own deep copy). ``walking``: the ids of the objects whose parts are being
    shared, so that a back-reference to one of them (a folder's ``parent``) is left as it is."""
    if id(value) in walking or type(previous) is not type(value):
        return value
    if not previous != value:
        return previous
    if type(value) is list:
        target, before, keys = value, previous, range(min(len(value), len(previous)))
    else:
        if type(value) is dict:
            target, before = value, previous
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            target, before = vars(value), vars(previous)
        else:
            return value
        keys = [key for key in target if key in before]  # a part new this turn has nothing to share
    walking.add(id(value))
    for key in keys:
        target[key] = _shared(before[key], target[key], walking)
    walking.discard(id(value))
    return value


@lru_cache(maxsize=256)
def ground_truth_trace(test_id: str) -> tuple[GroundTruthTurn, ...]:
    """The (cached, read-only) ground-truth trace of ``test_id``."""
    return _run(test_id)
