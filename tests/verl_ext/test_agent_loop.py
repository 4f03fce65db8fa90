"""verl's agent loop ``agent_tune`` driven by a scripted server manager (no Ray): mask, log-probs, reward."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry  # noqa: E402

from agent_tune.envs.base import StopReason
from agent_tune.envs.bfcl.multi_turn.data import load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from agent_tune.rollout.runner import EpisodeResult  # noqa: E402
from agent_tune.rollout.trajectory import Trajectory  # noqa: E402
from verl_ext.agent_loop import LOOP_NAME, AgentTuneLoop, collapse_fields, group_id, sample_record  # noqa: E402
from verl_ext.sample_records import SampleRecord  # noqa: E402


class ScriptedServerManager:
    """Answers each generate call with the next scripted text, log-probs -0.001 * (running token index)."""

    def __init__(self, tokenizer, texts: list[str], eot: str) -> None:
        end = tokenizer.encode(eot, add_special_tokens=False)
        self.replies = [tokenizer.encode(t, add_special_tokens=False) + end for t in texts]
        self.calls: list[dict] = []
        self.emitted: list[int] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"request_id": request_id, "prompt_len": len(prompt_ids), "params": sampling_params})
        ids = self.replies[len(self.calls) - 1]
        start = len(self.emitted)
        self.emitted.extend(ids)
        step = len(self.calls)  # the server's weight version moves on between generations
        log_probs = [-0.001 * (start + i) for i in range(len(ids))]
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="completed",
                           num_preempted=0, extra_fields={"min_global_steps": 3, "max_global_steps": 3 + step})


def _config(response_length: int = 6000, dump_dir=None, dump_tokens=False):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": 12000, "response_length": response_length}},
            "data": {},
            "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                           "env_kwargs": {"bfcl": {"reward": "progress"}}, "dump_rollouts_dir": dump_dir,
                           "dump_rollout_tokens": dump_tokens},
        }
    )


async def _run(tokenizer, texts, test_id, response_length=6000, dump_dir=None, dump_tokens=False):
    cfg = _config(response_length, dump_dir, dump_tokens)
    server = ScriptedServerManager(tokenizer, texts, "<|im_end|>")
    loop = AgentTuneLoop(
        trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer, processor=None,
        dataset_cls=None, data_config=DictConfigWrap(cfg.data),
    )
    row = {"raw_prompt": [], "extra_info": {"index": 0, "env": {"name": "bfcl", "kwargs": {"test_id": test_id}}}}
    out = await loop.run({"temperature": 1.0, "logprobs": True}, **row)
    return out, server


def test_registered_with_verl() -> None:
    assert LOOP_NAME in _agent_loop_registry


async def test_ground_truth_episode_through_verl_loop(qwen_tok) -> None:
    entry = load_entry("multi_turn_base_5")
    texts = ground_truth_responses(entry, get_tool_parser("hermes"))
    out, server = await _run(qwen_tok, texts, entry.id)
    assert len(server.calls) == len(texts)
    assert len({c["request_id"] for c in server.calls}) == 1
    assert out.reward_score == 1.0
    info = out.extra_fields["reward_extra_info"]
    assert info["acc"] == 1.0 and info["progress"] == 1.0 and info["format_errors"] == 0.0
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    policy = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    assert policy == server.emitted  # exactly the sampled tokens, in order, mask 1
    lps = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m == 1]
    assert lps == pytest.approx([-0.001 * i for i in range(len(server.emitted))])
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, out.response_mask) if m == 0)
    assert 0 in out.response_mask  # tool results and new questions are there, masked
    # every generation saw the whole context so far: prompt + response up to that point
    assert server.calls[0]["prompt_len"] == len(out.prompt_ids)
    # verl's trainer needs the weight versions the episode was generated with (as its own loops report them)
    assert out.extra_fields["min_global_steps"] == 3 and out.extra_fields["max_global_steps"] == 3 + len(texts)
    assert out.metrics.num_preempted == 0


async def test_truncated_episode_keeps_alignment_and_scores_partial(qwen_tok) -> None:
    entry = load_entry("multi_turn_base_5")
    texts = ground_truth_responses(entry, get_tool_parser("hermes"))
    out, _ = await _run(qwen_tok, texts, entry.id, response_length=300)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) <= 300
    info = out.extra_fields["reward_extra_info"]
    assert info["truncated"] == 1.0 and info["acc"] == 0.0
    assert out.reward_score == info["progress"] < 1.0


async def test_rollout_dump_shows_the_mask(qwen_tok, tmp_path) -> None:
    import json

    entry = load_entry("multi_turn_base_5")
    texts = ground_truth_responses(entry, get_tool_parser("hermes"))
    out, server = await _run(qwen_tok, texts, entry.id, dump_dir=str(tmp_path))
    [dump] = list(tmp_path.glob("rollouts-*.jsonl"))
    record = json.loads(dump.read_text().splitlines()[0])
    policy_text = "".join(s["text"] for s in record["segments"] if s["who"] == "policy")
    assert policy_text == qwen_tok.decode(server.emitted)
    assert record["policy_tokens"] == len(server.emitted) and record["reward"] == 1.0
    assert any(s["who"] == "env" and "<tool_response>" in s["text"] for s in record["segments"])
    assert "response_ids" not in record


async def test_rollout_dump_with_tokens_holds_the_trajectory(qwen_tok, tmp_path) -> None:
    import json

    entry = load_entry("multi_turn_base_5")
    texts = ground_truth_responses(entry, get_tool_parser("hermes"))
    out, _ = await _run(qwen_tok, texts, entry.id, dump_dir=str(tmp_path), dump_tokens=True)
    [dump] = list(tmp_path.glob("rollouts-*.jsonl"))
    record = json.loads(dump.read_text().splitlines()[0])
    assert record["prompt_ids"] == out.prompt_ids and record["response_ids"] == out.response_ids
    assert record["response_mask"] == out.response_mask
    assert record["response_logprobs"] == out.response_logprobs


class _TextServer(ScriptedServerManager):
    """Segments end on the env's stop string (no end-of-turn token) except the last one."""

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.replies = [tokenizer.encode(t, add_special_tokens=False) for t in texts[:-1]]
        end = tokenizer.encode("<|im_end|>", add_special_tokens=False)
        self.replies.append(tokenizer.encode(texts[-1], add_special_tokens=False) + end)
        self.calls, self.emitted = [], []


async def test_retool_episode_through_verl_loop(qwen_tok) -> None:
    cfg = _config()
    texts = ["I will compute it.\n<code>\nprint(sum(range(1, 101)))\n</code>", "\nSo the answer is \\boxed{5050}."]
    server = _TextServer(qwen_tok, texts)
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    row = {"raw_prompt": [], "extra_info": {"index": 0, "task": {"question": "Sum of 1..100?", "ground_truth": "5050"},
                                             "env": {"name": "retool", "kwargs": None}}}
    out = await loop.run({"temperature": 1.0, "logprobs": True}, **row)
    assert "</code>" in server.calls[0]["params"]["stop"]  # the env's stop string reached the sampler
    assert out.reward_score == 1.0
    env_text = qwen_tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
    assert "<interpreter>\n5050\n</interpreter>" in env_text
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m == 1] == server.emitted


def test_collapse_fields_group_and_format_error_generations() -> None:
    assert group_id({"uid": "u1", "global_steps": 3, "extra_info": {"index": 7}}) == "u1"  # verl's group id
    assert group_id({"global_steps": 3, "extra_info": {"index": 7}}) == "3:7"
    # every step's format_errors is its own (the env contract): generations 1 and 3 had errors
    steps = [{"format_errors": 1, "calls": ["ls()"]}, {"format_errors": 0, "calls": ["cd(folder='a')", "pwd()"]},
             {"format_errors": 3}]
    fields = collapse_fields({"uid": "u"}, steps)
    assert fields == {"group": "u", "valid_calls": 3, "format_error_generations": 2}
    assert collapse_fields({}, [{"format_errors": 1}, {"format_errors": 0}])["format_error_generations"] == 1


def episode_result(acc: float, reward: float | None = None, calls: int = 1, generations: int = 2,
                   stop_reason: StopReason = StopReason.DONE) -> EpisodeResult:
    """A finished episode without a server: 3 prompt tokens, ``generations`` policy tokens, ``calls`` calls
    (one valid call per step, the last step with a format error)."""
    traj = Trajectory(prompt_ids=[1, 2, 3])
    traj.append_policy(list(range(generations)), None)
    steps = [{"format_errors": 0, "calls": ["f()"]} for _ in range(calls)] + [{"format_errors": 1}]
    info = {"accuracy": acc, "progress": acc, "num_calls": calls, "num_steps": calls + 1, "format_errors": 1,
            "turns_completed": 1}
    return EpisodeResult(trajectory=traj, reward=acc if reward is None else reward, info=info,
                         num_generations=generations, messages=[], tools=None, finish_reasons=["stop"] * generations,
                         stop_reason=stop_reason, step_infos=steps)


def test_sample_record_is_the_episode_record() -> None:
    """What the loop appends to samples-<pid>.jsonl: the same keys as ever, typed."""
    extra = {"index": 4, "split": "train", "env": {"name": "bfcl", "kwargs": {"test_id": "t"}}}
    kwargs = {"uid": "u7", "global_steps": 2, "data_source": "bfcl", "extra_info": extra}
    record = sample_record(episode_result(0.5, reward=0.75, calls=2, generations=3), kwargs, {})
    assert isinstance(record, SampleRecord)
    assert record.as_dict() == {
        "global_steps": 2, "split": "train", "data_source": "bfcl", "task": 'bfcl:{"test_id": "t"}', "reward": 0.75,
        "prompt_length": 3, "response_length": 3, "acc": 0.5, "progress": 0.5, "format_errors": 1.0,
        "num_calls": 2.0, "num_steps": 3.0, "num_generations": 3.0, "turns_completed": 1.0, "zero_call": 0.0,
        "truncated": 0.0, "tool_errors": 0.0,
        "stop_reason": "done", "group": "u7", "valid_calls": 2, "format_error_generations": 1}
    assert SampleRecord.from_dict(record.as_dict()) == record
    # no global_steps kwarg (verl's async trainers): one past the server's newest weight version; no split: train
    async_row = {"extra_info": {"index": 4, "env": extra["env"]}}
    later = sample_record(episode_result(0.0, stop_reason=StopReason.TOKEN_BUDGET), async_row, {"max_global_steps": 6})
    assert later.global_steps == 7 and later.split == "train" and later.is_training and later.truncated == 1.0
    assert later.data_source is None and later.group == "None:4"
