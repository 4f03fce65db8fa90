"""A tau2 episode through verl's agent loop (no Ray, no vLLM): a scripted policy server, an LLM user behind a
scripted OpenAI server, the shaped reward as the sample's score, tau2's reward as its accuracy, and the episode
record (with its task key) that the step metrics and the task weighting read."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from agent_tune.envs.tau2 import loader  # noqa: E402
from tests.envs.tau2_helpers import final_text, gold_actions, hermes  # noqa: E402
from tests.users.fake_openai import FakeOpenAI, completion  # noqa: E402
from tests.verl_ext.test_agent_loop import ScriptedServerManager  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop  # noqa: E402
from verl_ext.task_weighting import TaskWeightingConfig, TaskWeightingSampler, task_key  # noqa: E402


def user_reply(body: dict) -> dict:
    said = sum(1 for m in body["messages"] if m["role"] == "user")
    return completion("Hi, I need help with my account." if said <= 1 else "Thanks. ###STOP###")


@pytest.mark.parametrize("drop_write,acc,reward", [(False, 1.0, 1.25), (True, 0.0, 0.1875)])
async def test_tau2_episode_through_verl_loop(qwen_tok, tmp_path, drop_write, acc, reward) -> None:
    task = loader.load_task("airline", "2")
    actions = gold_actions(task)[:-1] if drop_write else gold_actions(task)
    texts = [hermes(*a) for a in actions] + [final_text(task)]
    with FakeOpenAI("user-simulator", default=user_reply) as user:
        cfg = OmegaConf.create({
            "actor_rollout_ref": {"rollout": {"prompt_length": 8000, "response_length": 6000}}, "data": {},
            "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                           "sample_metrics_dir": str(tmp_path),
                           "env_kwargs": {"tau2": {"user": user.user_config(model="user-simulator"),
                                                   "reward_shaping": {"alpha": 0.25}}}}})
        server = ScriptedServerManager(qwen_tok, texts, "<|im_end|>")
        loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                             processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
        extra = {"index": 0, "split": "train", "env": {"name": "tau2", "kwargs": {"domain": "airline", "task_id": "2"}}}
        out = await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[], extra_info=extra, global_steps=1)
    assert len(server.calls) == len(texts)
    # shaped: tau2's reward + 0.25 x partial (all 4 actions: partial 1.0; the write dropped: 3/4 actions, DB wrong)
    assert out.reward_score == pytest.approx(reward)
    info = out.extra_fields["reward_extra_info"]
    assert info["acc"] == acc
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert 0 in out.response_mask  # the user's turn and the tool results are there, masked
    [record] = [json.loads(line) for p in tmp_path.glob("samples-*.jsonl") for line in p.read_text().splitlines()]
    assert record["task"] == task_key(extra) and record["acc"] == acc and record["reward"] == pytest.approx(reward)
    sampler = TaskWeightingSampler([task_key(extra)], TaskWeightingConfig(enable=True), tmp_path)
    assert sampler.refresh() and sampler.stats.attempts == {task_key(extra): 1}


async def test_tau2_pipeline_protocol_through_verl_loop(qwen_tok, tmp_path) -> None:
    """Training in the pipeline protocol (``agent_tune.env_kwargs.tau2.protocol: pipeline``): verl's server is asked
    with the env's stop string, the retry after a malformed action at temperature 0 (that request only), and the
    episode scores tau2's reward."""
    from tests.envs.test_tau2_pipeline import block, respond

    task = loader.load_task("airline", "2")
    texts = ["Let me look.", *(block(*a) for a in gold_actions(task)), respond(final_text(task))]
    with FakeOpenAI("user-simulator", default=user_reply) as user:
        cfg = OmegaConf.create({
            "actor_rollout_ref": {"rollout": {"prompt_length": 8000, "response_length": 6000}}, "data": {},
            "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                           "env_kwargs": {"tau2": {"user": user.user_config(model="user-simulator"),
                                                   "protocol": "pipeline"}}}})
        server = ScriptedServerManager(qwen_tok, texts, "<|im_end|>")
        loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                             processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
        extra = {"index": 0, "split": "train", "env": {"name": "tau2", "kwargs": {"domain": "airline", "task_id": "2"}}}
        out = await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[], extra_info=extra, global_steps=1)
    assert [c["params"]["temperature"] for c in server.calls] == [1.0, 0.0] + [1.0] * (len(texts) - 2)
    assert all("</tool_call>" in c["params"]["stop"] for c in server.calls)
    info = out.extra_fields["reward_extra_info"]
    assert info["acc"] == 1.0 and out.reward_score == 1.0
