"""verl's ``global_steps`` (a row kwarg of the v1 trainer) reaches the env through the agent loop, and the
trainer's total steps reach ToolRL's reward schedules through the config."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from tests.verl_ext.test_agent_loop import ScriptedServerManager  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop, trainer_step  # noqa: E402

ANSWER = ('<think> add them </think>\n<tool_call>\n'
          + json.dumps({"name": "add", "parameters": {"a": 2, "b": 3}}) + "\n</tool_call>")
WRONG_B = ANSWER.replace('"b": 3', '"b": 4')  # S = 3 of 4
TASK = {"question": "What is 2 plus 3?", "ground_truth": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
        "tools": [{"name": "add", "parameters": {"type": "object", "properties": {}}}]}


def _config(reward: dict) -> OmegaConf:
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 256}},
        "data": {},
        "trainer": {"total_training_steps": 10},
        "agent_tune": {"template": "tokenizer", "tool_parser": "toolrl", "reasoning_parser": "none",
                       "env_kwargs": {"toolcall": {"answer_format": "toolrl", "reward": reward}}},
    })


async def _reward(tokenizer, reward: dict, answer: str = ANSWER, **row_kwargs) -> float:
    cfg = _config(reward)
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=ScriptedServerManager(
        tokenizer, [answer], "<|im_end|>"), tokenizer=tokenizer, processor=None, dataset_cls=None,
        data_config=DictConfigWrap(cfg.data))
    row = {"raw_prompt": [], "extra_info": {"index": 0, **TASK, "env": {"name": "toolcall", "kwargs": None}},
           **row_kwargs}
    return (await loop.run({"temperature": 1.0, "logprobs": True}, **row)).reward_score


async def test_global_steps_reach_the_reward_schedule(qwen_tok) -> None:
    two_stage = {"scale": "two_stage"}
    assert await _reward(qwen_tok, two_stage, global_steps=5) == pytest.approx(2.0)  # format 1 + max 1
    assert await _reward(qwen_tok, two_stage, global_steps=30) == pytest.approx(3.5)  # format 0.5 + max 3
    assert await _reward(qwen_tok, two_stage) == pytest.approx(2.0)  # no step (legacy trainer): step 0


async def test_total_training_steps_interpolation_reaches_the_schedule(qwen_tok) -> None:
    # smooth, p = step / horizon: format 2 - p, correctness -(2 + p) + 2 (2 + p) * 3/4 = (2 + p) / 2
    smooth = {"scale": "smooth", "smooth_schedule_steps": None,
              "total_training_steps": "${trainer.total_training_steps}"}
    # the horizon is the trainer's 10 steps: step 5, p = 0.5: 1.5 + 1.25
    assert await _reward(qwen_tok, smooth, WRONG_B, global_steps=5) == pytest.approx(2.75)
    assert await _reward(qwen_tok, smooth, WRONG_B, global_steps=10) == pytest.approx(1.0 + 1.5)
    # a horizon of 20: p = 0.25: 1.75 + 1.125
    twenty = {**smooth, "total_training_steps": 20}
    assert await _reward(qwen_tok, twenty, WRONG_B, global_steps=5) == pytest.approx(2.875)


def test_trainer_step() -> None:
    assert trainer_step({"global_steps": 3}) == 3 and trainer_step({}) is None
    np = pytest.importorskip("numpy")
    assert trainer_step({"global_steps": np.int64(4)}) == 4


def test_sample_step_falls_back_to_the_step_after_the_weight_version() -> None:
    from verl_ext.agent_loop import sample_step

    assert sample_step({"global_steps": 3}, {"min_global_steps": 1}) == 3
    # legacy / one-step-off / fully-async trainers: step k trains what version k - 1 generated
    assert sample_step({}, {"min_global_steps": 0, "max_global_steps": 0}) == 1
    # an episode that spanned a weight sync (partial rollout) can be trained only after the newest version
    assert sample_step({}, {"min_global_steps": 2, "max_global_steps": 4}) == 5
    assert sample_step({}, {"min_global_steps": 2}) == 3
    assert sample_step({}, {}) is None
