"""``agent-tune sft``: the shipped configs, start-up checks, the dataset verl loads, the console lines."""

from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from data_preprocess import sft_synthetic  # noqa: E402
from verl_ext.sft import (  # noqa: E402
    child_command,
    follow,
    latest_checkpoint,
    parse_step_line,
    step_summary,
    validate,
)
from verl_ext.sft_dataset import AgentTuneSFTDataset, SFTDataError  # noqa: E402
from verl_ext.train import ConfigError, compose_config  # noqa: E402

SFT_CONFIGS = ["agent_tune_sft", "agent_tune_sft_cpu"]


@pytest.mark.parametrize("name", SFT_CONFIGS)
def test_shipped_sft_config_composes_and_validates(name):
    config = compose_config(name, ["data.train_files=x.parquet"])
    validate(config)
    assert config.data.custom_cls.path == "pkg://verl_ext.sft_dataset"
    assert config.data.custom_cls.name == AgentTuneSFTDataset.__name__
    assert "hf_model" in config.checkpoint.save_contents  # the folder a GRPO run starts from
    assert config.trainer.resume_mode == "auto"


def test_cpu_config_runs_fsdp2_in_fp32_with_the_cpu_template():
    config = compose_config("agent_tune_sft_cpu", ["data.train_files=x.parquet"])
    assert config.trainer.device == "cpu" and config.engine.strategy == "fsdp2"
    assert config.engine.mixed_precision.param_dtype == "fp32" and config.model.path == "smollm2"
    assert config.data.chat_template == "smollm2_tools"
    assert child_command(config, "c.yaml")[-4:] == ["-m", "verl_ext.sft", "--_child", "c.yaml"]
    assert "--nproc_per_node=1" in child_command(config, "c.yaml")
    gpu = compose_config("agent_tune_sft", ["data.train_files=x.parquet"])
    assert "--nproc_per_node=8" in child_command(gpu, "c.yaml")


@pytest.mark.parametrize(
    "overrides, key",
    [
        ([], "data.train_files"),
        (["data.train_files=x", "data.truncation=right"], "data.truncation"),
        (["data.train_files=x", "data.bad_rows=ignore"], "data.bad_rows"),
        (["data.train_files=x", "data.pad_mode=right"], "data.pad_mode"),
        (["data.train_files=x", "data.max_length=0"], "data.max_length"),
        (["data.train_files=x", "engine.strategy=fsdp"], "engine.strategy"),
        (["data.train_files=x", "data.train_batch_size=3", "trainer.device=cuda", "trainer.n_gpus_per_node=2"],
         "data.train_batch_size"),
        (["data.train_files=x", "engine.strategy=ddp"], "engine"),
        (["data.train_files=x", "data.observation_pattern='(unclosed'"], "data.observation_pattern"),
        (["data.train_files=x", "data.observation_pattern='x*'"], "data.observation_pattern"),
    ],
)
def test_bad_config_fails_at_start_up_naming_the_key(overrides, key):
    config = compose_config("agent_tune_sft_cpu", overrides)
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate(config)


def test_unknown_key_fails_at_compose():
    with pytest.raises(ConfigError, match="data.no_such_key"):
        compose_config("agent_tune_sft_cpu", ["data.no_such_key=1"])


# ------------------------------------------------------------------------------------------ the dataset
def _data_config(**kw):
    base = {"chat_template": "smollm2_tools", "max_length": 2048, "pad_mode": "no_padding", "bad_rows": "skip",
            "apply_chat_template_kwargs": {}, "messages_key": "messages", "tools_key": "tools", "id_key": "id"}
    return {**base, **kw}


def _rows_with_bad(tmp_path):
    rows = sft_synthetic.build(6)
    rows.append({"id": "no-answer", "messages": [{"role": "user", "content": "Hi"}], "tools": None})
    rows.append({"id": "long", "messages": [{"role": "user", "content": "word " * 3000},
                                            {"role": "assistant", "content": "ok"}], "tools": None})
    return sft_synthetic.write(rows, tmp_path)


def test_dataset_renders_rows_like_the_runner_and_skips_bad_ones(smol_tok, tmp_path, capsys):
    from agent_tune.rollout import ChatRenderer
    from agent_tune.rollout.sft_rows import render_conversation

    path = _rows_with_bad(tmp_path)
    ds = AgentTuneSFTDataset(str(path), smol_tok, _data_config())
    out = capsys.readouterr().out
    assert "SFT rows: 6 rendered, 2 skipped (render: 1, too_long: 1)" in out
    assert "skipped row no-answer [render]: no assistant message" in out
    assert "skipped row long [too_long]" in out and "more than max_length 2048" in out
    assert len(ds) == 6 and ds.report.counts()["skipped"] == 2
    item = ds[1]
    assert set(item) == {"input_ids", "position_ids", "loss_mask"}
    row = sft_synthetic.build(6)[1]
    ids, mask = render_conversation(ChatRenderer(smol_tok, "smollm2_tools"), row["messages"], row["tools"])
    assert item["input_ids"].tolist() == ids and item["loss_mask"].tolist() == mask
    assert item["position_ids"].tolist() == list(range(len(ids)))


def test_dataset_bad_rows_error_stops_at_start_up(smol_tok, tmp_path):
    path = _rows_with_bad(tmp_path)
    with pytest.raises(SFTDataError, match="data.bad_rows"):
        AgentTuneSFTDataset([str(path)], smol_tok, _data_config(bad_rows="error"))
    with pytest.raises(SFTDataError, match="data.pad_mode"):
        AgentTuneSFTDataset([str(path)], smol_tok, _data_config(pad_mode="right"))


def test_dataset_reads_jsonl_and_max_samples(smol_tok, tmp_path):
    sft_synthetic.write(sft_synthetic.build(5), tmp_path)
    ds = AgentTuneSFTDataset([str(tmp_path / "train.jsonl")], smol_tok, _data_config(), max_samples=3)
    assert len(ds) == 3


def test_synthetic_conversations_have_tool_turns_and_structured_calls():
    rows = sft_synthetic.build(32)
    assert len({r["id"] for r in rows}) == 32
    roles = [m["role"] for r in rows for m in r["messages"]]
    assert roles.count("tool") > 32 and any("tool_calls" in m for r in rows for m in r["messages"])
    assert sft_synthetic.build(4, seed=1) == sft_synthetic.build(4, seed=1)


# ------------------------------------------------------------------------------------------ the console
LINE = ("step:3 - perf/cpu_memory_used_gb:6.5 - train/loss:0.1156 - train/grad_norm:1.63 - train/lr:0.0001 - "
        "train/total_tokens(B):3.37e-06\n")


def test_parse_step_line_and_summary():
    rec = parse_step_line(LINE)
    assert rec["step"] == 3 and rec["train/loss"] == pytest.approx(0.1156) and rec["train/lr"] == 1e-4
    assert parse_step_line("Epoch 1/1: 10%") is None
    bar = "Epoch 1/1:  62%|######3   | 5/8 [02:01<06:04, 121.58s/it]"  # tqdm's bar, then verl's line
    assert parse_step_line(bar + LINE) == rec
    assert step_summary(rec, 8) == "step 3/8: loss 0.1156, grad_norm 1.63, lr 0.0001"


def test_follow_shows_report_and_steps_and_appends_metrics(tmp_path):
    child = io.StringIO("noise\nSFT rows: 3 rendered, 1 skipped (render: 1)\n  skipped row x [render]: bad\n"
                        "Epoch 1/1:  25%|##| 2/8 [02:48<08:17]\r" + LINE + "Epoch 1/1: 38%|###| 3/8 [03:59<06:26]"
                        + LINE.replace("step:3", "step:4") + "more noise\n")
    log, echo = io.StringIO(), io.StringIO()
    follow(child, log, tmp_path / "m.jsonl", 8, False, echo)
    assert echo.getvalue().splitlines() == ["SFT rows: 3 rendered, 1 skipped (render: 1)",
                                            "  skipped row x [render]: bad",
                                            "step 3/8: loss 0.1156, grad_norm 1.63, lr 0.0001",
                                            "step 4/8: loss 0.1156, grad_norm 1.63, lr 0.0001"]
    assert "noise" in log.getvalue()
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [3, 4] and records[0]["train/loss"] == pytest.approx(0.1156)


def test_latest_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for n in (2, 10, 4):
        (tmp_path / f"global_step_{n}").mkdir()
    (tmp_path / "global_step_x").mkdir()
    assert latest_checkpoint(tmp_path).name == "global_step_10"


def test_cli_routes_sft(monkeypatch):
    import verl_ext.sft as sft
    from agent_tune import cli

    seen = []
    monkeypatch.setattr(sft, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["sft", "--cfg", "data.train_files=x"]) == 0
    assert seen == [["--cfg", "data.train_files=x"]]


def test_retool_format_renders_interpreter_blocks_as_env_tokens(smol_tok, tmp_path):
    """`+sft_format=retool`: the dataset verl loads holds the ReTool rows with the interpreter output masked."""
    from agent_tune.envs.retool import interpreter_block
    from data_preprocess import retool_sft_synthetic

    config = compose_config("agent_tune_sft_cpu", ["+sft_format=retool", "data.train_files=x.parquet"])
    validate(config)
    rows = retool_sft_synthetic.build(3)
    path = sft_synthetic.write(rows, tmp_path)
    data = _data_config(observation_pattern=config.data.observation_pattern)
    ds = AgentTuneSFTDataset(str(path), smol_tok, data)
    item = ds[0]
    ids, mask = item["input_ids"].tolist(), item["loss_mask"].tolist()
    env_text = smol_tok.decode([t for t, m in zip(ids, mask) if not m])
    value = rows[0]["messages"][-1]["content"].rsplit("boxed{", 1)[1].rstrip("}.")
    assert interpreter_block(value) in env_text and interpreter_block("True") in env_text
    plain = AgentTuneSFTDataset(str(path), smol_tok, _data_config())
    assert sum(mask) < sum(plain[0]["loss_mask"].tolist())
