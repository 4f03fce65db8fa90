"""The template registry, the written chat formats and delta rendering against full renders."""

from __future__ import annotations

import json
import random

import pytest

from agent_tune.rollout import ChatRenderer, TemplateError, available_templates, load_chat_template
from agent_tune.rollout.templates import UnknownTemplateError
from tests.rollout.scripted import TOOLS


def test_registry_names_and_errors(tmp_path):
    names = available_templates()
    assert {"tokenizer", "qwen3", "qwen3_instruct", "smollm2_tools"} <= set(names)
    assert load_chat_template("tokenizer") is None
    assert "<tool_response>" in load_chat_template("qwen3")
    with pytest.raises(UnknownTemplateError, match="unknown chat template 'nope'.*smollm2_tools"):
        load_chat_template("nope")
    f = tmp_path / "mine.jinja"
    f.write_text("{{ messages[0].content }}\n")
    assert load_chat_template(str(f)) == "{{ messages[0].content }}"


def test_tokenizer_template_required_when_chosen(qwen_tok):
    class NoTemplate:
        chat_template = None

    with pytest.raises(TemplateError, match="no chat template"):
        ChatRenderer(NoTemplate(), "tokenizer")


def test_qwen3_format(qwen_tok):
    r = ChatRenderer(qwen_tok, "qwen3_instruct")
    msgs = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "ls", "arguments": {"a": True}}},
            {"type": "function", "function": {"name": "cd", "arguments": '{"folder": "x"}'}}]},
        {"role": "tool", "content": "R1"},
        {"role": "tool", "content": "R2"},
        {"role": "assistant", "content": "A"},
    ]
    text = r.render_text(msgs, TOOLS[:1])
    tools_json = json.dumps(TOOLS[0], ensure_ascii=False)
    assert text == (
        "<|im_start|>system\nSYS\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + tools_json +
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nQ<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"ls\", \"arguments\": {\"a\": true}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"cd\", \"arguments\": {\"folder\": \"x\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nA<|im_end|>\n"
    )
    # hybrid qwen3: the same text except the final assistant turn (after the last query) gets a think block
    hybrid = ChatRenderer(qwen_tok, "qwen3").render_text(msgs, TOOLS[:1])
    assert hybrid == text.replace("<|im_start|>assistant\nA", "<|im_start|>assistant\n<think>\n\n</think>\n\nA")
    with pytest.raises(TemplateError, match="unsupported message role robot"):
        r.render_text([{"role": "robot", "content": "x"}])


def test_smollm2_tools_without_tools_is_smollm2s_own_template(smol_tok):
    own = ChatRenderer(smol_tok, "tokenizer")
    ours = ChatRenderer(smol_tok, "smollm2_tools")
    for msgs in ([{"role": "user", "content": "hi"}],
                 [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"},
                  {"role": "assistant", "content": "yo"}, {"role": "user", "content": "again"}]):
        assert ours.render_text(msgs, add_generation_prompt=True) == own.render_text(msgs, add_generation_prompt=True)


def test_smollm2_tools_compact_listing(smol_tok):
    r = ChatRenderer(smol_tok, "smollm2_tools")
    text = r.render_text([{"role": "user", "content": "hi"}], TOOLS)
    assert "- ls(a?: boolean): List the files of the current directory\n" in text
    assert "- cd(folder: string): Change directory.\n" in text
    assert '- mkdir(dir_name: string, mode?: integer = 755): Make a directory.\n' in text
    compact = len(r.encode(text))
    full = len(ChatRenderer(smol_tok, "smollm2_tools", {"tool_doc": "json"}).render_full(
        [{"role": "user", "content": "hi"}], TOOLS))
    assert compact < full


def _random_observation(rng: random.Random) -> list[dict]:
    kind = rng.choice(["tools", "user", "tools+user", "system"])
    words = ["ok", "Error: no such file", '{"a": [1, 2]}', "ünïcode 日本", "line1\nline2", "  spaced  ", "42"]
    msgs = []
    if "tools" in kind:
        msgs += [{"role": "tool", "content": rng.choice(words)} for _ in range(rng.randint(1, 4))]
    if "user" in kind:
        msgs.append({"role": "user", "content": rng.choice(words) + "?"})
    if kind == "system":
        msgs.append({"role": "system", "content": "Reminder: " + rng.choice(words)})
    return msgs


@pytest.mark.parametrize("which", ["qwen3_instruct", "smollm2_tools", "smollm2_own"])
def test_incremental_deltas_equal_full_render_randomized(which, qwen_tok, smol_tok):
    """For random conversations, prompt + (assistant tokens + end-of-turn + delta)* == one full render."""
    tok = qwen_tok if which.startswith("qwen") else smol_tok
    r = ChatRenderer(tok, "tokenizer" if which == "smollm2_own" else which)
    tools = None if which == "smollm2_own" else TOOLS
    rng = random.Random(1234)
    replies = ["Sure.", '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>', "Done: 3 files, 2 dirs.",
               "I can't do that.\n\nSorry!"]
    for _ in range(25):
        msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Start"}]
        ids = r.render_prompt(msgs, tools)
        for _turn in range(rng.randint(1, 5)):
            reply = rng.choice(replies)
            ids += r.encode(reply) + [r.end_of_turn_id]
            msgs.append({"role": "assistant", "content": reply})
            new = _random_observation(rng)
            ids += r.render_delta(new)
            msgs += new
        assert ids == r.render_full(msgs, tools, add_generation_prompt=True)
