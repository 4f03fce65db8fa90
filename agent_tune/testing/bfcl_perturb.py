"""Deterministic model outputs for a BFCL single-turn entry: its possible answer, and variations of it.

The right answer is :func:`~agent_tune.envs.bfcl.single_turn.task.reference_calls` (first accepted value per
parameter; also the second and the last). Every variation is derived from the entry alone (no randomness),
so a failing case names itself by the entry id and the variation's label.

Used by the agreement test and by ``benchmarks/ast_scoring.py``.
"""

from __future__ import annotations

import copy
from typing import Any, Iterator

from agent_tune.envs.bfcl.single_turn.entries import SingleTurnEntry
from agent_tune.envs.bfcl.single_turn.task import reference_calls

Calls = Any  # [{name: {param: value}}], or something malformed on purpose


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "zz"
    if isinstance(value, list):
        return value + [value[0]] if value else ["zz"]
    if isinstance(value, dict):
        if not value:
            return {"zz": 1}
        key = next(iter(value))
        return {**value, key: _changed(value[key])}
    return "zz"


def _value_variants(value: Any) -> Iterator[tuple[str, Any]]:
    """Type, case, spacing and container variants of one value."""
    yield "changed", _changed(value)
    if isinstance(value, bool):
        yield "int_for_bool", int(value)
        yield "str_for_bool", str(value).lower()
    elif isinstance(value, int):
        yield "float_for_int", float(value)
        yield "str_for_int", str(value)
        yield "bool_for_int", bool(value)
    elif isinstance(value, float):
        yield "int_for_float", int(value)
        yield "str_for_float", str(value)
    elif isinstance(value, str):
        yield "upper", value.upper()
        yield "swapcase", value.swapcase()
        yield "padded", f" {value} "
        yield "no_spaces", value.replace(" ", "")
        yield "tabs", value.replace(" ", "\t")
        yield "punct", value + "."
        yield "semicolons", value.replace(",", ";")
        yield "quote", value.replace('"', "'") + "'"
        yield "empty", ""
        if value.strip().lstrip("-").replace(".", "", 1).isdigit():
            yield "number_for_str", float(value) if "." in value else int(value)
    elif isinstance(value, list):
        yield "tuple", tuple(value)
        yield "reversed", value[::-1]
        yield "dropped_item", value[:-1]
        yield "empty_list", []
        yield "items_upper", [v.upper() if isinstance(v, str) else v for v in value]
        yield "items_float", [float(v) if type(v) is int else v for v in value]
        yield "items_int", [int(v) if type(v) is float else v for v in value]
        yield "items_str", [str(v) for v in value]
        yield "nested_dict_changed", [_changed(v) if isinstance(v, dict) else v for v in value]
        yield "nested_dict_dropped_key", [dict(list(v.items())[1:]) if isinstance(v, dict) else v for v in value]
        yield "str_for_list", str(value)
    elif isinstance(value, dict):
        yield "dropped_key", dict(list(value.items())[1:])
        yield "extra_key", {**value, "zz_key": 1}
        yield "values_upper", {k: v.upper() if isinstance(v, str) else v for k, v in value.items()}
        yield "values_padded", {k: f" {v} " if isinstance(v, str) else v for k, v in value.items()}
        yield "list_for_dict", [value]
        yield "str_for_dict", str(value)
    elif value is None:
        yield "none_str", "None"


def _dummy(spec: dict[str, Any]) -> Any:
    return {"string": "zz", "integer": 3, "float": 2.5, "boolean": True, "array": ["zz"], "tuple": ["zz"],
            "dict": {"zz": 1}}.get(spec.get("type"), "zz")


def variants(entry: SingleTurnEntry) -> Iterator[tuple[str, Calls]]:
    """(label, model output) pairs for one entry: right answers and near misses."""
    if entry.possible_answer is None:
        first = entry.functions[0] if entry.functions else {"name": "zz_func", "parameters": {"properties": {}}}
        yield "no_call", []
        yield "undecodable", None
        yield "empty_call", [{}]
        yield "call_first", [{first["name"]: {}}]
        yield "call_with_args", [{first["name"]: {p: _dummy(s) for p, s in first["parameters"]["properties"].items()}}]
        yield "two_calls", [{doc["name"]: {}} for doc in entry.functions[:2]]
        yield "text", "no call here"
        yield "bad_args", [{first["name"]: "x"}]
        return
    base = reference_calls(entry.functions, entry.possible_answer)
    docs = {doc["name"]: doc for doc in entry.functions}
    yield "answer", base
    yield "answer_last_alternatives", reference_calls(entry.functions, entry.possible_answer, pick=99)
    yield "answer_second_alternatives", reference_calls(entry.functions, entry.possible_answer, pick=1)
    yield "no_call", []
    yield "undecodable", None
    yield "text", "I cannot help"
    yield "empty_call", [{}]
    yield "two_keys", [{**base[0], "zz_func": {}}]
    yield "args_not_dict", [{next(iter(base[0])): ["x"]}]
    yield "reversed", base[::-1]
    yield "dropped_last", base[:-1]
    yield "duplicated_first", base + [copy.deepcopy(base[0])]
    yield "doubled", base + copy.deepcopy(base)
    if len(base) > 1:
        yield "rotated", base[1:] + base[:1]
    for k, call in enumerate(base[:4]):
        name, args = next(iter(call.items()))
        answer = next(iter(entry.possible_answer[k].values()))
        doc = docs.get(name, {"parameters": {"properties": {}, "required": []}})
        props, required = doc["parameters"]["properties"], doc["parameters"].get("required", [])

        def put(new_name: str, new_args: Any) -> list[dict[str, Any]]:
            out = copy.deepcopy(base)
            out[k] = {new_name: new_args}
            return out

        yield f"{k}:renamed", put(name + "_v2", args)
        yield f"{k}:name_upper", put(name.upper(), args)
        if "." in name:
            yield f"{k}:dots_to_underscores", put(name.replace(".", "_"), args)
        others = [d for d in docs if d != name]
        if others:
            yield f"{k}:other_function", put(others[0], args)
        yield f"{k}:extra_param", put(name, {**args, "zz_extra": 1})
        yield f"{k}:no_args", put(name, {})
        yield f"{k}:no_optionals", put(name, {p: v for p, v in args.items() if "" not in answer.get(p, [])})
        absent = [p for p in props if p not in args]
        if absent:
            yield f"{k}:doc_param_added", put(name, {**args, absent[0]: _dummy(props[absent[0]])})
        for p, v in args.items():
            kind = "required" if p in required else "optional"
            yield f"{k}:{p}:dropped_{kind}", put(name, {q: w for q, w in args.items() if q != p})
            for label, new in _value_variants(v):
                yield f"{k}:{p}:{label}", put(name, {**args, p: new})
