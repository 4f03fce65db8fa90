"""The package's ScriptedPolicy drives run_episode, as docs/envs.md shows it (the example there runs here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

DOC = Path(__file__).resolve().parents[2] / "docs" / "envs.md"


def test_the_docs_example_runs_and_prints_what_it_says(capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    example = next(b for b in blocks if "ScriptedPolicy" in b)
    exec(compile(example, str(DOC), "exec"), {"__name__": "docs_envs_example"})  # our own doc, not model output
    assert capsys.readouterr().out.split() == ["1.0", "1", "done"]


async def test_replies_as_a_function_and_running_out(qwen_tok) -> None:
    from agent_tune.envs import make_env

    renderer = ChatRenderer(qwen_tok, template="qwen3")
    env = make_env("examples.envs.calculator:CalculatorEnv")
    policy = ScriptedPolicy(renderer, lambda prompt: "The answer is 5." if "What is 2 + 3?" in prompt else "?")
    result = await run_episode(env, policy, renderer, RolloutLimits(4096, 256), task={"question": "What is 2 + 3?",
                                                                                       "answer": 5})
    assert result.reward == 1.0 and len(policy.prompts) == 1
    assert result.trajectory.response_ids[-1] == renderer.end_of_turn_id
    short = ScriptedPolicy(renderer, ['<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}}\n'
                                      "</tool_call>"])
    with pytest.raises(IndexError, match="1 replies; generation 2"):
        await run_episode(make_env("examples.envs.calculator:CalculatorEnv"), short, renderer,
                          RolloutLimits(4096, 256), task={"question": "q", "answer": 1})
