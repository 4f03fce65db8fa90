"""The one-file calculator env (``examples/envs/calculator.py``): the env contract through the
registry's path form, and the safe evaluator, which must reject anything but bounded arithmetic unevaluated."""

from __future__ import annotations

import ast

import pytest

from agent_tune.envs import check_env, make_env
from examples.envs import calculator as calculator_env
from examples.envs.calculator import MAX_EXPONENT, UnsafeExpressionError, run_calculator, safe_eval

PATH = "examples.envs.calculator:CalculatorEnv"
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "(2 + 3) * 4"}}\n</tool_call>'
BAD = '<tool_call>\n{"name": "calculator", "arguments": \n</tool_call>'


def test_env_keeps_the_contract_through_the_registry_path() -> None:
    check_env(lambda: make_env(PATH), {"question": "What is (2 + 3) * 4?", "answer": 20}, CALL, BAD)


def test_episode_call_result_then_answer() -> None:
    env = make_env(PATH)
    obs = env.reset(question="What is (2 + 3) * 4?", answer=20)
    assert obs.tools == calculator_env.TOOLS and obs.messages[-1] == {"role": "user", "content": "What is (2 + 3) * 4?"}
    step = env.step(CALL)
    assert not step.done and step.observation.messages == [{"role": "tool", "content": "20", "name": "calculator"}]
    end = env.step("(2 + 3) * 4 = 20. The answer is 20.")
    assert end.done and end.reward == 1.0 and end.info["num_calls"] == 1 and end.info["format_errors"] == 0


@pytest.mark.parametrize("call, errors", [
    ('{"name": "calculator", "arguments": {"expression": "1 / 0"}}', 0),  # well-formed: the tool's own error
    ('{"name": "abacus", "arguments": {"expression": "1"}}', 1),  # no such tool: rejected
    ('{"name": "calculator", "arguments": {"expr": "1"}}', 1),  # breaks the schema: rejected
])
def test_rejected_calls_are_format_errors_a_tools_own_error_is_not(call: str, errors: int) -> None:
    env = make_env(PATH)
    env.reset(question="q", answer=1)
    step = env.step(f"<tool_call>\n{call}\n</tool_call>")
    assert not step.done and step.info["format_errors"] == errors
    assert step.info["calls"] == ([] if errors else ["calculator"])
    assert step.observation.messages[0]["content"].startswith("Error:")


def test_last_allowed_generation_ends_without_running_its_calls() -> None:
    env = make_env(PATH, max_steps=1)
    env.reset(question="q", answer=1)
    end = env.step(CALL)
    assert end.done and end.reward == 0.0 and end.info["num_calls"] == 0


@pytest.mark.parametrize("expression, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-2 ** 2", -4), ("2 ** -1", 0.5), ("7 / 2", 3.5), ("+5 - -5", 10),
    ("1.5 * 4", 6.0), (f"2 ** {MAX_EXPONENT}", 2**MAX_EXPONENT),
])
def test_arithmetic(expression: str, value: float) -> None:
    assert safe_eval(expression) == value


@pytest.mark.parametrize("expression", [
    "__import__('os').system('true')",  # a call and a name
    "x + 1",  # a name
    "(1).__class__",  # an attribute
    "().__class__.__bases__[0].__subclasses__()",
    "[1, 2][0]",  # a subscript (and a list)
    "'a' * 3",  # a string
    "1 if 1 else 2", "1 < 2", "lambda: 1", "True + 1", "1j * 2", "1 // 2", "7 % 3", "1 << 3", "~1",
    "2 ** 100000000", "9 ** 9 ** 9", "10 ** 30 * 10 ** 30",  # huge results: refused, never computed
    "1e308 * 10", "1" * 300, "(" * 150 + "1" + ")" * 150, "", "1 +", "open('x')",
])
def test_rejects_anything_but_bounded_arithmetic(expression: str) -> None:
    with pytest.raises(UnsafeExpressionError):
        safe_eval(expression)


def test_rejected_input_is_never_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    called = []
    monkeypatch.setattr("builtins.eval", lambda *a, **k: called.append(a))
    monkeypatch.setattr("builtins.exec", lambda *a, **k: called.append(a))
    for expression in ("__import__('os').getpid()", "print(1)", "open('/etc/passwd').read()"):
        text, error = run_calculator({"expression": expression})
        assert error and text.startswith("Error:")
    assert called == []


def test_evaluator_source_uses_no_eval_or_exec() -> None:
    tree = ast.parse(open(calculator_env.__file__).read())
    names = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not names & {"eval", "exec", "compile", "__import__"}


@pytest.mark.parametrize("arguments, expected", [
    ({"expression": "6 * 7"}, ("42", False)), ({"expression": "1 / 0"}, ("Error: division by zero", True)),
    ({"expr": "1"}, ('Error: call calculator with {"expression": "<arithmetic>"}', True)), ("6*7", (
        'Error: call calculator with {"expression": "<arithmetic>"}', True)),
])
def test_tool_answers(arguments, expected) -> None:
    assert run_calculator(arguments) == expected
