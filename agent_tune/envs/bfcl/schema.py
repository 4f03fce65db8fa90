"""BFCL's function-doc dialect -> JSON-schema tools, and argument validation against them.

BFCL docs use ``"dict"`` for objects, ``"float"`` for numbers and may use ``"tuple"``/``"any"``; they
also carry a ``"response"`` key. Tools are shown to the policy in the OpenAI form
``{"type": "function", "function": {"name", "description", "parameters"}}`` with standard types.
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any, Mapping

from agent_tune.parsing.types import ParsedResponse
from agent_tune.rewards.bfcl import syntax_grade_of

_TYPE_MAP = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
}


def _convert(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "type" and isinstance(value, str):
                mapped = _TYPE_MAP.get(value, value)
                if mapped == "any":
                    continue  # no constraint
                out[key] = mapped
            elif key == "properties" and isinstance(value, dict):
                out[key] = {name: _convert(sub) for name, sub in value.items()}
            else:
                out[key] = _convert(value)
        return out
    if isinstance(node, list):
        return [_convert(v) for v in node]
    return node


def tool_name(tool: dict[str, Any]) -> str:
    return tool["function"]["name"]


def tools_by_turn(
    tools: list[dict[str, Any]], missed: dict[int, list[dict[str, Any]]], num_turns: int
) -> list[dict[str, dict[str, Any]]]:
    """Name -> tool visible at each turn: the initial tools plus held-back ones from their turn on."""
    visible = {tool_name(t): t for t in tools}
    out = []
    for turn in range(num_turns):
        visible.update((tool_name(t), t) for t in missed.get(turn, []))
        out.append(dict(visible))
    return out


def to_tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """Convert one BFCL function doc to an OpenAI-style tool (the ``response`` key is dropped)."""
    params = _convert(copy.deepcopy(doc.get("parameters") or {"type": "dict", "properties": {}}))
    params["type"] = "object"
    params.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": doc["name"], "description": doc.get("description", ""), "parameters": params},
    }


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_name(value: Any) -> str:
    for name, types in (("boolean", (bool,)), ("integer", (int,)), ("number", (float,)), ("string", (str,)),
                        ("array", (list,)), ("object", (dict,)), ("null", (type(None),))):
        if isinstance(value, types):
            return name
    return type(value).__name__


def _check(value: Any, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    expected = schema.get("type")
    if expected is not None:
        options = expected if isinstance(expected, list) else [expected]
        ok = False
        for opt in options:
            types = _PY_TYPES.get(opt)
            if types is None:
                ok = True  # unknown type keyword: no constraint
            elif isinstance(value, types) and not (opt in ("integer", "number") and isinstance(value, bool)):
                ok = True
            if ok:
                break
        if not ok:
            errors.append(f"argument '{path}' must be of type {'/'.join(options)}, got {_type_name(value)} {value!r}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"argument '{path}' must be one of {schema['enum']!r}, got {value!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", errors)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict) and schema["properties"]:
        for key, sub in value.items():
            if key in schema["properties"]:
                _check(sub, schema["properties"][key], f"{path}.{key}", errors)


def validate_arguments(tool: dict[str, Any], arguments: Any) -> list[str]:
    """Check ``arguments`` against a tool's parameter schema; returns readable errors (empty if valid).

    Top level: every required parameter present, no unknown parameter, each value of the declared
    type (integers are not booleans; numbers accept integers). Nested arrays/objects are checked
    where the schema describes them.
    """
    function = tool["function"]
    params = function["parameters"]
    name = function["name"]
    if not isinstance(arguments, dict):
        return [f"arguments of '{name}' must be a JSON object, got {_type_name(arguments)}"]
    props: Mapping[str, Any] = params.get("properties", _NONE)  # read only: a shared empty default
    errors: list[str] = []
    required = params.get("required", ())
    # plain loops find the usual call (every required argument, only known ones) without a comprehension
    for param in required:
        if param not in arguments:
            missing = [p for p in required if p not in arguments]
            errors.append(f"missing required argument(s) {', '.join(repr(m) for m in missing)} for '{name}'")
            break
    for arg in arguments:
        if arg not in props:
            unknown = [a for a in arguments if a not in props]
            errors.append(
                f"unexpected argument(s) {', '.join(repr(u) for u in unknown)} for '{name}'; "
                f"parameters are: {', '.join(props) or '(none)'}"
            )
            break
    for key, value in arguments.items():
        if key not in props:
            continue
        sub = props[key]
        accepted = _SCALAR_OK.get(type(value))  # fast path: a scalar of the declared type, no enum (_check accepts it)
        if accepted is not None and sub.get("type") in accepted and "enum" not in sub:
            continue
        _check(value, sub, key, errors)
    return errors


_NONE: Mapping[str, Any] = MappingProxyType({})

# type of a value -> the declared types that accept it as is (bool is not an integer; a number may be an int)
_SCALAR_OK: dict[type, tuple[str, ...]] = {str: ("string",), int: ("integer", "number"), float: ("number",),
                                           bool: ("boolean",)}


def syntax_grade(parsed: ParsedResponse, tools: Mapping[str, dict[str, Any]]) -> float:
    """Graded validity of one generation's call blocks against the tools visible now (``name -> tool``), the
    formula of :func:`agent_tune.rewards.bfcl.syntax_grade_of` on this module's schema checks."""
    checks = []
    for call in parsed.calls:
        tool = tools.get(call.name)
        checks.append(None if tool is None else validate_arguments(tool, call.arguments))
    return syntax_grade_of(len(parsed.errors), checks)
