"""The dataset verl's SFT trainer loads (``data.custom_cls``: :class:`verl_ext.sft_dataset.AgentTuneSFTDataset`):
rows rendered like the runner's, bad rows skipped or fatal, ReTool's interpreter blocks masked (the launcher's
side of ``agent-tune sft``: tests/launch/test_sft.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from data_preprocess import sft_synthetic  # noqa: E402
from verl_ext.sft_dataset import AgentTuneSFTDataset, SFTDatasetError  # noqa: E402


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


def test_dataset_renders_rows_like_the_runner_and_skips_bad_ones(smol_tok, tmp_path, caplog, monkeypatch):
    import logging

    from agent_tune.rollout import ChatRenderer
    from agent_tune.sft.rows import render_conversation

    for name in ("verl_ext", "verl_ext.sft_dataset"):  # as a library finds them: no console handler of ours
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    caplog.set_level(logging.INFO, logger="verl_ext.sft_dataset")
    path = _rows_with_bad(tmp_path)
    ds = AgentTuneSFTDataset(str(path), smol_tok, _data_config())
    out = "\n".join(r.getMessage() for r in caplog.records if r.name == "verl_ext.sft_dataset")  # logged, not printed
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
    with pytest.raises(SFTDatasetError, match="data.bad_rows"):
        AgentTuneSFTDataset([str(path)], smol_tok, _data_config(bad_rows="error"))
    with pytest.raises(SFTDatasetError, match="data.pad_mode"):
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


def test_retool_format_renders_interpreter_blocks_as_env_tokens(smol_tok, tmp_path):
    """`+sft_format=retool`: the dataset verl loads holds the ReTool rows with the interpreter output masked."""
    from agent_tune.envs.retool.env import interpreter_block
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.sft import validate
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
