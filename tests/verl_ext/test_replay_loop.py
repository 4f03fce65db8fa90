"""The debugging modes' agent loops (verl_ext/replay_loop.py) driven by a scripted server (no Ray): a recorded
sample comes back from the replay exactly; missing samples and bad dumps fail naming them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry  # noqa: E402

from agent_tune.envs.bfcl.multi_turn.data import load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from agent_tune.rollout.dump import DumpError, append_jsonl, read_step_dump, step_dump_path  # noqa: E402
from tests.verl_ext.test_agent_loop import ScriptedServerManager  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop  # noqa: E402
from verl_ext.replay_loop import (  # noqa: E402
    RECORD_LOOP,
    REPLAY_LOOP,
    RecordingLoop,
    ReplayAgentLoopManager,
    ReplayLoop,
    missing_samples,
    replay_output,
)

ENTRY = "multi_turn_base_5"


def _config(tmp_path, **debug):
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 12000, "response_length": 6000, "n": 2}},
        "data": {},
        "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                       "env_kwargs": {"bfcl": {"reward": "progress"}},
                       "sample_metrics_dir": str(tmp_path / "samples"), "debug": debug},
    })


def _loop(cls, tokenizer, cfg, server=None):
    return cls(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer, processor=None,
               dataset_cls=None, data_config=DictConfigWrap(cfg.data))


def _row(step=3, index=7, sample=1, uid="u-first"):
    return {"raw_prompt": [], "global_steps": step, "index": index, "session_id": sample, "uid": uid,
            "extra_info": {"index": index, "env": {"name": "bfcl", "kwargs": {"test_id": ENTRY}}}}


def _samples(folder):
    return [json.loads(line) for p in sorted(folder.glob("samples-*.jsonl")) for line in p.read_text().splitlines()]


def _server(tokenizer):
    texts = ground_truth_responses(load_entry(ENTRY), get_tool_parser("hermes"))
    return ScriptedServerManager(tokenizer, texts, "<|im_end|>")


def test_registered_with_verl() -> None:
    assert {RECORD_LOOP, REPLAY_LOOP} <= set(_agent_loop_registry)


@pytest.mark.parametrize("target", ["verl_ext.replay_loop.RecordingLoop", "verl_ext.replay_loop.ReplayLoop"])
def test_mode_file_entry_survives_the_first_loop(target: str) -> None:
    """A worker loads the mode's loop file, then its first sample imports this module (and verl_ext.agent_loop,
    which registers agent_tune): every later sample must still get the mode's loop."""
    code = ("from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r\n"
            f"r['agent_tune'] = {{'name': 'agent_tune', '_target_': '{target}'}}\n"
            "import verl_ext.replay_loop\n"
            "print(r['agent_tune']['_target_'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == target


async def test_recorded_sample_replays_exactly(qwen_tok, tmp_path) -> None:
    dump = tmp_path / "dump"
    recorder = _loop(RecordingLoop, qwen_tok, _config(tmp_path, rollout_only=True, dump_dir=str(dump)),
                     _server(qwen_tok))
    recorded = await recorder.run({"temperature": 1.0, "logprobs": True}, **_row())
    [path] = list((dump / "step_3").glob("rollouts-*.jsonl"))
    assert path == step_dump_path(dump, 3, path.name.removeprefix("rollouts-").removesuffix(".jsonl"))
    record = read_step_dump(dump, 3)[("7", 1)]
    assert record["uid"] == "u-first" and record["env"] == "bfcl" and record["num_turns"] == recorded.num_turns
    assert record["segments"] and record["info"]  # the episode record of agent_tune.rollout.dump, kept whole
    # the samples record the loop writes went where the run keeps them, and into the dump, unchanged
    [forwarded] = _samples(tmp_path / "samples")
    assert record["sample_record"] == forwarded and forwarded["global_steps"] == 3 and forwarded["group"] == "u-first"

    # the plain agent loop on the same script writes the same samples record: recording changes nothing
    plain_dir = tmp_path / "plain"
    cfg = _config(plain_dir)
    plain = await _loop(AgentTuneLoop, qwen_tok, cfg, _server(qwen_tok)).run(
        {"temperature": 1.0, "logprobs": True}, **_row())
    assert _samples(plain_dir / "samples") == [forwarded]
    assert plain.response_ids == recorded.response_ids

    # replay: no server at all; the step's sample comes back as verl got it
    replay_samples = tmp_path / "replay"
    replayer = _loop(ReplayLoop, qwen_tok, _config(replay_samples, replay=True, replay_dir=str(dump)))
    out = await replayer.run({"temperature": 1.0, "logprobs": True}, **_row(uid="u-replay"))
    assert out.prompt_ids == recorded.prompt_ids
    assert out.response_ids == recorded.response_ids
    assert out.response_mask == recorded.response_mask
    assert out.response_logprobs == recorded.response_logprobs  # exact floats, through JSON
    assert out.reward_score == recorded.reward_score == record["reward"]
    assert out.num_turns == recorded.num_turns
    assert out.extra_fields["reward_extra_info"] == recorded.extra_fields["reward_extra_info"]
    for key in ("min_global_steps", "max_global_steps"):  # verl's staleness metrics read the weight versions
        assert out.extra_fields[key] == recorded.extra_fields[key] is not None
    [replayed] = _samples(replay_samples / "samples")
    assert replayed == {**forwarded, "group": "u-replay"}  # filed under this run's group

    with pytest.raises(DumpError, match="step 3, row 7, sample 0"):
        await replayer.run({}, **_row(sample=0))
    with pytest.raises(DumpError, match=r"no rollouts dumped for step 4 .*dumped steps: \[3\]"):
        await replayer.run({}, **_row(step=4))


async def test_replay_needs_the_v1_trainer_keys(qwen_tok, tmp_path) -> None:
    replayer = _loop(ReplayLoop, qwen_tok, _config(tmp_path, replay=True, replay_dir=str(tmp_path)))
    row = _row()
    del row["session_id"]
    with pytest.raises(DumpError, match="session_id=None"):
        await replayer.run({}, **row)


def _record(step, index, sample, **over):
    rec = {"global_steps": step, "index": index, "sample": sample, "prompt_ids": [1, 2], "response_ids": [3, 4],
           "response_mask": [1, 0], "response_logprobs": [-0.5, 0.0], "reward": 1.0}
    rec.update(over)
    return rec


def test_read_step_dump_refuses_bad_dumps(tmp_path) -> None:
    append_jsonl(step_dump_path(tmp_path, 1, 11), [_record(1, 0, 0), _record(1, 0, 1)])
    assert set(read_step_dump(tmp_path, 1)) == {("0", 0), ("0", 1)}
    append_jsonl(step_dump_path(tmp_path, 1, 12), [_record(1, 0, 1)])
    with pytest.raises(DumpError, match=r"step 1, row 0, sample 1 dumped twice .*rollouts-11.jsonl:2"):
        read_step_dump(tmp_path, 1)
    append_jsonl(step_dump_path(tmp_path, 2, 11), [_record(2, 0, 0, response_logprobs=None)])
    with pytest.raises(DumpError, match="lacks response_logprobs"):
        read_step_dump(tmp_path, 2)
    append_jsonl(step_dump_path(tmp_path, 3, 11), [_record(2, 0, 0)])
    with pytest.raises(DumpError, match="a record of step 2 in step 3's folder"):
        read_step_dump(tmp_path, 3)


def test_a_dump_without_weight_versions_is_refused_naming_the_sample() -> None:
    with pytest.raises(DumpError, match=r"step 1, row 0, sample 0 has no min_global_steps or max_global_steps"):
        replay_output(_record(1, 0, 0))
    out = replay_output(_record(1, 0, 0, weight_versions={"min_global_steps": 0, "max_global_steps": 0}))
    assert (out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"]) == (0, 0)


def test_manager_stops_a_step_whose_samples_are_not_all_dumped(tmp_path, monkeypatch) -> None:
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
    from verl.utils import tensordict_utils as tu

    append_jsonl(step_dump_path(tmp_path, 1, 11), [_record(1, 7, 0), _record(1, 7, 1), _record(1, 8, 0)])
    assert missing_samples(str(tmp_path), 1, ["7", "7", "8"], 2) == ["step 1, row 8, sample 1"]
    dispatched = []
    monkeypatch.setattr(AgentLoopManagerTQ, "generate_sequences", lambda self, prompts: dispatched.append(prompts))
    manager = ReplayAgentLoopManager.__new__(ReplayAgentLoopManager)
    manager.config = OmegaConf.create({"agent_tune": {"debug": {"replay": True, "replay_dir": str(tmp_path)}},
                                       "actor_rollout_ref": {"rollout": {"n": 2}}})

    def batch(indexes):
        b = tu.get_tensordict({"index": np.array(indexes, dtype=object),
                               "raw_prompt": np.array(["q"] * len(indexes), dtype=object)})
        tu.assign_non_tensor_data(b, "global_steps", 1)
        return b

    with pytest.raises(DumpError, match=r"no dumped sample for step 1, row 8, sample 1"):
        manager.generate_sequences(batch([7, 8]))
    assert dispatched == []
    manager.generate_sequences(batch([7]))
    assert len(dispatched) == 1


def test_rows_of_several_envs_sharing_an_index_are_dumped_apart(tmp_path) -> None:
    """Each env's row file counts from index 0: a step of a mixed run holds several rows with index 0, named apart
    by their env and task id (in the dump and in the manager's check)."""
    from agent_tune.rollout.dump import row_key

    bfcl = {"index": 0, "id": "multi_turn_base_0", "env": {"name": "bfcl", "kwargs": None}}
    tau2 = {"index": 0, "id": "tau2/mock/create_task_1", "env": {"name": "tau2", "kwargs": None}}
    rows = [row_key(0, bfcl), row_key(0, tau2)]
    assert rows == ["0 (bfcl:multi_turn_base_0)", "0 (tau2:tau2/mock/create_task_1)"]
    assert row_key(7, {"index": 7, "env": {"name": "bfcl"}}) == row_key(7) == "7"  # no task id: the index
    append_jsonl(step_dump_path(tmp_path, 1, 11), [_record(1, 0, s, row=r) for r in rows for s in (0, 1)])
    assert set(read_step_dump(tmp_path, 1)) == {(r, s) for r in rows for s in (0, 1)}
    assert missing_samples(str(tmp_path), 1, [*rows, row_key(0, {**bfcl, "id": "multi_turn_base_1"})], 2) == [
        "step 1, row 0 (bfcl:multi_turn_base_1), sample 0", "step 1, row 0 (bfcl:multi_turn_base_1), sample 1"]
