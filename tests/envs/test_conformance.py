"""Every registered environment keeps the contract (``check_env``), and the checker catches breakage."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pytest

import examples.envs.calculator  # noqa: F401  (registers the one-file plug-in "calculator")
import examples.envs.guess  # noqa: F401  (registers the one-file plug-in "guess")
from agent_tune.envs import (
    BaseToolEnv,
    EnvCheckError,
    EpisodeInfo,
    Observation,
    Outcome,
    StepResult,
    check_env,
    env_names,
    make_env,
)
from agent_tune.parsing import ParsedResponse

ROOT = Path(__file__).resolve().parents[2]
BAD_HERMES = '<tool_call>\n{"name": "ls", "arguments": \n</tool_call>'

# name -> (env kwargs, task, a valid first response, a malformed one). A new built-in env needs a case here.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str, str]] = {
    "agent_r1": ({"env": "tests.envs.test_agent_r1_env:ReToolLikeEnv",
                  "tools": ["tests.envs.test_agent_r1_env:SandboxPythonTool"],
                  "env_kwargs": {"max_tool_response_length": 256}, "stop": ["</code>"],
                  "reward_fn": "tests.envs.test_agent_r1_env:boxed_score"},
                 {"prompt": "What is 2 + 2?", "reward_model": {"ground_truth": "4"}},
                 "<code>\nprint(2 + 2)\n</code>", "<cod>print(2 + 2)</code>"),
    "bfcl": ({}, {"test_id": "multi_turn_base_0"},
             '<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>', BAD_HERMES),
    "retool": ({}, {"question": "What is 2 + 2?", "ground_truth": "4"}, "<code>print(2 + 2)</code>", "<code></code>"),
    "toolcall": ({}, {"question": "Add 2 and 3.", "ground_truth": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
                      "tools": [{"name": "add", "description": "Add.", "parameters": {"type": "object", "properties": {
                          "a": {"type": "integer"}, "b": {"type": "integer"}}}}]},
                 '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>', BAD_HERMES),
    "tau2": ({"domain": "mock", "user": {"kind": "scripted", "turns": ["Create a task 'Meeting' for user_1."]}},
             {"task_id": "create_task_1"},
             '<tool_call>\n{"name": "create_task", "arguments": {"user_id": "user_1", "title": "Meeting"}}\n'
             '</tool_call>',
             BAD_HERMES),
    "calculator": (
        {}, {"question": "What is 2 + 3?", "answer": 5},
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>', BAD_HERMES),
    "guess": ({}, {"secret": 42}, "50", "no idea"),
    "mcp": ({"server": {"command": ["python", "-m", "examples.mcp.notes_server"], "cwd": str(ROOT)},
             "verifier": "examples.mcp.verify:verify"},
            {"question": "Save a note titled 'a' with the text 'b'.", "kind": "add", "title": "a", "text": "b"},
            '<tool_call>\n{"name": "add_note", "arguments": {"title": "a", "text": "b"}}\n</tool_call>', BAD_HERMES),
    "skyrl": ({"env_class": "tests.envs.test_skyrl_env:StrictGSM8kEnv"},
              {"prompt": "What is 2 + 3?", "reward_spec": {"ground_truth": "5"}}, "2 + 3 = 5\n#### 5", "five"),
}
# Built-in envs whose contract check needs a server the test serves itself: the test that runs check_env on them.
CHECKED_ELSEWHERE = {
    "nemo_gym": "tests/envs/test_nemo_gym_env.py::test_the_contract",
    "openenv": "tests/envs/test_openenv_env.py::test_contract_text_and_tools",
    "tinker": "tests/envs/test_tinker_env.py::test_the_contract",
    "verifiers": "tests/envs/test_verifiers_env.py::test_check_env_passes_for_a_tool_env_and_a_text_env",
    "verl_tools": "tests/envs/test_verl_tools_env.py::test_check_env_passes",
}


# Further tasks of registered envs: (name, env kwargs, task, a valid first response, a malformed one).
TASK_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], str, str]] = {
    "toolcall[bfcl simple_python_12, test_id to the constructor]": (
        "toolcall", {"test_id": "simple_python_12"}, {},
        '<tool_call>\n{"name": "geometry.circumference", "arguments": {"radius": 3}}\n</tool_call>', BAD_HERMES),
    "toolcall[bfcl live_parallel_0-0-0, test_id to reset]": (
        "toolcall", {}, {"test_id": "live_parallel_0-0-0"},
        '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Shanghai, China"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Beijing, China"}}\n</tool_call>',
        BAD_HERMES),
    "tau2[protocol=pipeline: one <tool_call> action, a malformed one retried]": (
        "tau2", {"domain": "mock", "protocol": "pipeline",
                 "user": {"kind": "scripted", "turns": ["Create a task 'Meeting' for user_1."]}},
        {"task_id": "create_task_1"},
        '<tool_call>\n{"name": "create_task", "arguments": {"user_id": "user_1", "title": "Meeting"}}\n</tool_call>',
        "I will create it."),
}


def test_every_registered_env_has_a_case() -> None:
    assert set(env_names()) <= set(CASES) | set(CHECKED_ELSEWHERE), "add a conformance case for every built-in env"
    for name, test in CHECKED_ELSEWHERE.items():
        path, _, function = test.partition("::")
        assert f"def {function}(" in (ROOT / path).read_text() and "check_env(" in (ROOT / path).read_text(), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_env_keeps_the_contract(name: str) -> None:
    kwargs, task, valid, malformed = CASES[name]
    check_env(lambda: make_env(name, **kwargs), task, valid, malformed)


@pytest.mark.parametrize("label", sorted(TASK_CASES))
def test_env_task_keeps_the_contract(label: str) -> None:
    name, kwargs, task, valid, malformed = TASK_CASES[label]
    check_env(lambda: make_env(name, **kwargs), task, valid, malformed)


class _Echo(BaseToolEnv):
    """A deliberately sloppy env, to show the checker catching what it should."""

    def __init__(self, raise_on_bad: bool = False, count_errors: bool = True) -> None:
        self.raise_on_bad, self.count_errors = raise_on_bad, count_errors

    def reset(self, **task: Any) -> Observation:
        return Observation(messages=[{"role": "user", "content": "hi"}])

    def step(self, raw_response: str) -> StepResult:
        if raw_response == "bad" and self.raise_on_bad:
            raise ValueError("cannot parse")
        errors = int(raw_response == "bad" and self.count_errors)
        episode = EpisodeInfo(accuracy=0.0, progress=0.0, format_errors=errors, num_steps=1, num_calls=0,
                              turns_completed=1)
        return StepResult(Observation(), 0.0, True, {**episode.as_dict(), "format_errors": errors}, episode)

    def act(self, step: Any) -> None:  # step() above replaces the template
        raise AssertionError("_Echo steps in step()")

    def outcome(self) -> Outcome:
        return Outcome(0.0, 0.0)

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        return Observation()


def test_checker_wants_a_clear_error_before_reset() -> None:
    with pytest.raises(EnvCheckError, match=r"step\(\) before reset\(\) must raise EnvStateError"):
        check_env(lambda: _Echo(), {}, "ok", "bad")


def test_checker_catches_a_raise_on_model_output_and_an_uncounted_error() -> None:
    class Guarded(_Echo):
        started = False

        def reset(self, **task: Any) -> Observation:
            self.started = True
            return super().reset(**task)

        def step(self, raw_response: str) -> StepResult:
            from agent_tune.envs import EnvStateError

            if not self.started:
                raise EnvStateError("no episode")
            self.started = False
            return super().step(raw_response)

    check_env(lambda: Guarded(), {}, "ok", "bad")  # the sloppy env made careful passes
    with pytest.raises(EnvCheckError, match="never raises on model output"):
        check_env(lambda: Guarded(raise_on_bad=True), {}, "ok", "bad")
    with pytest.raises(EnvCheckError, match="must count a format error"):
        check_env(lambda: Guarded(count_errors=False), {}, "ok", "bad")
