"""SFT rows equal, token for token, the trajectory the episode runner produces for the same conversation."""

from __future__ import annotations

import json

import pytest

from agent_tune.envs.base import Observation
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.sft.rows import (
    BadConversation,
    assistant_text,
    read_conversations,
    render_conversation,
    render_rows,
)
from tests.rollout.scripted import NEW_TOOL, TOOLS, ScriptedEnv, ScriptedPolicy, step, tool_msgs, user_msg

CALL_LS = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
CALL_CD = '<tool_call>\n{"name": "cd", "arguments": {"folder": "docs"}}\n</tool_call>'
CALL_MK = '<tool_call>\n{"name": "mkdir", "arguments": {"dir_name": "tmp 2024"}}\n</tool_call>'
LIMITS = RolloutLimits(max_prompt_length=4096, max_response_length=4096)
SYSTEM = {"role": "system", "content": "You manage files."}


def _asst(content, tool_calls=None):
    m = {"role": "assistant", "content": content}
    if tool_calls is not None:
        m["tool_calls"] = tool_calls
    return m


def _call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    # two user turns, groups of 2 and 3 tool results, a new user message (miss_func style), a final answer
    "multi_turn_tools": [
        SYSTEM, user_msg("List everything, then go to docs and make tmp."),
        _asst(CALL_LS),
        *tool_msgs('{"current_directory_content": ["docs", ".git"]}', "ok"),
        _asst("I will do both.\n" + CALL_CD + "\n" + CALL_MK),
        *tool_msgs('{"current_working_directory": "docs"}', "None", "Error during execution: exists"),
        _asst("Done: listed, moved and created the folder."),
        user_msg("Now list again, please."),
        _asst(CALL_LS),
        *tool_msgs('{"current_directory_content": []}'),
        _asst("The folder is empty."),
    ],
    # structured OpenAI-style tool_calls, no system message, two generations in a row
    "structured_calls": [
        user_msg("Go to docs."),
        _asst("", [_call("cd", {"folder": "docs"})]),
        *tool_msgs('{"current_working_directory": "docs"}'),
        _asst("Moving on.", [_call("ls", '{"a": false}'), _call("mkdir", {"dir_name": "x"})]),
        *tool_msgs("[]", "ok"),
        _asst("First part done."),
        _asst("And that is all."),
    ],
    # one user turn, one answer, then trailing messages that carry no loss
    "single_answer_trailing": [
        SYSTEM, user_msg("Hi"), _asst("Hello! How can I help?"), user_msg("(no answer follows)"),
    ],
}


def _episode(renderer, messages, tools):
    """The env and scripted policy that replay ``messages``: the initial observation is every message
    before the first assistant message, each later group of non-assistant messages one observation."""
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    initial = Observation(messages=messages[: turns[0]], tools=tools)
    replies = [assistant_text(renderer, messages[i]) for i in turns]
    steps = [step(messages[i + 1: j]) for i, j in zip(turns, turns[1:])] + [step(reward=1.0, done=True)]
    return ScriptedEnv(initial, steps), ScriptedPolicy(renderer, replies)


@pytest.fixture(params=["smollm2_tools", "qwen3_instruct", "qwen3"])
def renderer(request, qwen_tok, smol_tok):
    tok = qwen_tok if request.param.startswith("qwen3") else smol_tok
    return ChatRenderer(tok, request.param)


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
async def test_sft_row_equals_runner_trajectory(renderer, name):
    messages = CONVERSATIONS[name]
    env, policy = _episode(renderer, messages, TOOLS)
    res = await run_episode(env, policy, renderer, LIMITS)
    assert res.stop_reason == "done"
    traj = res.trajectory

    ids, mask = render_conversation(renderer, messages, TOOLS)
    assert ids == traj.all_ids
    assert mask == [0] * len(traj.prompt_ids) + traj.response_mask
    # the masked tokens are exactly the policy's tokens, each turn closed by the end-of-turn token
    assert [t for t, m in zip(ids, mask) if m] == [t for o in policy.outputs for t in o.token_ids]
    assert len(traj.policy_spans()) == sum(m["role"] == "assistant" for m in messages)
    assert ids[-1] == renderer.end_of_turn_id and mask[-1] == 1


def test_structured_calls_are_written_as_the_template_writes_them(renderer):
    """Qwen3's thinking template opens the turn with an empty think block, as Qwen3 writes it."""
    msg = _asst("", [_call("cd", {"folder": "docs"}), _call("ls", '{"a": false}')])
    think = "<think>\n\n</think>\n\n" if renderer.template_name == "qwen3" else ""
    assert assistant_text(renderer, msg) == think + (
        '<tool_call>\n{"name": "cd", "arguments": {"folder": "docs"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "ls", "arguments": {"a": false}}\n</tool_call>'
    )


def test_tools_are_rendered_once_in_the_prompt(renderer):
    """A later, longer tool list changes nothing: the runner never re-renders tools either."""
    messages = CONVERSATIONS["multi_turn_tools"]
    ids, _ = render_conversation(renderer, messages, TOOLS)
    text = renderer.decode(ids)
    assert "touch" not in text and NEW_TOOL["function"]["name"] == "touch"


@pytest.mark.parametrize(
    "messages, match",
    [
        ([SYSTEM, user_msg("Hi")], "no assistant message"),
        ([_asst("Hello"), user_msg("Hi")], "opens with an assistant"),
        ([user_msg("Hi"), {"role": "function", "content": "x"}, _asst("ok")], "role 'function'"),
        ([user_msg("Hi"), "not a message", _asst("ok")], "not a mapping"),
        ([user_msg("Hi"), _asst(["not", "text"])], "must be a string"),
    ],
)
def test_bad_conversations_name_the_reason(smol_tok, messages, match):
    r = ChatRenderer(smol_tok, "smollm2_tools")
    with pytest.raises(BadConversation, match=match) as info:
        render_conversation(r, messages)
    assert info.value.kind == "render"


def test_template_error_is_a_bad_conversation(smol_tok, tmp_path):
    template = tmp_path / "no_tools.jinja"
    template.write_text(
        "{%- for m in messages %}{%- if m.role == 'tool' %}{{ raise_exception('no tool turns') }}{%- endif %}"
        "{{- '<|im_start|>' ~ m.role ~ '\\n' ~ m.content ~ '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    r = ChatRenderer(smol_tok, str(template))
    render_conversation(r, [user_msg("Hi"), _asst("a"), user_msg("more"), _asst("b")])
    with pytest.raises(BadConversation, match="no tool turns"):
        render_conversation(r, [user_msg("Hi"), _asst(CALL_LS), *tool_msgs("[]"), _asst("done")])


def test_too_long_is_reported_not_truncated(smol_tok):
    r = ChatRenderer(smol_tok, "smollm2_tools")
    messages = CONVERSATIONS["multi_turn_tools"]
    n = len(render_conversation(r, messages, TOOLS)[0])
    assert len(render_conversation(r, messages, TOOLS, max_length=n)[0]) == n
    with pytest.raises(BadConversation, match=f"{n} tokens, more than max_length {n - 1}") as info:
        render_conversation(r, messages, TOOLS, max_length=n - 1)
    assert info.value.kind == "too_long"


def test_render_rows_counts_and_names_skipped_rows(smol_tok):
    r = ChatRenderer(smol_tok, "smollm2_tools")
    good = CONVERSATIONS["single_answer_trailing"]
    n = len(render_conversation(r, good)[0])
    report = render_rows(r, [("a", good, None), ("b", [user_msg("Hi")], None),
                             ("c", CONVERSATIONS["multi_turn_tools"], TOOLS)], max_length=n)
    assert [row.row_id for row in report.rows] == ["a"]
    assert report.counts() == {"rendered": 1, "skipped": 2, "skipped_render": 1, "skipped_too_long": 1}
    text = report.summary()
    assert "1 rendered, 2 skipped" in text and "row b [render]" in text and "row c [too_long]" in text


def test_read_conversations_jsonl_and_parquet(tmp_path):
    import pandas as pd

    rows = [{"id": "x1", "messages": CONVERSATIONS["multi_turn_tools"], "tools": TOOLS},
            {"messages": CONVERSATIONS["single_answer_trailing"]}]
    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = list(read_conversations(jl))
    assert got == [("x1", rows[0]["messages"], TOOLS), ("d.jsonl:1", rows[1]["messages"], None)]
    # parquet: nested data stored as JSON strings (parquet would merge dict keys across rows)
    pq = tmp_path / "d.parquet"
    pd.DataFrame([{"id": r.get("id"), "messages": json.dumps(r["messages"]),
                   "tools": json.dumps(r.get("tools"))} for r in rows]).to_parquet(pq)
    got = list(read_conversations(pq))
    assert got == [("x1", rows[0]["messages"], TOOLS), ("d.parquet:1", rows[1]["messages"], None)]
    # parquet with native nested columns reads as plain lists and dicts too
    pq2 = tmp_path / "n.parquet"
    pd.DataFrame([{"messages": CONVERSATIONS["single_answer_trailing"]}]).to_parquet(pq2)
    assert list(read_conversations(pq2)) == [("n.parquet:0", CONVERSATIONS["single_answer_trailing"], None)]
