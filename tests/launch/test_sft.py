"""``agent-tune sft``: the shipped configs, start-up checks, the console lines (the dataset verl loads:
tests/verl_ext/test_sft_dataset.py)."""

from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.sft import (  # noqa: E402
    SFTLauncher,
    follow,
    latest_checkpoint,
    parse_step_line,
    step_summary,
    validate,
)
from verl_ext.sft_dataset import AgentTuneSFTDataset  # noqa: E402

SFT_CONFIGS = ["agent_tune_sft", "agent_tune_sft_cpu"]


@pytest.mark.parametrize("name", SFT_CONFIGS)
def test_shipped_sft_config_composes_and_validates(name):
    config = compose_config(name, ["data.train_files=x.parquet"])
    validate(config)
    assert config.data.custom_cls.path == "pkg://verl_ext.sft_dataset"
    assert config.data.custom_cls.name == AgentTuneSFTDataset.__name__
    assert "hf_model" in config.checkpoint.save_contents  # the folder a GRPO run starts from
    assert config.trainer.resume_mode == "auto"


def test_cpu_config_runs_fsdp2_in_the_cpu_precision_with_the_cpu_template():
    from verl_ext.cpu.precision import dtype_for

    config = compose_config("agent_tune_sft_cpu", ["data.train_files=x.parquet"])
    assert config.trainer.device == "cpu" and config.engine.strategy == "fsdp2"
    # bf16 compute where this CPU has it (the GRPO configs' rule), fp32 master weights either way
    assert config.engine.mixed_precision.param_dtype == dtype_for("auto", "fsdp") and config.model.path == "smollm2"
    assert config.engine.model_dtype == "fp32"
    forced = compose_config("agent_tune_sft_cpu", ["data.train_files=x.parquet", "agent_tune.cpu_precision=fp32"])
    assert forced.engine.mixed_precision.param_dtype == "fp32"
    assert config.data.chat_template == "smollm2_tools"
    child_command = SFTLauncher().child_command
    run = RunConfig.parse(config)
    assert child_command(run, "c.yaml")[-4:] == ["-m", "agent_tune.launch.sft", "--_child", "c.yaml"]
    assert "--nproc_per_node=1" in child_command(run, "c.yaml")
    gpu = compose_config("agent_tune_sft", ["data.train_files=x.parquet"])
    assert "--nproc_per_node=8" in child_command(RunConfig.parse(gpu), "c.yaml")


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
    # the dataset logs its report (verl_ext/sft_dataset.py): the console shows it without the log prefix
    child = io.StringIO("noise\n[agent-tune] SFT rows: 3 rendered, 1 skipped (render: 1)\n"
                        "  skipped row x [render]: bad\n"
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


def test_follow_counts_steps_against_the_lowered_budget(tmp_path):
    # verl_ext/sft_trainer.py logs the budget it lowered to what the data holds; the step lines follow it
    budget = ("[agent-tune] SFT steps: 6 (trainer.total_training_steps=8 is more than 1 epoch(s) of 6 batches "
              "hold; the last of them saves the checkpoint)\n")
    log, echo = io.StringIO(), io.StringIO()
    follow(io.StringIO(budget + LINE), log, tmp_path / "m.jsonl", 8, False, echo)
    assert echo.getvalue().splitlines() == [budget[len("[agent-tune] "):].rstrip("\n"),
                                            "step 3/6: loss 0.1156, grad_norm 1.63, lr 0.0001"]


def test_latest_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for n in (2, 10, 4):
        (tmp_path / f"global_step_{n}").mkdir()
    (tmp_path / "global_step_x").mkdir()
    assert latest_checkpoint(tmp_path).name == "global_step_10"


def test_cli_routes_sft(monkeypatch):
    import agent_tune.launch.sft as sft
    from agent_tune import cli

    seen = []
    monkeypatch.setattr(sft, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["sft", "--cfg", "data.train_files=x"]) == 0
    assert seen == [["--cfg", "data.train_files=x"]]
