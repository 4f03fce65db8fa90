"""ReTool environment: full scripted episodes against the real local sandbox."""

from __future__ import annotations

import pytest

from agent_tune.envs import BaseToolEnv, get_env_class, make_env
from agent_tune.envs.base import EnvStateError, StopReason
from agent_tune.envs.retool.env import ReToolToolEnv
from agent_tune.tools import ExecutionLimits, ExecutionResult, LocalSandbox


@pytest.fixture(scope="module")
def sandbox():
    box = LocalSandbox(limits=ExecutionLimits(cpu_seconds=3, wall_seconds=3), max_concurrency=4)
    yield box
    box.close()


def new_env(sandbox, **kw) -> ReToolToolEnv:
    env = ReToolToolEnv(sandbox=sandbox, **kw)
    return env


def test_registered_and_declares_sampler_hints(sandbox):
    assert get_env_class("retool") is ReToolToolEnv
    hints = ReToolToolEnv.sampler_hints
    assert hints.stop == ("</code>",) and hints.include_stop_str_in_output and hints.observation_kind == "text"
    env = make_env("retool", sandbox=sandbox)
    assert isinstance(env, BaseToolEnv)


def test_reset_prompt(sandbox):
    obs = new_env(sandbox).reset(question="What is 2+3?", ground_truth="5")
    roles = [m["role"] for m in obs.messages]
    assert roles == ["system", "user"] and obs.messages[1]["content"] == "What is 2+3?"
    assert "<code>" in obs.messages[0]["content"] and "\\boxed" in obs.messages[0]["content"]
    obs = new_env(sandbox, system_prompt=None, user_template="Q: {question}\nUse <code>.").reset(
        question="1+1?", ground_truth="2"
    )
    assert obs.messages == [{"role": "user", "content": "Q: 1+1?\nUse <code>."}]
    with pytest.raises(ValueError, match="question"):
        new_env(sandbox).reset(question="", ground_truth="1")
    with pytest.raises(ValueError, match="ground_truth"):
        new_env(sandbox).reset(question="q", ground_truth=" ")
    with pytest.raises(TypeError, match="ground_truth"):  # a task without it
        new_env(sandbox).reset(question="q")
    with pytest.raises(TypeError, match="data_source"):  # a key the env does not know: named, never dropped
        new_env(sandbox).reset(question="q", ground_truth="1", data_source="x")
    with pytest.raises(ValueError, match="user_template"):
        new_env(sandbox, user_template="no placeholder")


def test_full_episode_code_then_boxed_answer(sandbox):
    env = new_env(sandbox)
    env.reset(question="What is 1/2 as a decimal?", ground_truth="0.5")
    r1 = env.step("Let me compute it.\n<code>\n```python\nx = 1 / 2\nprint(x)\n```\n</code>")
    assert r1.observation.text == "\n<interpreter>\n0.5\n</interpreter>\n"
    assert not r1.done and r1.reward == 0.0 and r1.info["num_tool_calls"] == 1
    r2 = env.step("The interpreter says 0.5.\n<code>print(2 ** 10)</code>")
    assert r2.observation.text == "\n<interpreter>\n1024\n</interpreter>\n"
    r3 = env.step(" So the answer is $\\boxed{\\frac{1}{2}}$.")
    assert r3.done and r3.reward == 1.0 and r3.observation.is_empty
    assert r3.info["accuracy"] == 1.0 and r3.info["answer"] == "\\frac{1}{2}"
    assert r3.info["num_tool_calls"] == 2 and r3.info["format_errors"] == 0 and r3.info["num_steps"] == 3
    with pytest.raises(EnvStateError, match="no episode running"):
        env.step("more")


@pytest.mark.parametrize(
    "answer,truth,correct",
    [("\\frac{1}{2}", "0.5", True), ("0.5", "\\frac{1}{2}", True), ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", True),
     ("10", "10.0", True), ("3", "4", False), ("x+1", "1+x", True)],
)
def test_answer_equivalence(sandbox, answer, truth, correct):
    env = new_env(sandbox, incorrect_reward=-1.0)
    env.reset(question="q?", ground_truth=truth)
    r = env.step(f"Final: \\boxed{{{answer}}}")
    assert r.done and r.info["accuracy"] == (1.0 if correct else 0.0)
    assert r.reward == (1.0 if correct else -1.0)


def test_no_answer_penalty(sandbox):
    env = new_env(sandbox, incorrect_reward=0.0, no_answer_penalty=0.5)
    env.reset(question="q?", ground_truth="3")
    r = env.step("I give up.")
    assert r.done and r.reward == -0.5 and r.info["has_answer"] is False and r.info["accuracy"] == 0.0


def test_boxed_inside_code_does_not_count(sandbox):
    env = new_env(sandbox)
    env.reset(question="q?", ground_truth="7")
    env.step("<code>print('\\\\boxed{7}')</code>")
    r = env.step("Done, no boxed answer in prose.")
    assert r.info["answer"] is None and r.reward == 0.0


def test_errors_and_limits_reach_the_model(sandbox):
    env = new_env(sandbox, max_tool_calls=10)
    env.reset(question="q?", ground_truth="1")
    r = env.step("<code>1/0</code>")
    assert "ZeroDivisionError" in r.observation.text and not r.done
    r = env.step("<code>import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)</code>")
    assert "OSError" in r.observation.text or "unreachable" in r.observation.text
    r = env.step("<code>import time\ntime.sleep(30)</code>")
    assert "Error: TimeoutError" in r.observation.text and r.info["timed_out"]
    r = env.step("<code></code>")
    assert "empty" in r.observation.text and r.info["format_errors"] == 1 and r.info["num_tool_calls"] == 4
    r = env.step("<code>print(open('/etc/passwd').read())</code>")
    assert "FileNotFoundError" in r.observation.text


def test_tool_call_limit(sandbox):
    env = new_env(sandbox, max_tool_calls=2)
    env.reset(question="q?", ground_truth="3")
    assert not env.step("<code>print(1)</code>").done
    assert not env.step("<code>print(2)</code>").done
    r = env.step("\\boxed{3} and one more <code>print(3)</code>")
    assert r.done and r.info["tool_call_limit_reached"] and r.info["num_tool_calls"] == 2
    assert r.reward == 1.0  # the answer given before the refused call still counts


def test_truncation_marker(sandbox):
    env = new_env(sandbox, max_tool_response_chars=100)
    env.reset(question="q?", ground_truth="1")
    r = env.step("<code>print('a' * 1000)</code>")
    body = r.observation.text[len("\n<interpreter>\n") : -len("\n</interpreter>\n")]
    assert body.startswith("a" * 100) and "a" * 101 not in body
    assert "[output truncated: 900 more characters]" in body


def test_unterminated_code_block_ends_episode(sandbox):
    env = new_env(sandbox, no_answer_penalty=1.0)
    env.reset(question="q?", ground_truth="1")
    r = env.step("Let me try <code>\nfor i in range(10):\n    print(")
    assert r.done and r.info["unterminated_code"] and r.info["format_errors"] == 1 and r.reward == -1.0
    assert r.info["num_tool_calls"] == 0


def test_extract_tool_calls(sandbox):
    env = new_env(sandbox)
    parsed = env.extract_tool_calls("text <code>\n```py\nprint(1)\n```\n</code> tail")
    assert [c.name for c in parsed.calls] == ["python"] and parsed.calls[0].arguments == {"code": "print(1)"}
    assert parsed.content == "text  tail" and not parsed.errors
    parsed = env.extract_tool_calls("<code>a=1</code><code>\n</code><code>b")
    assert len(parsed.calls) == 1 and [e.reason for e in parsed.errors] == [
        "empty <code> block", "unterminated <code> block (no </code>)"
    ]
    assert env.is_answer("plain answer \\boxed{2}") and not env.is_answer("<code>x</code>")


def test_multiple_blocks_run_first_and_count_format_error(sandbox):
    env = new_env(sandbox)
    env.reset(question="q?", ground_truth="1")
    r = env.step("<code>print('first')</code> and <code>print('second')</code>")
    assert "first" in r.observation.text and "second" not in r.observation.text and r.info["format_errors"] == 1


def test_batch_step_runs_in_parallel(sandbox):
    envs = [new_env(sandbox) for _ in range(6)]
    for i, e in enumerate(envs):
        e.reset(question=f"q{i}", ground_truth=str(i))
    responses = [f"<code>import time\ntime.sleep(0.5)\nprint({i} * 3)</code>" for i in range(5)] + ["\\boxed{5}"]
    import time

    t0 = time.monotonic()
    results = ReToolToolEnv.batch_step(envs, responses)
    assert time.monotonic() - t0 < 5 * 0.5  # four at a time, not one after another
    for i in range(5):
        assert results[i].observation.text == f"\n<interpreter>\n{i * 3}\n</interpreter>\n"
    assert results[5].done and results[5].reward == 1.0
    with pytest.raises(ValueError):
        ReToolToolEnv.batch_step(envs, responses[:2])


async def test_concurrent_steps_run_in_parallel(sandbox):
    """The runner awaits concurrent ReTool steps (``astep``): their programs run in the sandbox pool at once."""
    import asyncio
    import time

    envs = [new_env(sandbox) for _ in range(4)]
    for e in envs:
        e.reset(question="q", ground_truth="4")
    t0 = time.monotonic()
    results = await asyncio.gather(
        *(e.astep("<code>import time\ntime.sleep(0.5)\nprint(2 + 2)</code>") for e in envs)
    )
    assert time.monotonic() - t0 < 4 * 0.5  # in parallel, not one after another
    assert all(r.observation.text == "\n<interpreter>\n4\n</interpreter>\n" for r in results)
    r = await envs[0].astep("\\boxed{4}")
    assert r.done and r.reward == 1.0


def test_two_episodes_independent(sandbox):
    a, b = new_env(sandbox), new_env(sandbox)
    a.reset(question="qa", ground_truth="1")
    b.reset(question="qb", ground_truth="2")
    a.step("<code>print(1)</code>")
    rb = b.step("\\boxed{2}")
    ra = a.step("\\boxed{1}")
    assert ra.reward == rb.reward == 1.0 and ra.info["num_tool_calls"] == 1 and rb.info["num_tool_calls"] == 0


def test_render_result():
    r = ReToolToolEnv.render_result(ExecutionResult("", "", 0))
    assert r == "(no output)"
    r = ReToolToolEnv.render_result(ExecutionResult("partial\n", "", None, timed_out=True, error="TimeoutError: x"))
    assert r == "partial\nError: TimeoutError: x"
    r = ReToolToolEnv.render_result(ExecutionResult("", "", 3))
    assert r == "Error: the program exited with status 3"


def test_unfinished_episode_scores_no_better_than_no_answer() -> None:
    from agent_tune.envs import make_env

    env = make_env("retool", no_answer_penalty=0.5)
    env.reset(question="What is 2+2?", ground_truth="4")
    r = env.finalize(StopReason.TOKEN_BUDGET)
    assert r.done and r.reward == -0.5 and r.info["stop_reason"] == "token_budget" and r.info["accuracy"] == 0.0
