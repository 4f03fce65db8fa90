"""Rejection sampling: the eval's successful episodes become SFT rows with the runner's exact tokens, and
those rows load into the SFT dataset unchanged."""

from __future__ import annotations

import json
import logging

import pytest

import agent_tune.eval.evaluate as evaluate_mod
from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.rft import RFTFilter, RFTWriter, row_id
from agent_tune.eval.store import read_results
from agent_tune.testing.scripted_server import GARBAGE, ScriptedServer, oracle_script
from verl_ext.sft_dataset import AgentTuneSFTDataset, SFTDatasetError

GOOD = ["multi_turn_base_0", "multi_turn_miss_func_1"]
BAD = ["multi_turn_base_5"]
IDS = GOOD + BAD


def _script():
    oracle = oracle_script(GOOD)
    return lambda test_id, turn, step: oracle(test_id, turn, step) if test_id in GOOD else GARBAGE


def _settings(srv: ScriptedServer, out, **kw) -> EvalSettings:
    base = dict(base_url=srv.base_url, model="scripted", template="qwen3", concurrency=2, progress=False,
                sft_out=str(out))
    base.update(kw)
    return EvalSettings(**base)


def _read(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _data_config(**kw):
    cfg = {"chat_template": "qwen3", "max_length": 65536, "bad_rows": "skip", "pad_mode": "no_padding"}
    cfg.update(kw)
    return cfg


async def test_rft_rows_hold_the_runners_exact_tokens_and_load_into_sft(qwen_tok, tmp_path, monkeypatch):
    trajectories = {}
    real_run_episode = evaluate_mod.run_episode

    async def spy(env, policy, renderer, limits, sampling_params=None, task=None, **kw):
        result = await real_run_episode(env, policy, renderer, limits, sampling_params, task, **kw)
        trajectories[task["test_id"]] = result.trajectory
        return result

    monkeypatch.setattr(evaluate_mod, "run_episode", spy)
    out = tmp_path / "rft.jsonl"
    async with ScriptedServer(qwen_tok, _script(), IDS) as srv:
        outcome = await Evaluator(_settings(srv, out), qwen_tok).run(IDS, tmp_path / "r.jsonl")
        requests = list(srv.requests)
    assert outcome.sft_rows_written == len(GOOD)
    acc = {r["test_id"]: r["accuracy"] for r in read_results(tmp_path / "r.jsonl")[1]}
    assert acc == {"multi_turn_base_0": 1.0, "multi_turn_miss_func_1": 1.0, "multi_turn_base_5": 0.0}
    rows = {r["test_id"]: r for r in _read(out)}
    assert set(rows) == set(GOOD)  # the failed episode is not kept
    for tid, row in rows.items():
        traj = trajectories[tid]
        assert row["id"] == row_id(tid, 0) and row["accuracy"] == 1.0
        assert row["input_ids"] == traj.prompt_ids + traj.response_ids
        assert row["loss_mask"] == [0] * len(traj.prompt_ids) + traj.response_mask
        assert row["messages"][-1]["role"] == "assistant" and row["tools"]
        # independent of the runner: the last request of the episode plus what the server answered
        last = max((b for b in requests if b["prompt"][: len(traj.prompt_ids)] == traj.prompt_ids),
                   key=lambda b: len(b["prompt"]))
        n_prompt = len(last["prompt"])
        assert row["input_ids"][:n_prompt] == last["prompt"]
        answer = row["input_ids"][n_prompt:]
        assert answer[-1] == qwen_tok.convert_tokens_to_ids("<|im_end|>") and all(row["loss_mask"][n_prompt:])
        assert sum(row["loss_mask"]) > len(answer)  # earlier generations count too; tool results do not

    ds = AgentTuneSFTDataset(str(out), qwen_tok, _data_config())
    assert len(ds) == len(GOOD)
    for item, row in zip(ds, _read(out)):
        assert item["input_ids"].tolist() == row["input_ids"]
        assert item["loss_mask"].tolist() == row["loss_mask"]


async def test_rerun_resumes_without_duplicates_and_reward_filter(qwen_tok, tmp_path):
    out = tmp_path / "rft.jsonl"
    async with ScriptedServer(qwen_tok, _script(), IDS) as srv:
        await Evaluator(_settings(srv, out), qwen_tok).run(GOOD[:1], tmp_path / "r.jsonl")
        with open(out, "a", encoding="utf-8") as f:
            f.write('{"id": "cut by a ki')  # a half-written line from a killed run
        outcome = await Evaluator(_settings(srv, out), qwen_tok).run(IDS, tmp_path / "r.jsonl")
        assert outcome.skipped == 1 and outcome.sft_rows_written == 1
        assert [r["id"] for r in _read(out)] == [row_id(GOOD[0], 0), row_id(GOOD[1], 0)]
        # a reward threshold nobody reaches keeps nothing (BFCL's reward is the accuracy)
        out2 = tmp_path / "rft2.jsonl"
        outcome = await Evaluator(_settings(srv, out2, sft_min_accuracy=None, sft_min_reward=2.0),
                                  qwen_tok).run(IDS, tmp_path / "r2.jsonl")
    assert outcome.sft_rows_written == 0 and out2.read_text() == ""


def test_settings_and_filter_checks():
    with pytest.raises(ValueError, match="give --sft-out"):
        EvalSettings(base_url="u", model="m", sft_min_reward=0.5)
    with pytest.raises(ValueError, match="--mode tokens"):
        EvalSettings(base_url="u", model="m", mode="chat", sft_out="x.jsonl")
    s = EvalSettings(base_url="u", model="m", sft_out="x.jsonl")
    assert s.sft_min_accuracy == 1.0 and "sft_out" not in s.meta()
    f = RFTFilter(min_accuracy=0.5, min_reward=1.0)
    assert f.keep(1.0, 1.0) and not f.keep(0.4, 1.0) and not f.keep(1.0, 0.9)
    with pytest.raises(ValueError):
        RFTFilter(None, None)


def test_writer_refuses_a_file_of_other_rows(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"test_id": "a"}\n')
    with pytest.raises(ValueError, match="not an SFT row"):
        RFTWriter(p)


def test_token_rows_are_checked_skipped_and_counted(qwen_tok, tmp_path, caplog):
    good = {"id": "ok", "input_ids": [1, 2, 3, 4], "loss_mask": [0, 0, 1, 1], "messages": []}
    rows = [
        good,
        {"id": "uneven", "input_ids": [1, 2, 3], "loss_mask": [0, 1]},
        {"id": "no_loss", "input_ids": [1, 2], "loss_mask": [0, 0]},
        {"id": "oov", "input_ids": [1, 10**9], "loss_mask": [0, 1]},
        {"id": "bad_mask", "input_ids": [1, 2], "loss_mask": [0, 2]},
        {"id": "long", "input_ids": list(range(1, 20)), "loss_mask": [1] * 19},
        {"id": "half", "input_ids": [1, 2]},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.INFO, logger="verl_ext.sft_dataset"):  # the row summary goes to the log
        ds = AgentTuneSFTDataset(str(path), qwen_tok, _data_config(max_length=10))
    assert len(ds) == 1 and ds[0]["input_ids"].tolist() == good["input_ids"]
    assert ds[0]["loss_mask"].tolist() == good["loss_mask"]
    counts = ds.report.counts()
    assert counts["skipped_tokens"] == 5 and counts["skipped_too_long"] == 1
    shown = caplog.text
    assert "skipped row uneven [tokens]: 3 input_ids but 2 loss_mask entries" in shown
    assert "skipped row long [too_long]" in shown
    assert "skipped row half [tokens]: a row with its own tokens needs both input_ids and loss_mask" in shown
    with pytest.raises(SFTDatasetError, match="bad_rows"):
        AgentTuneSFTDataset(str(path), qwen_tok, _data_config(max_length=10, bad_rows="error"))
    # the same rows from parquet (numpy arrays in the cells)
    import pandas as pd

    no_answer = {"id": "m", "messages": json.dumps([{"role": "user", "content": "hi"}])}
    pd.DataFrame([dict(good, messages="[]"), no_answer]).to_parquet(tmp_path / "rows.parquet")
    ds = AgentTuneSFTDataset(str(tmp_path / "rows.parquet"), qwen_tok, _data_config(max_length=10))
    assert len(ds) == 1 and ds.report.counts()["skipped_render"] == 1


def test_cli_flags_validate(tmp_path, capsys, qwen_tok_dir):
    rc = eval_main(["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--ids", GOOD[0], "--mode", "chat",
                    "--tokenizer", str(qwen_tok_dir), "--sft-out", str(tmp_path / "s.jsonl"),
                    "--output", str(tmp_path / "r.jsonl")])
    assert rc == 1 and "--sft-out needs --mode tokens" in capsys.readouterr().err


async def test_rows_mode_plays_training_rows_of_any_env_into_rft_rows(qwen_tok, tmp_path):
    import pandas as pd

    from agent_tune.envs.tasks import catalogue_rows, select_tasks

    rows = catalogue_rows("bfcl", "train", tasks=select_tasks("bfcl", ids=IDS))
    assert [r["extra_info"]["id"] for r in rows] == IDS
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    out = tmp_path / "rft.jsonl"
    async with ScriptedServer(qwen_tok, _script(), IDS) as srv:
        s = _settings(srv, out, rows=str(tmp_path / "train.parquet"))
        outcome = await Evaluator(s, qwen_tok).run(IDS, tmp_path / "r.jsonl")
    assert s.env == "rows" and not outcome.failed
    records = {r["test_id"]: r for r in outcome.records}
    assert records["multi_turn_base_0"]["category"] == "multi_turn_base"
    assert [records[t]["accuracy"] for t in IDS] == [1.0, 1.0, 0.0]
    kept = _read(out)
    assert [r["test_id"] for r in sorted(kept, key=lambda r: IDS.index(r["test_id"]))] == GOOD
    assert all(r["env"] == "bfcl" and len(r["input_ids"]) == len(r["loss_mask"]) for r in kept)
    assert len(AgentTuneSFTDataset(str(out), qwen_tok, _data_config())) == len(GOOD)


def test_rows_flag_excludes_entry_selection(tmp_path, capsys, qwen_tok_dir):
    rc = eval_main(["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--rows", str(tmp_path / "t.parquet"),
                    "--split", "test", "--tokenizer", str(qwen_tok_dir), "--output", str(tmp_path / "r.jsonl")])
    assert rc == 1 and "--rows plays the file's rows; drop --split" in capsys.readouterr().err
