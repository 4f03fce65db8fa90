"""BFCL's single-turn AST rule, implemented here: is a decoded answer one of the accepted calls?

``calls`` is the decoded model output ``[{name: {param: value}}, ...]`` and ``possible_answer`` the
entry's accepted calls ``[{name: {param: [accepted values]}}]`` (``""`` among the values: the parameter
may be left out). :func:`ast_verdict` gives the verdict bfcl-eval 2026.3.23 gives; it was written by
reading bfcl-eval's code (``eval_checker/ast_eval/ast_checker.py`` and ``eval_checker/eval_runner.py``),
and ``tests/envs/test_bfcl_ast_agreement.py`` checks it against that code. What each part mirrors:

* :func:`ast_verdict`: the runner's per-entry step (``_evaluate_single_ast_entry``: the output must have
  the call-list shape, ``is_function_calling_format_output``) then ``ast_checker``'s dispatch: a
  category containing ``parallel`` is matched order-free, one containing ``multiple`` checks the one
  expected call against the doc of that name, any other needs exactly one call, checked against the
  first doc. The (ir)relevance categories follow ``_evaluate_single_relevance_entry``.
* :func:`relevance_verdict`: irrelevance is right iff the output is "empty" (``is_empty_output``: not a
  call list, ``[]`` or ``[{}]``); relevance iff it is not.
* :func:`_parallel` mirrors ``parallel_function_checker_no_order``: same count, then each expected call in
  turn takes the first unused output call that passes (greedy, as bfcl-eval does).
* :func:`_multiple` mirrors ``multiple_function_checker``; :func:`_check_call` mirrors
  ``simple_function_checker`` (name, required parameters, per-parameter type and value, parameters that
  are expected but neither given nor optional), with ``convert_func_name`` as the ``underscore_to_dot``
  option (False for the Qwen FC models: names keep their dots).
* :func:`_type_check` mirrors ``type_checker``: Python type names map to exact types (``bool`` is not an
  ``int``; ``any`` means ``str``), an ``int`` for a ``float`` parameter is converted first, a ``tuple``
  for a ``tuple`` parameter becomes a list, one level of array items is checked, and a value whose type
  is that of the accepted values (a "variable" answer: the type differs from the doc's) passes and is
  then compared as is.
* :func:`_norm` mirrors ``standardize_string`` (drop `` ,./-_*^``, lower-case, ``'`` -> ``"``), used by
  :func:`_string_check` (``string_checker``), :func:`_list_check` (``list_checker``: top-level string
  items), :func:`_dict_check` (``dict_checker``: one level) and :func:`_list_of_dicts_check`
  (``list_dict_checker``, order kept).

Where bfcl-eval raises on some input instead of answering, this module answers "invalid" with error type
``ast_checker:unsupported`` (a doc type Python categories never use, a doc or accepted value of an
unexpected shape, a list item that is not an object where a list of objects is expected but the first
accepted value is ``""``). Error types are bfcl-eval's strings. No ``eval``/``exec``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from agent_tune.errors import EnvError

# bfcl-eval's Python type names -> the exact Python type a value must have.
PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
SEQUENCE_TYPES = ("array", "tuple")
_DROPPED = str.maketrans("", "", " ,./-_*^")
UNSUPPORTED = "ast_checker:unsupported"


@dataclass(frozen=True)
class AstVerdict:
    """The verdict on one answer: ``valid``, and for an invalid one bfcl-eval's error type and a message."""

    valid: bool
    error_type: str = ""
    error: str = ""


_VALID = AstVerdict(True)


class _Unsupported(EnvError):
    """Internal: an input bfcl-eval's checker would raise on."""


def is_call_list(calls: Any) -> bool:
    """The shape bfcl-eval scores: a list of ``{name: {param: value}}`` dicts with one key each (``[]`` too)."""
    if type(calls) is not list:
        return False
    return all(type(c) is dict and len(c) == 1 and type(next(iter(c.values()))) is dict for c in calls)


def has_calls(calls: Any) -> bool:
    """True if ``calls`` holds at least one call (bfcl-eval's ``not is_empty_output``)."""
    if not is_call_list(calls) or not calls:
        return False
    return not (len(calls) == 1 and len(calls[0]) == 0)


def relevance_verdict(calls: Any, category: str) -> AstVerdict:
    """Irrelevance: right iff no call; relevance: right iff at least one call (values are not checked).

    ``calls`` is None when the response could not be decoded at all (no call, as for bfcl-eval).
    """
    called = calls is not None and has_calls(calls)
    if "irrelevance" in category:
        return _VALID if not called else AstVerdict(False, "irrelevance_error:decoder_success",
                                                   "the answer calls a function where none fits the request")
    return _VALID if called else AstVerdict(False, "relevance_error:decoder_failed",
                                           "the answer makes no function call where one was expected")


def ast_verdict(
    functions: Sequence[Mapping[str, Any]],
    calls: Any,
    possible_answer: Sequence[Mapping[str, Any]] | None,
    category: str,
    *,
    underscore_to_dot: bool = False,
) -> AstVerdict:
    """BFCL's verdict on decoded ``calls`` for one single-turn entry (see the module docstring).

    ``functions`` are the entry's BFCL function docs, ``category`` its category (``simple_python``,
    ``live_parallel``, ...). ``calls=None`` means the response could not be decoded. Never raises on
    model output; raises ValueError for a category scored by AST with no ``possible_answer``.
    """
    if "relevance" in category:  # irrelevance and relevance: the runner's is_relevance_or_irrelevance
        return relevance_verdict(calls, category)
    if possible_answer is None:
        raise ValueError(f"category {category!r} is scored against a possible answer; none was given")
    if calls is None:
        return AstVerdict(False, "ast_decoder:decoder_failed", "the answer could not be decoded")
    if not is_call_list(calls):
        return AstVerdict(False, "ast_decoder:decoder_wrong_output_format",
                          "the decoded answer is not a list of {name: {param: value}} calls")
    try:
        if "parallel" in category:
            return _parallel(functions, calls, possible_answer, underscore_to_dot)
        if "multiple" in category:
            return _multiple(functions, calls, possible_answer, underscore_to_dot)
        if len(calls) != 1:
            return AstVerdict(False, "simple_function_checker:wrong_count",
                              f"expected exactly one call, got {len(calls)}")
        return _check_call(functions[0], calls[0], possible_answer[0], underscore_to_dot)
    except _Unsupported as exc:
        return AstVerdict(False, UNSUPPORTED, str(exc))
    except (KeyError, IndexError, TypeError, AttributeError) as exc:  # malformed docs / accepted values
        return AstVerdict(False, UNSUPPORTED, f"{type(exc).__name__}: {exc}")


def _find_doc(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for doc in functions:
        if doc["name"] == name:
            return doc
    raise _Unsupported(f"no function doc named {name!r}")


def _expected_name(answer: Mapping[str, Any]) -> str:
    return next(iter(answer))


def _parallel(functions: Sequence[Mapping[str, Any]], calls: list[dict[str, Any]],
              answers: Sequence[Mapping[str, Any]], underscore_to_dot: bool) -> AstVerdict:
    if len(calls) != len(answers):
        return AstVerdict(False, "parallel_function_checker_no_order:wrong_count",
                          f"expected {len(answers)} calls, got {len(calls)}")
    used: set[int] = set()
    for i, answer in enumerate(answers):
        doc = _find_doc(functions, _expected_name(answer))
        match = next((j for j, call in enumerate(calls)
                      if j not in used and _check_call(doc, call, answer, underscore_to_dot).valid), None)
        if match is None:
            return AstVerdict(False, "parallel_function_checker_no_order:cannot_find_match",
                              f"no unmatched call fits expected call #{i} ({_expected_name(answer)})")
        used.add(match)
    return _VALID


def _multiple(functions: Sequence[Mapping[str, Any]], calls: list[dict[str, Any]],
              answers: Sequence[Mapping[str, Any]], underscore_to_dot: bool) -> AstVerdict:
    if len(calls) != len(answers):
        return AstVerdict(False, "multiple_function_checker:wrong_count",
                          f"expected {len(answers)} call(s), got {len(calls)}")
    doc = _find_doc(functions, _expected_name(answers[0]))
    return _check_call(doc, calls[0], answers[0], underscore_to_dot)


def _check_call(doc: Mapping[str, Any], call: Mapping[str, Any], answer: Mapping[str, Any],
                underscore_to_dot: bool) -> AstVerdict:
    """One call against one expected call (``simple_function_checker``)."""
    accepted: Mapping[str, Any] = next(iter(answer.values()))
    name = doc["name"]
    if underscore_to_dot and "." in name:
        name = name.replace(".", "_")
    props = doc["parameters"]["properties"]
    if name not in call:
        return AstVerdict(False, "simple_function_checker:wrong_func_name", f"function {name!r} not called")
    args = call[name]
    for param in doc["parameters"]["required"]:
        if param not in args:
            return AstVerdict(False, "simple_function_checker:missing_required",
                              f"missing required parameter {param!r}")
    for param, value in args.items():
        if param not in props or param not in accepted:
            return AstVerdict(False, "simple_function_checker:unexpected_param", f"unexpected parameter {param!r}")
        verdict = _check_value(param, value, props[param], accepted[param])
        if not verdict.valid:
            return verdict
    for param, values in accepted.items():
        if param not in args and "" not in values:
            return AstVerdict(False, "simple_function_checker:missing_optional",
                              f"parameter {param!r} is expected and not optional")
    return _VALID


def _check_value(param: str, value: Any, spec: Mapping[str, Any], accepted: list[Any]) -> AstVerdict:
    """One parameter value against its doc entry and accepted values."""
    type_name = spec["type"]
    if type_name not in PYTHON_TYPES:
        raise _Unsupported(f"parameter {param!r}: type {type_name!r} is not a Python type of BFCL")
    expected = PYTHON_TYPES[type_name]
    inner: type | None = None
    if type_name in SEQUENCE_TYPES:
        inner_name = spec["items"]["type"]
        if inner_name not in PYTHON_TYPES:
            raise _Unsupported(f"parameter {param!r}: item type {inner_name!r} is not a Python type of BFCL")
        inner = PYTHON_TYPES[inner_name]
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    ok, is_variable, error_type = _type_check(value, accepted, expected, inner)
    if not ok:
        return AstVerdict(False, error_type,
                          f"parameter {param!r}: expected type {type_name}, got {type(value).__name__} {value!r}")
    if not is_variable:
        if expected is dict:
            return _dict_check(param, value, accepted)
        if expected is list and inner is dict:
            return _list_of_dicts_check(param, value, accepted)
        if expected is str:
            return _string_check(param, value, accepted)
        if expected is list:
            return _list_check(param, value, accepted)
    if value not in accepted:
        return AstVerdict(False, "value_error:others", f"parameter {param!r}: {value!r} is not one of {accepted!r}")
    return _VALID


def _answer_type(accepted: Sequence[Any]) -> type | None:
    """The type of the first accepted value that is not the "may be omitted" marker."""
    for item in accepted:
        if item != "":
            return type(item)
    return None


def _type_check(value: Any, accepted: Sequence[Any], expected: type, inner: type | None) -> tuple[bool, bool, str]:
    """(type ok, value is a "variable", error type); mirrors ``type_checker``."""
    answer_type = _answer_type(accepted)
    is_variable = answer_type is not None and answer_type is not expected
    error_type = "type_error:simple"
    if type(value) is expected:
        if inner is None:
            return True, is_variable, ""
        for option in accepted:
            # a non-list accepted value (e.g. "") puts no constraint on the items
            if type(option) is not list or all(_item_type_ok(item, option, inner) for item in value):
                return True, is_variable, ""
        if answer_type is not None and type(value) is answer_type:
            return False, True, "type_error:nested"
        return False, is_variable, error_type
    if answer_type is not None and type(value) is answer_type:
        return True, True, ""
    return False, is_variable, error_type


def _item_type_ok(item: Any, option: Sequence[Any], inner: type) -> bool:
    answer_type = _answer_type(option)
    return type(item) is inner or (answer_type is not None and type(item) is answer_type)


def _norm(text: str) -> str:
    """bfcl-eval's string standardisation: drop `` ,./-_*^``, lower-case, single -> double quotes."""
    return text.translate(_DROPPED).lower().replace("'", '"')


def _norm_any(value: Any) -> Any:
    return _norm(value) if type(value) is str else value


def _string_check(param: str, value: str, accepted: Sequence[Any]) -> AstVerdict:
    if _norm(value) in [_norm(a) for a in accepted if type(a) is str]:
        return _VALID
    return AstVerdict(False, "value_error:string", f"parameter {param!r}: {value!r} is not one of {list(accepted)!r}")


def _as_items(option: Any) -> list[Any]:
    """An accepted list value as bfcl-eval indexes it (a string by characters: ``""`` is the empty list)."""
    if isinstance(option, (list, tuple, str)):
        return list(option)
    raise _Unsupported(f"accepted value {option!r} is not a list")


def _list_check(param: str, value: list[Any], accepted: Sequence[Any]) -> AstVerdict:
    got = [_norm_any(x) for x in value]
    if got in [[_norm_any(y) for y in _as_items(option)] for option in accepted]:
        return _VALID
    return AstVerdict(False, "value_error:list/tuple",
                      f"parameter {param!r}: {value!r} is not one of {list(accepted)!r}")


def _dict_check(param: str, value: Mapping[str, Any], accepted: Sequence[Any]) -> AstVerdict:
    """A dict value against accepted dicts ``{key: [accepted values]}`` (one level; ``""`` options skipped)."""
    verdict = AstVerdict(False, "dict_checker:unclear", f"parameter {param!r}: no accepted dict")
    for option in accepted:
        if option == "":
            continue
        if type(value) is not dict:
            raise _Unsupported(f"parameter {param!r}: item {value!r} is not an object")
        if type(option) is not dict:
            raise _Unsupported(f"accepted value {option!r} is not a dict")
        verdict = _VALID
        for key, item in value.items():
            if key not in option:
                verdict = AstVerdict(False, "value_error:dict_key", f"parameter {param!r}: unexpected key {key!r}")
                break
            if _norm_any(item) not in [_norm_any(a) for a in _as_items(option[key])]:
                verdict = AstVerdict(False, "value_error:dict_value",
                                     f"parameter {param!r}: {key!r}={item!r} is not one of {option[key]!r}")
                break
        for key, values in option.items():  # bfcl-eval runs this even after a value error (its type wins)
            if key not in value and "" not in values:
                verdict = AstVerdict(False, "value_error:dict_key", f"parameter {param!r}: missing key {key!r}")
                break
        if verdict.valid:
            return verdict
    return verdict


def _list_of_dicts_check(param: str, value: list[Any], accepted: Sequence[Any]) -> AstVerdict:
    """A list of dicts against accepted lists of dicts, position by position."""
    verdict = AstVerdict(False, "list_dict_checker:unclear", f"parameter {param!r}: no accepted list")
    for option in accepted:
        items = _as_items(option)
        if len(value) != len(items):
            verdict = AstVerdict(False, "value_error:list_dict_count",
                                 f"parameter {param!r}: expected {len(items)} dicts, got {len(value)}")
            continue
        for got, want in zip(value, items):
            verdict = _dict_check(param, got, [want])
            if not verdict.valid:
                break
        else:
            return _VALID
    return verdict
