"""The ``verl_tools`` env against tools written with verl's own classes: ``BaseTool`` subclasses declared in a verl
tool-config YAML (the calculator of ``benchmarks/agent_loop_vs_verl.py`` among them) and ``@function_tool``
functions, loaded by verl's ``load_all_tools`` through the adapter, played by scripted policies.

verl 0.9's loader has no MCP tools (its ``ToolType`` is ``native`` only), so an MCP entry of the YAML is tested as
refused at construction, not against a server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any
from uuid import uuid4

import pytest
import yaml
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse

from agent_tune.envs import check_env, make_env
from agent_tune.envs.time_limits import StartTimeoutError
from agent_tune.envs.verl_tools.env import VerlToolsEnv
from agent_tune.utils.typed_config import OptionError
from benchmarks.agent_loop_vs_verl import write_tool_config
from examples.envs.calculator import TOOL_SCHEMA, prompt_messages, run_calculator

HERE = "tests.envs.test_verl_tools_env"
LOG: list[tuple[Any, ...]] = []  # what the test tools were asked, in order


class LedgerTool(BaseTool):
    """A stateful verl tool: ``create`` takes the row's target, ``execute`` records an answer, ``calc_reward`` is 1
    when the last answer hits the target."""

    def __init__(self, config: dict, tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        self.state: dict[str, dict[str, Any]] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        instance_id = instance_id or uuid4().hex
        LOG.append(("create", self.name, instance_id, kwargs))
        self.state[instance_id] = {"target": kwargs.get("create_kwargs", {}).get("target"), "answer": None}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float,
                                                                                                   dict]:
        agent_data = kwargs["agent_data"]
        LOG.append(("execute", self.name, instance_id, parameters, [m["role"] for m in agent_data.messages],
                    agent_data.tools_kwargs))
        self.state[instance_id]["answer"] = parameters["answer"]
        return ToolResponse(text=f"recorded {parameters['answer']}"), 0.1, {"answers": 1}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        LOG.append(("calc_reward", self.name, instance_id, kwargs))
        state = self.state[instance_id]
        return 1.0 if state["answer"] == state["target"] else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        LOG.append(("release", self.name, instance_id, kwargs))
        del self.state[instance_id]


class FailingTool(BaseTool):
    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")


class SlowTool(BaseTool):
    """Answers after a minute: far beyond any call_timeout of these tests."""

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        await asyncio.sleep(60)
        return ToolResponse(text="late"), 0.0, {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        LOG.append(("release", self.name, instance_id, kwargs))


class PhotoTool(BaseTool):
    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        return ToolResponse(text="a cat", image=["<image bytes>"]), 0.0, {}


class BrokenCreateTool(BaseTool):
    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        raise ConnectionError("sandbox refused")


class SlowCreateTool(BaseTool):
    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        await asyncio.sleep(60)
        return "never", ToolResponse()


def schema(name: str, **properties: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": f"The {name} tool.",
        "parameters": {"type": "object", "required": list(properties),
                       "properties": {k: {"type": t, "description": k} for k, t in properties.items()}}}}


def entry(cls: str, tool_schema: dict[str, Any], kind: str = "native") -> dict[str, Any]:
    return {"class_name": f"{HERE}.{cls}", "config": {"type": kind}, "tool_schema": tool_schema}


FUNCTION_TOOLS = '''
import time

from verl.tools.function_tool import function_tool


@function_tool
def vt_add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: the first integer
        b: the second integer
    """
    return str(a + b)


@function_tool("vt_scale")
async def scale(x: float, factor: float) -> tuple:
    """Scale a number.

    Args:
        x: the number
        factor: the factor
    """
    return {"value": x * factor}, 0.5, {"scaled": True}


@function_tool
def vt_sleep(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "awake"
'''


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """The tool configs and the function-tool file, written once (verl registers function tools per process)."""
    folder = tmp_path_factory.mktemp("verl-tools")
    calculator = {"class_name": "benchmarks.agent_loop_vs_verl.CalculatorTool", "config": {"type": "native"},
                  "tool_schema": TOOL_SCHEMA}
    configs = {
        "tools": [calculator, entry("LedgerTool", schema("submit", answer="integer")),
                  entry("FailingTool", schema("explode")), entry("SlowTool", schema("wait")),
                  entry("PhotoTool", schema("photo"))],
        "broken_create": [entry("BrokenCreateTool", schema("fragile"))],
        "slow_create": [entry("LedgerTool", schema("submit", answer="integer")),
                        entry("SlowCreateTool", schema("sluggish"))],
        "mcp": [{"class_name": "verl.tools.mcp_search_tool.MCPSearchTool",
                 "config": {"type": "mcp", "rate_limit": 10, "timeout": 30},
                 "mcp": {"mcp_servers_config_path": "./mcp_server.json"}}],
    }
    out = {}
    for name, tools in configs.items():
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"tools": tools}, sort_keys=False))
        out[name] = str(path)
    (folder / "fn_tools.py").write_text(FUNCTION_TOOLS)
    out["functions"] = str(folder / "fn_tools.py")
    out["folder"] = str(folder)
    return out


@pytest.fixture(autouse=True)
def clear_log() -> None:
    LOG.clear()


def events(tool: str) -> list[str]:
    """What the tool named ``tool`` was asked, in order (the other tools of the config create and release too)."""
    return [e[0] for e in LOG if e[1] == tool]


def call(name: str, **arguments: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None) -> dict:
    """verl's reward-function signature, as a recipe writes it."""
    LOG.append(("compute_score", data_source, solution_str, ground_truth, extra_info))
    solved = ground_truth in solution_str
    return {"score": 1.0 if solved else 0.0, "acc": solved}


async def score_from_tools(tool_rewards: list[float], tool_scores: dict[str, float], **rest: Any) -> float:
    LOG.append(("score_from_tools", tool_rewards, tool_scores, sorted(rest)))
    return sum(tool_rewards)


# ---------------------------------------------------------------------------------------------- loading
def test_tools_are_verls_own_load_and_show_verls_schemas(files) -> None:
    from verl.tools.tool_registry import load_all_tools

    env = make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"])
    obs = env.reset(prompt="hi")
    verl_tools = load_all_tools(files["tools"], files["functions"])
    assert obs.tools == [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in verl_tools]
    assert [t["function"]["name"] for t in obs.tools] == ["calculator", "submit", "explode", "wait", "photo",
                                                         "vt_add", "vt_scale", "vt_sleep"]
    assert type(env.loaded.tools["submit"]) is LedgerTool  # this module's class, not a second copy of it
    # one load per process: a second env shares verl's tool objects, as verl's workers share them between trajectories
    assert make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"]).loaded is env.loaded


def test_the_benchmarks_calculator_config_plays_in_one_line(files, tmp_path) -> None:
    env = make_env("verl_tools", tool_config=str(write_tool_config(tmp_path)))
    env.reset(prompt=prompt_messages("What is 23 * 17?"))
    step = env.step(call("calculator", expression="23 * 17"))
    assert step.observation.messages == [{"role": "tool", "content": "391", "name": "calculator"}]
    assert not step.done and step.info["format_errors"] == 0 and step.info["calls"] == ["calculator"]
    end = env.step("23 * 17 = 391.")
    assert end.done and end.info["stop_reason"] == "done" and end.info["tool_scores"] == {"calculator": 0.0}


def test_check_env_passes(files) -> None:
    check_env(lambda: make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"]),
              {"prompt": "Add 2 and 3.", "tools_kwargs": {"submit": {"create_kwargs": {"target": 5}}}},
              call("vt_add", a=2, b=3), '<tool_call>\n{"name": "vt_add", "arguments": \n</tool_call>')


# ---------------------------------------------------------------------------------------------- episodes
async def test_an_episode_calls_create_execute_calc_reward_release_as_verls_basetool_contract(files, qwen_tok) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    tools_kwargs = {"submit": {"create_kwargs": {"target": 391}, "calc_reward_kwargs": {"strict": True},
                               "release_kwargs": {"why": "done"}}}
    policy = ScriptedPolicy(renderer, [call("calculator", expression="23 * 17"), call("submit", answer=391),
                                       "The answer is 391."])
    env = make_env("verl_tools", tool_config=files["tools"])
    task = {"prompt": prompt_messages("What is 23 * 17?"), "tools_kwargs": tools_kwargs}
    try:
        result = await run_episode(env, policy, renderer, RolloutLimits(8192, 1024), task=task, debug_drift=True)
    finally:
        env.close()
    assert result.reward == 1.0 and result.stop_reason == "done" and result.drift.ok, str(result.drift)
    tool_messages = [m["content"] for m in result.messages[result.prompt_messages:] if m["role"] == "tool"]
    assert tool_messages == ["391", "recorded 391"]
    assert events("submit") == ["create", "execute", "calc_reward", "release"]
    (_, _, iid, created), (_, _, executed_on, arguments, roles, seen_kwargs), (_, _, scored, reward_kwargs), \
        (_, _, released, release_kwargs) = [e for e in LOG if e[1] == "submit"]
    assert created == {"create_kwargs": {"target": 391}}  # verl's call: create(create_kwargs=...)
    assert iid == executed_on == scored == released and arguments == {"answer": 391}
    # verl's AgentData: the conversation up to the call (system, examples, question, two assistants, one tool)
    assert roles[-3:] == ["assistant", "tool", "assistant"] and seen_kwargs == tools_kwargs
    assert reward_kwargs == {"strict": True} and release_kwargs == {"why": "done"}
    info = result.info
    assert info["tool_scores"] == {"calculator": 0.0, "submit": 1.0, "explode": 0.0, "wait": 0.0, "photo": 0.0}
    assert info["tool_rewards"] == [0.0, 0.1]
    assert info["accuracy"] == 1.0 and info["num_calls"] == 2 and info["format_errors"] == 0


def test_a_wrong_answer_scores_0_and_every_instance_is_released(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"])
    env.reset(prompt="What is 23 * 17?", tools_kwargs={"submit": {"create_kwargs": {"target": 391}}})
    env.step(call("submit", answer=390))
    end = env.step("It is 390.")
    assert end.reward == 0.0 and end.info["accuracy"] == 0.0
    assert events("submit") == ["create", "execute", "calc_reward", "release"]
    assert ("release", "wait") in [e[:2] for e in LOG]
    assert all(not t.state for t in [env.loaded.tools["submit"]])


def test_call_lifecycle_is_verl_0_9s_tool_agent_loop(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"], lifecycle="call", reward=f"{HERE}:score_from_tools")
    env.reset(prompt="Submit twice.", tools_kwargs={"submit": {"create_kwargs": {"target": 1}}})
    assert LOG == []  # nothing is created before a call
    env.step(call("submit", answer=1))
    env.step(call("submit", answer=2))
    end = env.step("done")
    kinds = [e[0] for e in LOG]
    assert kinds == ["create", "execute", "release", "create", "execute", "release", "score_from_tools"]
    assert LOG[0][3] == {"create_kwargs": {"target": 1}} and LOG[0][2] != LOG[3][2]  # an instance per call
    assert end.reward == pytest.approx(0.2) and LOG[-1][1:3] == ([0.1, 0.1], {})
    assert LOG[-1][3] == ["data_source", "extra_info", "ground_truth", "messages", "solution_str", "tools_kwargs"]


def test_a_verl_row_and_a_verl_compute_score(files) -> None:
    row = {"prompt": [{"role": "user", "content": "What is 2 + 3?"}], "data_source": "arith",
           "reward_model": {"style": "rule", "ground_truth": "5"},
           "extra_info": {"index": 7, "tools_kwargs": {"submit": {"create_kwargs": {"target": 5}}}}}
    env = make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"],
                   reward=f"{HERE}:compute_score")
    env.reset(row=json.dumps(row))
    assert LOG[0][:2] == ("create", "submit") and LOG[0][3] == {"create_kwargs": {"target": 5}}
    step = env.step(call("vt_add", a=2, b=3))
    assert step.observation.messages[0]["content"] == "5"
    end = env.step("2 + 3 = 5")
    assert end.reward == 1.0 and end.info["accuracy"] == 1.0
    # the tools' instances end first, then verl's compute_score gets the row's fields and the final answer
    assert events("submit") == ["create", "calc_reward", "release"] and LOG[-1][0] == "compute_score"
    assert LOG[-1][1:] == ("arith", "2 + 3 = 5", "5", row["extra_info"])


def test_function_tool_returns_are_normalised_as_verl_normalises_them(files) -> None:
    env = make_env("verl_tools", function_tools=[files["functions"]], reward=f"{HERE}:score_from_tools")
    env.reset(prompt="Scale 2 by 3.")
    step = env.step(call("vt_scale", x=2, factor=3))
    assert step.observation.messages[0]["content"] == '{"value": 6}'
    assert env.step("6").reward == 0.5  # the step reward the function returned, summed by the reward function


def test_tool_selection_shows_only_the_rows_tools(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"])
    obs = env.reset(prompt="Add.", tool_selection=["vt_add", "submit", "not_loaded"])
    assert [t["function"]["name"] for t in obs.tools] == ["vt_add", "submit"]
    assert [e[:2] for e in LOG] == [("create", "submit")]  # only the selected BaseTool gets an instance
    step = env.step(call("calculator", expression="1 + 1"))
    assert step.observation.messages[0]["content"] == "Unknown function 'calculator'. Available tools: " \
                                                      "['vt_add', 'submit']"
    assert step.info["format_errors"] == 1


def test_responses_are_truncated_as_verl_truncates_them(files) -> None:
    expression = "98765432 * 87654321 * 76543210"
    text = run_calculator({"expression": expression})[0]
    assert len(text) > 20
    for side, expected in [("middle", text[:5] + "...(truncated)..." + text[-5:]),
                           ("left", "(truncated)..." + text[-10:]), ("right", text[:10] + "...(truncated)")]:
        env = make_env("verl_tools", tool_config=files["tools"], max_tool_response_length=10,
                       tool_response_truncate_side=side)
        env.reset(prompt=f"{expression}?")
        assert env.step(call("calculator", expression=expression)).observation.messages[0]["content"] == expected


def test_max_parallel_calls(files) -> None:
    two = call("vt_add", a=1, b=1) + "\n" + call("vt_add", a=2, b=2)
    env = make_env("verl_tools", function_tools=files["functions"], reward=f"{HERE}:score_from_tools")
    env.reset(prompt="Add twice.")
    step = env.step(two)  # verl's default: the first call runs, the other is dropped
    assert [m["content"] for m in step.observation.messages] == ["2"] and step.info["dropped_calls"] == 1
    env = make_env("verl_tools", function_tools=files["functions"], reward=f"{HERE}:score_from_tools",
                   max_parallel_calls=2)
    env.reset(prompt="Add twice.")
    assert [m["content"] for m in env.step(two).observation.messages] == ["2", "4"]
    env.step(call("vt_scale", x=1, factor=2) + "\n" + call("rm_rf", path="/"))
    assert env.step("done").info["tool_rewards"] == [0.0, 0.0, 0.5, 0.0]  # per call, in call order


def test_max_steps_ends_the_episode_without_running_the_last_calls(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"], max_steps=2)
    env.reset(prompt="Loop.", tools_kwargs={"submit": {"create_kwargs": {"target": 1}}})
    env.step(call("submit", answer=2))
    end = env.step(call("submit", answer=1))
    assert end.done and end.info["stop_reason"] == "step_limit" and end.reward == 0.0
    assert events("submit") == ["create", "execute", "calc_reward", "release"]


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_calls_are_counted_observations(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"])
    env.reset(prompt="Misbehave.", tools_kwargs={"submit": {"create_kwargs": {"target": 1}}})
    malformed = env.step('<tool_call>\n{"name": "vt_add", "arguments": \n</tool_call>')
    assert malformed.info["format_errors"] == 1
    assert "could not be parsed" in malformed.observation.messages[0]["content"]
    unknown = env.step(call("rm_rf", path="/"))
    assert unknown.info["format_errors"] == 1
    assert unknown.observation.messages[0]["content"].startswith("Unknown function 'rm_rf'. Available tools: [")
    rejected = env.step(call("vt_add", a=2, b="three"))
    assert rejected.info["format_errors"] == 1
    assert rejected.observation.messages[0]["content"] == ("Error: vt_add arguments rejected by its schema at b: "
                                                           "'three' is not of type 'integer'")
    raised = env.step(call("explode"))
    assert raised.info["format_errors"] == 0 and not raised.done
    assert raised.observation.messages[0]["content"] == "Error executing tool 'explode': disk on fire"
    end = env.step("I give up.")
    assert end.episode.format_errors == 3 and end.info["tool_errors"] == 1 and end.info["stop_reason"] == "done"
    assert end.info["tool_rewards"] == [0.0, 0.0, 0.0]  # as verl records the calls it answered without running


def test_without_validation_the_arguments_reach_the_tool_as_in_verl(files) -> None:
    env = make_env("verl_tools", function_tools=files["functions"], reward=f"{HERE}:score_from_tools",
                   validate_arguments=False)
    env.reset(prompt="Add.")
    step = env.step(call("vt_add", a=2, b="three"))
    assert step.info["format_errors"] == 0
    assert step.observation.messages[0]["content"].startswith("Error executing tool 'vt_add': ")


@pytest.mark.parametrize("tool", ["wait", "vt_sleep"])
def test_a_tool_that_blocks_ends_the_episode_at_call_timeout(files, tool) -> None:
    env = make_env("verl_tools", tool_config=files["tools"], function_tools=files["functions"], call_timeout=0.5)
    env.reset(prompt="Wait.")
    started = time.perf_counter()
    step = env.step(call("wait") if tool == "wait" else call("vt_sleep", seconds=5))
    assert time.perf_counter() - started < 4.0
    assert step.done and step.info["stop_reason"] == "timeout"  # the time-limit rule's outcome
    assert step.info["error"] == f"no answer in 0.5 s (verl tool {tool!r})"
    assert step.episode.format_errors == 0 and step.reward == 0.0
    if tool == "wait":  # the episode's instances are released all the same
        assert ("release", "wait") in [e[:2] for e in LOG]


def test_a_batch_is_not_held_up_by_a_blocking_tool(files) -> None:
    envs = [make_env("verl_tools", tool_config=files["tools"], call_timeout=1.0) for _ in range(2)]
    for env in envs:
        env.reset(prompt="Go.")
    started = time.perf_counter()
    slow, fast = VerlToolsEnv.batch_step(envs, [call("wait"), call("calculator", expression="1 + 1")])
    assert time.perf_counter() - started < 4.0
    assert slow.done and slow.info["stop_reason"] == "timeout"
    assert not fast.done and fast.observation.messages[0]["content"] == "2"


def test_an_image_response_ends_the_episode_naming_the_tool(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"])
    env.reset(prompt="Look.")
    step = env.step(call("photo"))
    assert step.done and step.info["stop_reason"] == "env_error"
    assert "tool 'photo' returned 1 image(s)/video(s): this env shows text only" in step.info["error"]


def test_a_failed_start_ends_the_episode_and_a_slow_one_is_not_played(files) -> None:
    env = make_env("verl_tools", tool_config=files["broken_create"])
    env.reset(prompt="Start.")  # reset never fails on a tool
    step = env.step(call("fragile"))
    assert step.done and step.info["stop_reason"] == "env_error" and step.reward == 0.0
    assert "tool 'fragile': create failed (ConnectionError: sandbox refused)" in step.info["error"]

    env = make_env("verl_tools", tool_config=files["slow_create"], start_timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(StartTimeoutError, match=r"^no answer in 0.5 s \(verl tools create\)$"):
        env.reset(prompt="Start.", tools_kwargs={"submit": {"create_kwargs": {"target": 1}}})
    assert time.perf_counter() - started < 4.0
    env.close()  # as the episode's owner does: the instance created in time is released, not scored
    assert [e[0] for e in LOG] == ["create", "release"]


def test_a_reward_function_that_raises_scores_0_named(files, monkeypatch) -> None:
    def broken(**kwargs: Any) -> float:
        raise KeyError("ground_truth")

    monkeypatch.setattr(f"{HERE}.score_from_tools", broken)
    env = make_env("verl_tools", function_tools=files["functions"], reward=f"{HERE}:score_from_tools")
    env.reset(prompt="Hi.")
    end = env.step("Hello.")
    assert end.reward == 0.0 and end.info["reward_error"] == "KeyError: 'ground_truth'"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_reward_function_beyond_call_timeout_ends_as_a_timeout(files, monkeypatch, kind) -> None:
    release = threading.Event()

    def stuck(**kwargs: Any) -> float:
        release.wait(30)
        return 1.0

    async def stuck_async(**kwargs: Any) -> float:
        await asyncio.sleep(30)
        return 1.0

    monkeypatch.setattr(f"{HERE}.score_from_tools", stuck if kind == "sync" else stuck_async)
    env = make_env("verl_tools", function_tools=files["functions"], reward=f"{HERE}:score_from_tools",
                   call_timeout=0.3)
    env.reset(prompt="Hi.")
    started = time.perf_counter()
    try:
        end = env.step("Hello.")
    finally:
        release.set()
    assert time.perf_counter() - started < 3.0
    assert end.done and end.reward == 0.0 and end.info["stop_reason"] == "timeout"
    assert end.info["error"] == "no answer in 0.3 s (verl_tools reward function)"


def test_bad_options_fail_at_construction_naming_the_key(files, tmp_path) -> None:
    cases = [
        ({"tool_config": str(tmp_path / "missing.yaml")}, "tool_config", "no such file"),
        ({"function_tools": [files["functions"], str(tmp_path / "gone.py")], "reward": f"{HERE}:score_from_tools"},
         "function_tools", "no such file"),
        ({"tool_config": files["mcp"]}, "tool_config", "tools[0] (verl.tools.mcp_search_tool.MCPSearchTool) is an "
                                                       "MCP tool"),
        ({"function_tools": files["functions"]}, "reward", "give a reward function"),
        ({"tool_config": files["tools"], "lifecycle": "call"}, "reward", "give a reward function"),
        ({"tool_config": files["tools"], "reward": f"{HERE}:schema"}, "reward", "requires ['name']"),
        ({"tool_config": files["tools"], "call_timeout": 0}, "call_timeout", "must be a number of seconds > 0"),
        ({"tool_config": files["tools"], "start_timeout": -1}, "start_timeout", "must be a number of seconds > 0"),
        ({}, "tool_config", "give a verl tool-config YAML"),
    ]
    for kwargs, key, text in cases:
        with pytest.raises(OptionError) as caught:
            VerlToolsEnv.check_kwargs(kwargs)
        assert caught.value.key == key and text in caught.value.problem, (kwargs, caught.value)
    bad_class = tmp_path / "bad_class.yaml"
    bad_class.write_text(yaml.safe_dump({"tools": [entry("NoSuchTool", schema("x"))]}))
    with pytest.raises(OptionError, match="config key 'tool_config': verl's load_all_tools cannot load .*NoSuchTool"):
        make_env("verl_tools", tool_config=str(bad_class))
    with pytest.raises(ValueError, match="lifecycle"):
        VerlToolsEnv.check_kwargs({"tool_config": files["tools"], "lifecycle": "trajectory"})


def test_reset_takes_exactly_its_task(files) -> None:
    env = make_env("verl_tools", tool_config=files["tools"])
    with pytest.raises(TypeError, match="question"):
        env.reset(question="What?")
    with pytest.raises(TypeError, match="needs a prompt"):
        env.reset()



def test_a_verl_recipes_dataset_is_the_catalogue(files, tmp_path) -> None:
    """Rows as verl's multi-turn preprocessing writes them (a parquet of nested columns) become agent-tune rows whose
    task resets the env with the row's tools_kwargs and ground truth."""
    import pandas as pd

    from agent_tune.envs.tasks import catalogue_rows, row_task

    rows = [{"data_source": "openai/gsm8k", "agent_name": "tool_agent",
             "prompt": [{"role": "system", "content": "Use the tools."},
                        {"role": "user", "content": f"What is {a} + {b}?"}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(a + b)},
             "extra_info": {"index": i, "split": "train", "need_tools_kwargs": True,
                            "tools_kwargs": {"submit": {"create_kwargs": {"target": a + b}}}}}
            for i, (a, b) in enumerate([(2, 3), (40, 2)])]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    ours = catalogue_rows("verl_tools", "train", {"path": str(tmp_path / "train.parquet")},
                          {"tool_config": files["tools"]})
    assert [r["prompt"] for r in ours] == [r["prompt"] for r in rows]
    assert [r["reward_model"]["ground_truth"] for r in ours] == ["5", "42"]
    assert [r["extra_info"]["category"] for r in ours] == ["openai/gsm8k"] * 2
    env = make_env("verl_tools", tool_config=files["tools"])
    env.reset(**row_task(ours[1]["extra_info"]))
    assert [e[3] for e in LOG if e[:2] == ("create", "submit")] == [{"create_kwargs": {"target": 42}}]
    env.step(call("submit", answer=42))
    assert env.step("42").reward == 1.0


def test_trainings_start_up_check_names_the_key(files, tmp_path) -> None:
    """`agent-tune train` checks agent_tune.env_kwargs.verl_tools at start-up: verl loads the tools there."""
    pytest.importorskip("hydra")
    from agent_tune.errors import ConfigError
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.run_config import RunConfig
    from agent_tune.launch.train import check_env_kwargs

    def check(path: str) -> None:
        override = f"+agent_tune.env_kwargs.verl_tools.tool_config={path}"
        check_env_kwargs(RunConfig.parse(compose_config("agent_tune_grpo_cpu", [override])).options)

    check(files["tools"])
    with pytest.raises(ConfigError, match=r"^config key 'agent_tune.env_kwargs.verl_tools.tool_config': no such file"):
        check(str(tmp_path / "missing.yaml"))


async def test_a_recipe_row_trains_through_verls_agent_loop(files, tmp_path, qwen_tok) -> None:
    """A verl recipe's row, rewritten by the catalogue, played by agent-tune's verl agent loop (what `agent-tune train`
    runs) with the run's env kwargs: verl's tools answer, their calc_reward is the sample's reward."""
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from agent_tune.envs.tasks import catalogue_rows
    from tests.verl_ext.test_agent_loop import ScriptedServerManager
    from verl_ext.agent_loop import AgentTuneLoop

    row = {"data_source": "arith", "prompt": [{"role": "user", "content": "What is 23 * 17?"}],
           "reward_model": {"style": "rule", "ground_truth": "391"},
           "extra_info": {"index": 0, "tools_kwargs": {"submit": {"create_kwargs": {"target": 391}}}}}
    pd.DataFrame([row]).to_parquet(tmp_path / "train.parquet")
    [ours] = catalogue_rows("verl_tools", "train", {"path": str(tmp_path / "train.parquet")})
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 1024}}, "data": {},
        "agent_tune": {"template": "qwen3_instruct", "tool_parser": "hermes", "reasoning_parser": "none",
                       "env_kwargs": {"verl_tools": {"tool_config": files["tools"]}}}})
    server = ScriptedServerManager(qwen_tok, [call("calculator", expression="23 * 17"), call("submit", answer=391),
                                              "391"], "<|im_end|>")
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    out = await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=ours["prompt"],
                         extra_info=ours["extra_info"])
    assert out.reward_score == 1.0 and len(server.calls) == 3
    assert events("submit") == ["create", "execute", "calc_reward", "release"]
    assert "391" in qwen_tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
