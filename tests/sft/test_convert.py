"""``agent-tune sft-data``: ToolRL's rlla_sft and the Tau2-RL-Pipeline's SFT seed become ``agent-tune sft`` rows.

ToolRL's rows are checked token for token against the episode runner playing the ``toolcall`` env (ToolRL's
answer format) on the same record; the tau2 seed's rows against the tau2 env's own prompt, tools and message
forms, rendered with Qwen3's vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tune.cli import main as cli_main
from agent_tune.envs import make_env
from agent_tune.envs.toolcall.tasks import as_task, rlla_tasks
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.sft.convert import TAU2_STOP, SFTDataError, convert, tau2_seed_row
from agent_tune.sft.rows import read_conversations, render_conversation
from tests.rollout.scripted import ScriptedPolicy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sft_data"
RLLA = FIXTURES / "rlla_sft.json"
SEED = FIXTURES / "tau2_seed.jsonl"
LIMITS = RolloutLimits(max_prompt_length=8192, max_response_length=4096)
GREETING = [{"role": "system", "content": "<tau2 airline prompt>"}, {"role": "assistant", "content": "Hi!"}]
FAKE_TOOLS = [{"type": "function", "function": {"name": "get_user_details", "parameters": {"type": "object"}}}]


def fake_domain_prompt(domain: str):
    return [dict(GREETING[0], content=f"<tau2 {domain} prompt>"), GREETING[1]], FAKE_TOOLS


@pytest.mark.parametrize("system", ["instruction", "generated"])
async def test_rlla_rows_equal_the_toolcall_episode_token_for_token(qwen_tok, system):
    records = json.loads(RLLA.read_text())
    rows = convert("rlla_sft", RLLA, system=system)
    assert [r["id"] for r in rows] == ["rlla_sft:0", "rlla_sft:1", "rlla_sft:2"]
    tasks = rlla_tasks(RLLA, keep_instruction=system == "instruction")
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    for i, (row, rec, task) in enumerate(zip(rows, records, tasks)):
        assert row["tools"] == [] and [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        assert row["messages"][1]["content"] == rec["input"] and row["messages"][2]["content"] == rec["output"]
        if system == "instruction":
            assert row["messages"][0]["content"] == rec["instruction"]
        else:
            assert "get_weather" in row["messages"][0]["content"] and "**Steps" not in row["messages"][0]["content"]
        env = make_env("toolcall", tool_parser="toolrl", answer_format="toolrl")
        policy = ScriptedPolicy(renderer, [rec["output"]])
        res = await run_episode(env, policy, renderer, LIMITS, task=as_task(task, i, "rlla").kwargs)
        ids, mask = render_conversation(renderer, row["messages"], row["tools"])
        assert ids == res.trajectory.all_ids
        assert mask == [0] * len(res.trajectory.prompt_ids) + res.trajectory.response_mask
        assert res.info["format_ok"] == 1.0  # the distilled answer has ToolRL's layout
    assert rows[0]["ground_truth"] == [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                       {"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}]
    assert rows[2]["ground_truth"] == []


def test_rlla_bad_record_names_the_record_and_field(tmp_path):
    bad = json.loads(RLLA.read_text())
    del bad[1]["output"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(SFTDataError, match=r"bad.json record 1: missing field 'output'"):
        convert("rlla_sft", path)


def test_tau2_native_rows_are_the_tau2_env_conversation():
    rows = convert("tau2_seed", SEED, domain_prompt=fake_domain_prompt)
    airline, retail = rows
    assert airline["id"] == "tau2/airline/12#0" and retail["id"] == "tau2/retail/50#1"
    assert airline["tools"] == FAKE_TOOLS and retail["domain"] == "retail" and retail["reward"] == 1.0
    msgs = airline["messages"]
    assert msgs[:2] == [{"role": "system", "content": "<tau2 airline prompt>"}, GREETING[1]]
    assert msgs[2] == {"role": "user", "content": "Hi, I need the details of my account. My user id is mia_li_3668."}
    assert msgs[3] == {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}}]}
    assert msgs[4]["role"] == "tool" and msgs[4]["name"] == "get_user_details"
    assert json.loads(msgs[4]["content"])["membership"] == "gold"  # the result without the pipeline's header
    assert msgs[5]["role"] == "assistant" and msgs[5]["content"].startswith("Thanks Mia.")
    assert "tool_calls" not in msgs[5]
    assert msgs[6]["role"] == "user" and msgs[7] == {"role": "assistant", "content": TAU2_STOP} and len(msgs) == 8
    # retail: a tool result followed by a user message, the domain read from the system prompt
    roles = [m["role"] for m in retail["messages"]]
    assert roles == ["system", "assistant", "user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    assert retail["messages"][4] == {"role": "tool", "name": "find_user_id_by_email", "content": "yusuf_rossi_9620"}


def test_tau2_raw_rows_keep_the_messages():
    rows = convert("tau2_seed", SEED, form="raw")
    source = [json.loads(line) for line in SEED.read_text().splitlines()]
    assert rows[0]["messages"] == source[0]["messages"] and rows[1]["messages"] == source[1]["prompt"]
    assert rows[0]["tools"] == [] and rows[0]["domain"] == "airline"


@pytest.mark.parametrize(("messages", "match"), [
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": '<tool_call>{"name": "x"</tool_call>'}],
     r"s.jsonl line 1 message 1: a <tool_call> block is not JSON"),
    ([{"role": "user", "content": "hi"}, {"role": "user", "content": "Tool result for f():\nok"}],
     r"message 1: 'Tool result for f' with no call before it"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": '<tool_call>{"name": "f"}</tool_call>'},
      {"role": "user", "content": "Tool result for g():\nok"}],
     r"message 2: the result of 'g' answers a call of 'f'"),
    ([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": '<tool_call>{"name": "respond", "arguments": {}}</tool_call>'}],
     r"message 1: 'respond' needs a non-empty string 'content'"),
])
def test_tau2_bad_conversations_name_the_message(tmp_path, messages, match):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"domain": "airline", "messages": messages}) + "\n")
    with pytest.raises(SFTDataError, match=match):
        convert("tau2_seed", path, domain_prompt=fake_domain_prompt)
    with pytest.raises(SFTDataError, match="no domain"):
        tau2_seed_row({"messages": [{"role": "user", "content": "hi"}]}, "row 0")


def test_cli_writes_rows_that_render_with_the_runs_template(qwen_tok_dir, tmp_path, capsys):
    out = tmp_path / "rlla.parquet"
    assert cli_main(["sft-data", "--format", "rlla_sft", str(RLLA), str(out), "--tokenizer", str(qwen_tok_dir),
                     "--template", "qwen3_instruct"]) == 0
    printed = capsys.readouterr().out
    assert f"3 SFT rows (rlla_sft) written to {out}" in printed and "SFT rows: 3 rendered, 0 skipped" in printed
    read = list(read_conversations(out))
    assert [r[0] for r in read] == ["rlla_sft:0", "rlla_sft:1", "rlla_sft:2"]
    assert read[0][1] == convert("rlla_sft", RLLA)[0]["messages"]
    # a run whose template cannot show the rows' tool calls is told before it trains (SmolLM2's own refuses them)
    assert cli_main(["sft-data", "--format", "tau2_seed", str(SEED), str(tmp_path / "t.jsonl"), "--form", "raw",
                     "--tokenizer", str(qwen_tok_dir), "--template", "qwen3_instruct", "--max-length", "64"]) == 1
    assert "SFT rows: 0 rendered, 2 skipped (too_long: 2)" in capsys.readouterr().out
    assert cli_main(["sft-data", "--format", "rlla_sft", str(tmp_path / "none.json"), str(out)]) == 1
    assert "no such file" in capsys.readouterr().err


def test_tau2_native_rows_render_with_qwen3(qwen_tok):
    """With tau2's real prompt and tools: the policy's tokens are the call block, the replies and ###STOP###."""
    pytest.importorskip("tau2")
    rows = convert("tau2_seed", SEED)
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    ids, mask = render_conversation(renderer, rows[0]["messages"], rows[0]["tools"])
    policy = qwen_tok.decode([t for t, m in zip(ids, mask) if m])
    assert policy.startswith("Hi! How can I help you today?<|im_end|>")
    assert '<tool_call>\n{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}\n</tool_call>' in policy
    assert policy.endswith(f"reservation, NO6JO3. What would you like to do?<|im_end|>{TAU2_STOP}<|im_end|>")
    env_text = qwen_tok.decode([t for t, m in zip(ids, mask) if not m])
    assert '"membership": "gold"' in env_text and "book_reservation" in env_text  # result and tools: no loss
    assert "Tool result for" not in env_text + policy
