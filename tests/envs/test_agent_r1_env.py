"""The agent_r1 adapter: envs written in Agent-R1's shape (a BaseToolEnv whose step(raw) returns (tool_response,
success, active), tools with execute) played unchanged through agent-tune's runner.

The Agent-R1 base classes are not installed here: ``R1BaseTool`` / ``R1BaseToolEnv`` below have their shape (the
abstract methods Agent-R1's ``agent_r1/tool/base.py`` declares), and the envs are written against them as an
Agent-R1 user writes theirs. The ReTool-like env's python tool runs its programs in agent-tune's code sandbox.
"""

from __future__ import annotations

import json
import re
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

import pytest

from agent_tune.envs import check_env, get_env_class, make_env
from agent_tune.envs.agent_r1.env import AgentR1Env
from agent_tune.envs.agent_r1.loading import forget_shared
from agent_tune.envs.time_limits import StartTimeoutError
from agent_tune.tools import shared_sandbox
from agent_tune.utils.typed_config import OptionError

HERE = "tests.envs.test_agent_r1_env"


# ------------------------------------------------------------------ Agent-R1's shape
class R1BaseTool(ABC):
    """A tool as Agent-R1 declares one: a name, a description, JSON-schema parameters, ``execute``."""

    name: str = ""
    description: str = ""
    parameters: dict = {}

    @abstractmethod
    def execute(self, args: dict, **kwargs: Any) -> dict:
        """{"content": text, "success": bool}"""

    def batch_execute(self, args_list: list[dict]) -> list[dict]:
        return [self.execute(args) for args in args_list]

    @property
    def tool_description(self) -> dict:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class R1BaseToolEnv(ABC):
    """A tool env as Agent-R1 declares one: a state transition over the raw response."""

    @abstractmethod
    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        """(tool_response, success, active)"""

    def batch_step(self, raw_responses: list[str]) -> tuple[list[str], list[list[bool]], list[bool]]:
        results = [self.step(r) for r in raw_responses]
        return [r[0] for r in results], [r[1] for r in results], [r[2] for r in results]

    @abstractmethod
    def stop(self, raw_response: str) -> bool: ...

    @abstractmethod
    def extract_tool_calls(self, raw_response: str) -> list[Any]: ...

    @abstractmethod
    def format_tool_response(self, tool_responses: list[str]) -> str: ...

    @property
    def system_prompt(self) -> str:
        return ""


# ------------------------------------------------------------------ a ReTool-like env over our sandbox
class SandboxPythonTool(R1BaseTool):
    """Runs a Python program in agent-tune's shared local sandbox."""

    name = "python"
    description = "Run a Python program; print what you need to see."
    parameters = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}

    def __init__(self) -> None:
        self.sandbox = shared_sandbox({"backend": "local", "limits": {"cpu_seconds": 3, "wall_seconds": 3}})

    def execute(self, args: dict, **kwargs: Any) -> dict:
        result = self.sandbox.run(args["code"])
        if result.ok:
            return {"content": result.stdout.strip() or "(no output)", "success": True}
        return {"content": (result.stderr or result.error or "failed").strip().splitlines()[-1], "success": False}


CODE_BLOCK = re.compile(r"<code>(.*?)</code>", re.S)


class ReToolLikeEnv(R1BaseToolEnv):
    """``<code>`` ... ``</code>`` runs in the python tool, answered in ``<interpreter>`` ... ``</interpreter>``."""

    def __init__(self, tools: list[R1BaseTool], max_tool_response_length: int) -> None:
        self.tool = tools[0]
        assert self.tool.name == "python"
        self.max_tool_response_length = max_tool_response_length

    def extract_tool_calls(self, raw_response: str) -> list[Any]:
        codes = [c.replace("```python", "").replace("```", "").strip() for c in CODE_BLOCK.findall(raw_response)]
        return [c for c in codes if c]

    def format_tool_response(self, tool_responses: list[str]) -> str:
        if not tool_responses:
            return ""
        text = tool_responses[0]
        if len(text) > self.max_tool_response_length:
            text = text[:self.max_tool_response_length] + "..."
        return "\n<interpreter>\n" + text + "\n</interpreter>\n"

    def stop(self, raw_response: str) -> bool:
        return not self.extract_tool_calls(raw_response)

    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        codes = self.extract_tool_calls(raw_response)
        if not codes:
            return "", [], False
        result = self.tool.execute({"code": codes[0]})
        return self.format_tool_response([result["content"]]), [result["success"]], True


def boxed_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    """A verl-style compute_score: the last \\boxed{} against the ground truth."""
    found = re.findall(r"\\boxed\{([^}]*)\}", solution_str)
    return 1.0 if found and found[-1].strip() == str(ground_truth) else 0.0


RETOOL = {"env": f"{HERE}:ReToolLikeEnv", "tools": [f"{HERE}:SandboxPythonTool"],
          "env_kwargs": {"max_tool_response_length": 64}, "stop": ["</code>"], "reward_fn": f"{HERE}:boxed_score"}
TASK = {"prompt": [{"role": "user", "content": "What is 6 * 7?"}], "reward_model": {"ground_truth": "42"},
        "data_source": "toy"}
CODE = "Let me compute it.\n<code>\nprint(6 * 7)\n</code>"
ANSWER = "So the answer is \\boxed{42}."


@pytest.fixture(autouse=True)
def fresh_builds():
    forget_shared()
    yield
    forget_shared()


def test_registered_with_the_envs_stop_strings_and_raw_text_observations() -> None:
    assert get_env_class("agent_r1") is AgentR1Env
    env = make_env("agent_r1", **RETOOL)
    hints = env.sampler_hints
    assert hints.stop == ("</code>",) and hints.include_stop_str_in_output and hints.observation_kind == "text"


def test_a_step_is_the_envs_own_answer_appended_as_it_is() -> None:
    env = make_env("agent_r1", **RETOOL)
    obs = env.reset(**TASK)
    assert obs.messages == TASK["prompt"]
    assert obs.tools == [SandboxPythonTool().tool_description]  # the prompt lists the tools, as Agent-R1's does
    first = env.step(CODE)
    assert first.observation.text == "\n<interpreter>\n42\n</interpreter>\n" and not first.done
    assert first.info["calls"] == ["python"] and first.info["tool_success"] == [True]
    last = env.step(ANSWER)
    assert last.done and last.reward == 1.0 and last.info["accuracy"] == 1.0 and last.info["stop_reason"] == "done"
    assert last.info["num_calls"] == 1 and last.info["format_errors"] == 0 and last.episode.turns_completed == 1


async def test_an_episode_is_token_exact_through_the_runner(qwen_tok) -> None:
    """The policy's tokens (mask 1), the env's raw text right after the stop string (mask 0, nothing added around
    it), the answer (mask 1): the next prompt is the previous one extended, and the reward function read the
    response as appended."""
    from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
    from tests.rollout.scripted import Reply, ScriptedPolicy

    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    seen: list[str] = []
    policy = ScriptedPolicy(renderer, [Reply(CODE, end_of_turn=False), ANSWER])
    env = make_env("agent_r1", **RETOOL)
    wrapped = env.reward_fn
    env.reward_fn = lambda **kw: (seen.append(kw["solution_str"]), wrapped(**kw))[1]
    result = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), task=TASK)
    obs = "\n<interpreter>\n42\n</interpreter>\n"
    code_ids, obs_ids, answer_ids = renderer.encode(CODE), renderer.encode(obs), renderer.encode(ANSWER)
    traj = result.trajectory
    assert traj.response_ids == code_ids + obs_ids + answer_ids + [renderer.end_of_turn_id]
    assert traj.response_mask == [1] * len(code_ids) + [0] * len(obs_ids) + [1] * (len(answer_ids) + 1)
    assert len(traj.response_logprobs) == len(traj.response_ids)
    first_prompt, second_prompt = policy.calls[0][0], policy.calls[1][0]
    assert second_prompt == first_prompt + code_ids + obs_ids
    assert '"name": "python"' in renderer.decode(first_prompt)  # the tool schema is in the rendered prompt
    assert policy.calls[0][1]["stop"] == ["</code>"] and policy.calls[0][1]["include_stop_str_in_output"] is True
    assert result.reward == 1.0 and result.stop_reason == "done"
    assert seen == [CODE + obs + ANSWER]
    assert result.messages[-1] == {"role": "assistant", "content": CODE + obs + ANSWER}


def test_check_env_passes() -> None:
    check_env(lambda: make_env("agent_r1", **RETOOL), TASK, CODE, "<cod>print(1)</code>")


# ------------------------------------------------------------------ a Nous-like env: JSON calls, None when undecodable
class EchoTool(R1BaseTool):
    name = "echo"
    description = "Echo the text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def execute(self, args: dict, **kwargs: Any) -> dict:
        return {"content": args["text"], "success": True}


class NousLikeEnv(R1BaseToolEnv):
    """``<tool_call>{json}</tool_call>``; a block that is not JSON is extracted as None and answered with an error."""

    def __init__(self, tools: list[R1BaseTool]) -> None:
        self.tools = {t.name: t for t in tools}

    def extract_tool_calls(self, raw_response: str) -> list[Any]:
        calls = []
        for block in re.findall(r"<tool_call>(.*?)</tool_call>", raw_response, re.S):
            try:
                calls.append(json.loads(block))
            except json.JSONDecodeError:
                calls.append(None)
        return calls

    def format_tool_response(self, tool_responses: list[str]) -> str:
        body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in tool_responses)
        return "<|im_end|>\n<|im_start|>user\n" + body + "<|im_end|>\n<|im_start|>assistant\n"

    def stop(self, raw_response: str) -> bool:
        return not self.extract_tool_calls(raw_response)

    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        calls = self.extract_tool_calls(raw_response)
        if not calls:
            return "", [], False
        texts, success = [], []
        for call in calls:
            if call is None:
                texts.append("Error: JSONDecodeError")
                success.append(False)
            elif call.get("name") not in self.tools:
                texts.append("Error: ToolNotFoundError")
                success.append(False)
            else:
                result = self.tools[call["name"]].execute(call.get("arguments") or {})
                texts.append(result["content"])
                success.append(result["success"])
        return self.format_tool_response(texts), success, True

    def compute_score(self, data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None) -> dict:
        """The env's own reward: a dict, as verl's reward functions may return."""
        hit = str(ground_truth) in solution_str.rsplit("<|im_start|>assistant\n", 1)[-1]
        return {"score": 0.5 if hit else 0.0, "acc": hit}


NOUS = {"env": f"{HERE}:NousLikeEnv", "tools": [f"{HERE}:EchoTool"], "stop": ["</tool_call>"]}
CALL = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'


def test_malformed_calls_are_counted_format_errors_and_tool_failures_are_not() -> None:
    env = make_env("agent_r1", **NOUS)
    env.reset(prompt="Say hi.", ground_truth="hi")
    bad = env.step('<tool_call>{"name": "echo", </tool_call>')  # not JSON: the env extracts None
    assert bad.info["format_errors"] == 1 and not bad.done
    assert "Error: JSONDecodeError" in bad.observation.text and bad.observation.text.startswith("<|im_end|>")
    unknown = env.step('<tool_call>{"name": "shout", "arguments": {}}</tool_call>')  # the env marks it failed
    assert unknown.info["format_errors"] == 0 and unknown.info["tool_success"] == [False]
    good = env.step(CALL)
    assert good.info["calls"] == ["echo"] and "hi" in good.observation.text
    end = env.step("The tool said hi.")
    assert end.done and end.info["tool_failures"] == 2 and end.episode.format_errors == 1
    # no reward_fn: the env's own compute_score, its dict read (score, acc, the other keys kept)
    assert end.reward == 0.5 and end.info["accuracy"] == 1.0

    retool = make_env("agent_r1", **RETOOL)
    retool.reset(**TASK)
    unread = retool.step("<cod>print(1)</code>")  # ended on the stop string, yet the env read no call
    assert unread.done and unread.info["format_errors"] == 1 and unread.info["stop_reason"] == "done"
    retool.reset(**TASK)
    failing = retool.step("<code>\nprint(1 / 0)\n</code>")  # the program fails: the tool's failure, not a format error
    assert "ZeroDivisionError" in failing.observation.text and failing.info["format_errors"] == 0
    assert failing.info["tool_success"] == [False]


# ------------------------------------------------------------------ envs that fail or block
class RaisingEnv(ReToolLikeEnv):
    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        raise RuntimeError("the sandbox is gone")


class BadOutputEnv(ReToolLikeEnv):
    def step(self, raw_response: str) -> Any:
        return "just text"


RELEASE = threading.Event()


class BlockingEnv(ReToolLikeEnv):
    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        RELEASE.wait(30)
        return super().step(raw_response)


class BlockingStopEnv(ReToolLikeEnv):
    def step(self, raw_response: str) -> tuple[str, list[bool], bool]:
        return "\n<interpreter>\nok\n</interpreter>\n", [True], True  # no program: only stop() takes time

    def stop(self, raw_response: str) -> bool:
        RELEASE.wait(30)
        return False


class SlowTool(SandboxPythonTool):
    def __init__(self) -> None:
        RELEASE.wait(30)
        super().__init__()


@pytest.fixture
def release():
    RELEASE.clear()
    yield RELEASE
    RELEASE.set()


@pytest.mark.parametrize("cls,why", [("RaisingEnv", "step() failed (RuntimeError: the sandbox is gone)"),
                                     ("BadOutputEnv", "step() failed (TypeError: step() returned str 'just text', "
                                                      "not (tool_response, success, active))")])
def test_an_env_failing_on_the_text_ends_the_episode_as_a_counted_format_error(cls: str, why: str) -> None:
    env = make_env("agent_r1", **{**RETOOL, "env": f"{HERE}:{cls}"})
    env.reset(**TASK)
    result = env.step(CODE)
    assert result.done and result.info["stop_reason"] == "env_error" and result.info["format_errors"] == 1
    assert why in result.info["error"] and result.reward == 0.0


@pytest.mark.parametrize("cls,method", [("BlockingEnv", "step()"), ("BlockingStopEnv", "stop()")])
def test_an_env_that_blocks_ends_the_episode_after_call_timeout(release, cls: str, method: str) -> None:
    env = make_env("agent_r1", **{**RETOOL, "env": f"{HERE}:{cls}", "call_timeout": 0.3})
    env.reset(**TASK)
    t0 = time.perf_counter()
    result = env.step(CODE)
    assert time.perf_counter() - t0 < 3.0
    assert result.done and result.info["stop_reason"] == "timeout"  # the time-limit rule's outcome
    assert result.info["error"] == f"no answer in 0.3 s (agent_r1 env {HERE}:{cls} {method})"
    assert result.info["format_errors"] == 0 and result.reward == 0.0


async def test_a_blocking_env_does_not_hold_up_the_runner(release, qwen_tok) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
    from tests.rollout.scripted import Reply, ScriptedPolicy

    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    env = make_env("agent_r1", **{**RETOOL, "env": f"{HERE}:BlockingEnv", "call_timeout": 0.3})
    policy = ScriptedPolicy(renderer, [Reply(CODE, end_of_turn=False)])
    result = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), task=TASK)
    assert result.stop_reason == "timeout" and result.info["error"].startswith("no answer in 0.3 s")
    assert result.reward == 0.0
    assert result.trajectory.response_mask == [1] * len(renderer.encode(CODE))


async def test_a_build_beyond_start_timeout_is_an_episode_not_played(release, qwen_tok) -> None:
    import asyncio

    from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
    from tests.rollout.scripted import Reply, ScriptedPolicy

    kwargs = {**RETOOL, "tools": [f"{HERE}:SlowTool"], "start_timeout": 0.3}
    env = make_env("agent_r1", **kwargs)
    t0 = time.perf_counter()
    with pytest.raises(StartTimeoutError, match=r"^no answer in 0.3 s \(agent_r1 env .*:ReToolLikeEnv build\)$"):
        await asyncio.to_thread(env.reset, **TASK)
    assert time.perf_counter() - t0 < 3.0
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    policy = ScriptedPolicy(renderer, [Reply(CODE, end_of_turn=False)])
    result = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), task=TASK)
    assert result.stop_reason == "timeout" and result.num_generations == 0 and result.reward == 0.0
    assert result.trajectory.response_ids == [] and result.info["error"].endswith("build)")
    release.set()  # the build goes on; the next episode's start waits for the same one
    later = make_env("agent_r1", **{**kwargs, "start_timeout": 30.0})
    assert later.reset(**TASK).tools is not None
    assert (await later.astep(CODE)).observation.text.startswith("\n<interpreter>")


# ------------------------------------------------------------------ options, tasks, reward
class NotAnEnv:
    def step(self, raw_response: str) -> Any: ...


@pytest.mark.parametrize("change,key", [
    ({"env": "tests.envs.no_such_module:Env"}, "env"),
    ({"env": f"{HERE}:Missing"}, "env"),
    ({"env": f"{HERE}:NotAnEnv"}, "env"),
    ({"env": "ReToolLikeEnv"}, "env"),
    ({"tools": ["tests.envs.no_such_module:Tool"]}, "tools[0]"),
    ({"tools": [f"{HERE}:SandboxPythonTool", f"{HERE}:NotAnEnv"]}, "tools[1]"),
    ({"tools": [{"path": f"{HERE}:EchoTool", "args": {}}]}, "tools[0]"),
    ({"reward_fn": f"{HERE}:nothing_here"}, "reward_fn"),
    ({"stop": "</code>"}, "stop"),
    ({"call_timeout": 0.0}, "call_timeout"),
    ({"start_timeout": -1.0}, "start_timeout"),
    ({"max_steps": 0}, "max_steps"),
    ({"env_kwargs": {"tools": []}}, "env_kwargs.tools"),
])
def test_bad_options_fail_at_construction_naming_the_key(change: dict, key: str) -> None:
    with pytest.raises(OptionError) as raised:
        make_env("agent_r1", **{**RETOOL, **change})
    assert raised.value.key == key and f"config key {key!r}" in str(raised.value)


def test_check_kwargs_builds_the_env_once_so_a_broken_constructor_fails_at_start_up() -> None:
    AgentR1Env.check_kwargs(RETOOL)
    with pytest.raises(ValueError, match="could not be built .*max_tool_response_length"):
        AgentR1Env.check_kwargs({**RETOOL, "env_kwargs": {}})
    with pytest.raises(ValueError, match="unexpected keyword"):
        AgentR1Env.check_kwargs({**RETOOL, "max_turns": 3})


class WithPromptEnv(ReToolLikeEnv):
    system_prompt = " Use <code> to compute."


def test_a_row_the_system_prompt_and_one_build_per_process() -> None:
    row = {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6 * 7?"}],
           "reward_model": {"ground_truth": "42", "style": "rule"}, "data_source": "toy", "ability": "math",
           "extra_info": {"index": 3}}
    seen: dict[str, Any] = {}
    env = make_env("agent_r1", **{**RETOOL, "env": f"{HERE}:WithPromptEnv", "custom_system_prompt": True})
    env.reward_fn = lambda **kw: (seen.update(kw), 1.0)[1]
    obs = env.reset(row=json.dumps(row))
    assert obs.tools is None and obs.messages[0] == {"role": "system", "content": "Be brief. Use <code> to compute."}
    env.step(ANSWER)
    assert seen == {"data_source": "toy", "solution_str": ANSWER, "ground_truth": "42", "extra_info": {"index": 3}}
    with pytest.raises(TypeError, match="needs a prompt"):
        env.reset(ground_truth="1")
    # the envs of a process share one build, as Agent-R1's run shares one env
    a, b = make_env("agent_r1", **RETOOL), make_env("agent_r1", **RETOOL)
    a.reset(**TASK)
    b.reset(**TASK)
    assert a.r1 is b.r1


def raising_score(**kwargs: Any) -> float:
    raise ValueError("no grader")


def test_step_limit_and_a_failing_reward_function() -> None:
    env = make_env("agent_r1", **{**RETOOL, "max_steps": 2})
    env.reset(**TASK)
    assert not env.step(CODE).done
    last = env.step(CODE)  # the generation reaching the limit is still stepped, then the episode ends
    assert last.done and last.info["stop_reason"] == "step_limit" and last.info["num_calls"] == 2
    env = make_env("agent_r1", **{**RETOOL, "reward_fn": f"{HERE}:raising_score"})
    env.reset(**TASK)
    end = env.step(ANSWER)
    assert end.reward == 0.0 and end.info["reward_error"] == "ValueError: no grader"
    assert end.info["stop_reason"] == "env_error"
    bare = make_env("agent_r1", **{**RETOOL, "reward_fn": None})
    bare.reset(**TASK)
    assert bare.step(ANSWER).info["reward_source"] == "none"


def blocking_score(**kwargs: Any) -> float:
    RELEASE.wait(30)
    return 1.0


def test_a_reward_function_beyond_call_timeout_ends_as_a_timeout(release) -> None:
    env = make_env("agent_r1", **{**RETOOL, "reward_fn": f"{HERE}:blocking_score", "call_timeout": 0.3})
    env.reset(**TASK)
    t0 = time.perf_counter()
    end = env.step(ANSWER)
    assert time.perf_counter() - t0 < 3.0
    assert end.done and end.reward == 0.0 and end.info["stop_reason"] == "timeout"
    assert end.info["error"] == f"no answer in 0.3 s (agent_r1 env {HERE}:ReToolLikeEnv reward)"


def test_the_rows_an_agent_r1_preprocessing_script_writes_are_the_catalogue(tmp_path) -> None:
    """verl-format parquet rows (one file per split, as Agent-R1's preprocessing writes them) become agent-tune rows
    whose task, played, is scored against the row's own ground truth."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agent_tune.envs.tasks import catalogue_rows, row_task

    def rows(n: int, split: str) -> list[dict]:
        return [{"data_source": "toy/mult", "prompt": [{"role": "user", "content": f"What is 6 * {7 + i}?"}],
                 "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(6 * (7 + i))},
                 "extra_info": {"split": split, "index": i}} for i in range(n)]

    files = {"train": tmp_path / "train.parquet", "test": tmp_path / "validation.parquet"}
    pq.write_table(pa.Table.from_pylist(rows(3, "train")), files["train"])
    pq.write_table(pa.Table.from_pylist(rows(2, "test")), files["test"])
    options = {"path": {k: str(v) for k, v in files.items()}}
    written = catalogue_rows("agent_r1", "test", options, RETOOL)
    assert [r["extra_info"]["id"] for r in written] == ["validation:1", "validation:2"]
    assert written[1]["prompt"] == [{"role": "user", "content": "What is 6 * 8?"}]
    assert written[1]["reward_model"]["ground_truth"] == "48" and written[1]["data_source"] == "agent_r1/toy/mult"
    env = make_env("agent_r1", **RETOOL)
    env.reset(**row_task(written[1]["extra_info"]))
    assert env.step("\\boxed{48}").reward == 1.0
    with pytest.raises(ValueError, match="no row of .* has extra_info.split == 'test'"):
        catalogue_rows("agent_r1", "test", {"path": str(files["train"])}, RETOOL)


class CountingBatchEnv(ReToolLikeEnv):
    """Records the batches its batch_step receives; steps them with the inherited one-by-one batch_step."""

    batches: list[list[str]] = []

    def batch_step(self, raw_responses: list[str]) -> tuple[list[str], list[list[bool]], list[bool]]:
        type(self).batches.append(list(raw_responses))
        return super().batch_step(raw_responses)


class BrokenBatchEnv(ReToolLikeEnv):
    def batch_step(self, raw_responses: list[str]) -> Any:
        return ["only one"], [[True]], [True]


async def test_batch_tool_calls_step_concurrent_episodes_together() -> None:
    """Agent-R1's use_batch_tool_calls: the generations of concurrent episodes reach batch_step as one batch, each
    episode gets its own answer back; a batch_step that answers the wrong number of responses fails every episode
    of the batch, counted."""
    import asyncio

    CountingBatchEnv.batches = []
    kwargs = {**RETOOL, "env": f"{HERE}:CountingBatchEnv", "batch_tool_calls": True, "batch_window": 0.5}
    envs = [make_env("agent_r1", **kwargs) for _ in range(3)]
    for env in envs:
        env.reset(**TASK)
    raws = [f"<code>\nprint({i} * 11)\n</code>" for i in range(3)]
    results = await asyncio.gather(*(env.astep(raw) for env, raw in zip(envs, raws)))
    assert [sorted(b) for b in CountingBatchEnv.batches] == [sorted(raws)]
    assert [r.observation.text for r in results] == [f"\n<interpreter>\n{i * 11}\n</interpreter>\n" for i in range(3)]
    last = await envs[0].astep(ANSWER)  # stop(raw) says the episode is over
    assert last.done and CountingBatchEnv.batches[-1] == [ANSWER]

    broken = [make_env("agent_r1", **{**kwargs, "env": f"{HERE}:BrokenBatchEnv"}) for _ in range(2)]
    for env in broken:
        env.reset(**TASK)
    failed = await asyncio.gather(*(env.astep(CODE) for env in broken))
    assert all(r.done and r.info["stop_reason"] == "env_error" and "batch_step() of 2 responses" in r.info["error"]
               for r in failed)


async def test_a_blocking_batch_step_ends_each_episode_after_call_timeout(release) -> None:
    import asyncio

    kwargs = {**RETOOL, "env": f"{HERE}:BlockingEnv", "batch_tool_calls": True, "call_timeout": 0.4}
    envs = [make_env("agent_r1", **kwargs) for _ in range(2)]
    for env in envs:
        env.reset(**TASK)
    t0 = time.perf_counter()
    results = await asyncio.gather(*(env.astep(CODE) for env in envs))
    assert time.perf_counter() - t0 < 3.0
    assert all(r.info["stop_reason"] == "timeout" and r.info["error"].startswith("no answer in 0.4 s")
               and r.info["error"].endswith("batch_step())") for r in results)


async def test_a_catalogue_row_trains_through_verls_agent_loop(qwen_tok) -> None:
    """What a training step does with an Agent-R1 env: verl's agent loop builds the adapter from the config's
    agent_tune.env_kwargs.agent_r1 and the row's task, the sampler gets the env's stop string, the env's raw text is
    masked out and the reward function's score is the sample's reward."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from tests.verl_ext.test_agent_loop import _TextServer
    from verl_ext.agent_loop import AgentTuneLoop

    cfg = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 2048}}, "data": {},
        "agent_tune": {"template": "tokenizer", "env_kwargs": {"agent_r1": RETOOL}},
    })
    server = _TextServer(qwen_tok, [CODE, ANSWER])
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    task = {"row": json.dumps(TASK)}
    row = {"raw_prompt": [], "extra_info": {"index": 0, "task": json.dumps(task),
                                             "env": {"name": "agent_r1", "kwargs": None}}}
    out = await loop.run({"temperature": 1.0, "logprobs": True}, **row)
    assert server.calls[0]["params"]["stop"] == ["</code>"]
    assert out.reward_score == 1.0
    env_ids = [t for t, m in zip(out.response_ids, out.response_mask) if m == 0]
    assert env_ids == qwen_tok.encode("\n<interpreter>\n42\n</interpreter>\n", add_special_tokens=False)
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m == 1] == server.emitted
