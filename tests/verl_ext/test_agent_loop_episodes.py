"""The agent loop records every episode it plays into the run's episode log (``agent_tune.episodes``): one gzip
member each, with the conversation, the mask, the step, the GRPO group and sample number, token lists for the
sampled groups."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from agent_tune.envs.bfcl.multi_turn.data import load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from agent_tune.rollout.records import read_folder  # noqa: E402
from tests.verl_ext.test_agent_loop import ScriptedServerManager  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop  # noqa: E402


def _config(episodes):
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 12000, "response_length": 6000}},
        "data": {},
        "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                       "env_kwargs": {"bfcl": {"reward": "progress"}}, "episodes": episodes},
    })


async def _play(tokenizer, episodes, texts, test_id, sample: int, uid: str = "group-a"):
    cfg = _config(episodes)
    server = ScriptedServerManager(tokenizer, texts, "<|im_end|>")
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    row = {"raw_prompt": [], "uid": uid, "global_steps": 4, "session_id": sample, "data_source": "bfcl",
           "extra_info": {"index": 11, "split": "train", "env": {"name": "bfcl", "kwargs": {"test_id": test_id}}}}
    out = await loop.run({"temperature": 1.0, "logprobs": True}, **row)
    return out, server


async def test_every_episode_is_recorded_with_its_group_and_tokens(qwen_tok, tmp_path) -> None:
    entry = load_entry("multi_turn_base_5")
    right = ground_truth_responses(entry, get_tool_parser("hermes"))
    episodes = {"dir": str(tmp_path), "tokens_every": 1}
    out0, server0 = await _play(qwen_tok, episodes, right, entry.id, sample=0)
    out1, _ = await _play(qwen_tok, episodes, ["I cannot do that."] * 12, entry.id, sample=1)
    [path] = list(tmp_path.glob("episodes-*.jsonl.gz"))
    records = sorted(read_folder(tmp_path), key=lambda r: r["sample"])
    assert [r["sample"] for r in records] == [0, 1]
    first, second = records
    for rec, out in ((first, out0), (second, out1)):
        assert rec["global_steps"] == 4 and rec["group"] == rec["uid"] == "group-a" and rec["index"] == 11
        assert rec["env"] == "bfcl" and rec["split"] == "train" and rec["data_source"] == "bfcl"
        assert rec["reward"] == out.reward_score and rec["stop_reason"] == "done"
        assert rec["metrics"] == out.extra_fields["reward_extra_info"]
        # the token lists are exactly what verl trained on, each response token with its own text
        assert rec["prompt_ids"] == out.prompt_ids and rec["response_ids"] == out.response_ids
        assert rec["response_mask"] == out.response_mask and rec["response_logprobs"] == out.response_logprobs
        assert rec["response_pieces"] == [qwen_tok.decode([t]) for t in out.response_ids]
        assert rec["prompt"] == qwen_tok.decode(out.prompt_ids)  # the token view's prompt
    assert first["reward"] == 1.0 and second["reward"] < 1.0
    # the conversation, its prompt marked: the policy's messages are the generations, in order
    prompt = first["messages"][:first["prompt_messages"]]
    assert [m["role"] for m in prompt][-1] == "user"
    generated = [m["content"] for m in first["messages"][first["prompt_messages"]:] if m["role"] == "assistant"]
    assert generated == right
    assert "".join(s["text"] for s in first["segments"] if s["who"] == "policy") == qwen_tok.decode(server0.emitted)
    assert first["tools"] and all(isinstance(name, str) for name in first["tools"])


async def test_token_lists_only_for_sampled_groups_and_nothing_when_off(qwen_tok, tmp_path) -> None:
    entry = load_entry("multi_turn_base_5")
    await _play(qwen_tok, {"dir": str(tmp_path / "none"), "tokens_every": 0}, ["No."] * 12, entry.id, sample=0)
    [rec] = read_folder(tmp_path / "none")
    assert "response_ids" not in rec and "response_pieces" not in rec and rec["segments"]
    assert "prompt" not in rec and rec["messages"][:rec["prompt_messages"]]  # the prompt as its messages only
    await _play(qwen_tok, {"dir": str(tmp_path / "off"), "enable": False}, ["No."] * 12, entry.id, sample=0)
    assert not (tmp_path / "off").exists()
    await _play(qwen_tok, {"tokens_every": 1}, ["No."] * 12, entry.id, sample=0)  # no dir: the launcher sets it


async def test_token_lists_go_to_a_group_that_carried_signal(qwen_tok, tmp_path) -> None:
    """The samples of a group play together, as verl's worker plays a batch: the group's records are written when
    its last sample ends, with token lists when its rewards differ (the step's first such group)."""
    import asyncio

    entry = load_entry("multi_turn_base_5")
    right = ground_truth_responses(entry, get_tool_parser("hermes"))
    episodes = {"dir": str(tmp_path), "tokens_every": 8}
    flat = [_play(qwen_tok, episodes, ["No."] * 12, entry.id, sample=k, uid="flat") for k in range(2)]
    await asyncio.gather(*flat)
    mixed = [_play(qwen_tok, episodes, texts, entry.id, sample=k, uid="mixed")
             for k, texts in enumerate((right, ["No."] * 12, right))]
    await asyncio.gather(*mixed)
    records = read_folder(tmp_path)
    assert sorted((r["group"], r["sample"]) for r in records) == [("flat", 0), ("flat", 1), ("mixed", 0),
                                                                  ("mixed", 1), ("mixed", 2)]
    assert len({r["reward"] for r in records if r["group"] == "mixed"}) == 2
    assert [("response_ids" in r) for r in records if r["group"] == "flat"] == [False, False]  # no signal
    assert [("response_ids" in r) for r in records if r["group"] == "mixed"] == [True, True, True]
    assert [r["group"] for r in records] == ["flat", "flat", "mixed", "mixed", "mixed"]  # a group at a time
