"""The SFT dataset's row summary is a log record (``verl_ext.sft_dataset``), never printed; rows whose fields
the template cannot show are skipped with the refusal as their reason."""

from __future__ import annotations

import logging

import pytest

from agent_tune.rollout.chat_render import UnshownFieldError
from data_preprocess import sft_synthetic
from verl_ext.sft_dataset import AgentTuneSFTDataset, SFTDatasetError

LOGGER = "verl_ext.sft_dataset"


def _config(**kw):
    base = {"chat_template": "smollm2_tools", "max_length": 2048, "pad_mode": "no_padding", "bad_rows": "skip",
            "apply_chat_template_kwargs": {}, "messages_key": "messages", "tools_key": "tools", "id_key": "id"}
    return {**base, **kw}


@pytest.fixture
def plain_logging(monkeypatch, caplog):
    """The package loggers as a library finds them (no console handler from an earlier setup_logging in this
    process), the records captured at INFO."""
    for name in ("verl_ext", LOGGER):
        log = logging.getLogger(name)
        monkeypatch.setattr(log, "handlers", [])
        monkeypatch.setattr(log, "propagate", True)
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def _rows(tmp_path):
    rows = sft_synthetic.build(3)
    rows.append({"id": "thinks", "tools": None, "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "greet back"}]})
    rows.append({"id": "parts", "tools": None, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": "Hello!"}]})
    return sft_synthetic.write(rows, tmp_path)


def test_row_summary_goes_to_the_log_not_the_console(smol_tok, tmp_path, capsys, plain_logging):
    ds = AgentTuneSFTDataset(str(_rows(tmp_path)), smol_tok, _config())
    out = capsys.readouterr()
    assert "SFT rows" not in out.out and "SFT rows" not in out.err
    records = [r for r in plain_logging.records if r.name == LOGGER]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    summary = records[0].getMessage()
    assert summary == ds.report.summary()
    assert summary.startswith("SFT rows: 3 rendered, 2 skipped (render: 2)")
    # the template's refusals are the reasons, naming the message, its role and the field
    assert "skipped row thinks [render]: message 1 (role 'assistant'): field 'reasoning_content'" in summary
    assert "skipped row parts [render]: message 0 (role 'user'): field 'content' is a list of 1 part" in summary


def test_refused_rows_stop_the_run_with_bad_rows_error(smol_tok, tmp_path, plain_logging):
    with pytest.raises(SFTDatasetError, match="field 'reasoning_content'"):
        AgentTuneSFTDataset(str(_rows(tmp_path)), smol_tok, _config(bad_rows="error"))


def test_tokenizer_template_of_smollm2_refuses_the_tool_list(smol_tok, tmp_path, plain_logging):
    """SmolLM2's own template shows no tools: every row with tools is refused, so no usable rows."""
    path = sft_synthetic.write(sft_synthetic.build(2), tmp_path)
    with pytest.raises(SFTDatasetError, match="no usable SFT rows"):
        AgentTuneSFTDataset(str(path), smol_tok, _config(chat_template="tokenizer"))
    summary = [r for r in plain_logging.records if r.name == LOGGER][0].getMessage()
    assert "tools: field 'tools'" in summary and "chat template 'tokenizer' (the tokenizer's own)" in summary
    assert issubclass(UnshownFieldError, ValueError)
