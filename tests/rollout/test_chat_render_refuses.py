"""Renderers refuse what their chat template cannot show (naming the message, its role and the field) instead
of dropping it; what they accept renders exactly as the template renders it, as before."""

from __future__ import annotations

import pytest

from agent_tune.rollout import ChatRenderer, TemplateError
from agent_tune.rollout.chat_render import _ANCHOR_PREFIX, ANCHOR, UnshownFieldError
from agent_tune.sft.rows import BadConversation, render_conversation, render_rows
from tests.rollout.scripted import TOOLS, tool_msgs, user_msg

SYSTEM = {"role": "system", "content": "You manage files."}
CALL_LS = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
CAPS = [("tools",)] + [(f, r) for f in ("tool_calls", "reasoning_content", "content_parts")
                       for r in ("system", "user", "assistant", "tool")]
PARTS = [{"type": "text", "text": "first half, "}, {"type": "text", "text": "second half"}]


def _call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _structured():
    return {"role": "assistant", "content": "", "tool_calls": [_call("ls", {"a": True})]}


def _reasoning():
    return {"role": "assistant", "content": "Two entries.", "reasoning_content": "The user wants a count."}


@pytest.fixture
def renderers(qwen_tok, smol_tok):
    """name -> renderer: SmolLM2's own template and the written ones."""
    return {
        "smollm2_own": ChatRenderer(smol_tok, "tokenizer"),
        "smollm2_tools": ChatRenderer(smol_tok, "smollm2_tools"),
        "qwen3_instruct": ChatRenderer(qwen_tok, "qwen3_instruct"),
        "qwen3": ChatRenderer(qwen_tok, "qwen3"),
    }


def _refusal(call, *, field, index=None, role=None, where="message"):
    """Run ``call``; it must raise UnshownFieldError naming the field (and the message and its role)."""
    with pytest.raises(UnshownFieldError) as info:
        call()
    err = info.value
    assert isinstance(err, TemplateError) and isinstance(err, ValueError)
    assert err.field == field and err.index == index and err.role == role
    text = str(err)
    assert f"field {field!r}" in text
    if index is None:
        assert text.startswith("tools: ")
    else:
        assert text.startswith(f"{where} {index} (role {role!r}): ")
    return text


# ------------------------------------------------------------------------------------ what is probed
def test_probed_capabilities_of_the_known_templates(renderers):
    shown = {name: {":".join(c) for c in CAPS if r.shows(c)} for name, r in renderers.items()}
    assert shown == {
        "smollm2_own": set(),  # SmolLM2's own template: no tools, no structured calls
        "smollm2_tools": {"tools", "tool_calls:assistant"},
        "qwen3_instruct": {"tools", "tool_calls:assistant"},
        "qwen3": {"tools", "tool_calls:assistant", "reasoning_content:assistant"},
    }


def test_a_template_that_renders_text_parts_passes_and_one_printing_the_list_does_not(smol_tok, tmp_path):
    body = (r"{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' }}{% if m.content is string %}"
            r"{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}"
            r"{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    parts = tmp_path / "parts.jinja"
    parts.write_text(body)
    raw = tmp_path / "raw.jinja"  # prints content as it is: a list comes out as its repr
    raw.write_text(body.replace("{% if m.content is string %}", "{% if true %}"))
    r = ChatRenderer(smol_tok, str(parts))
    assert all(r.shows(("content_parts", role)) for role in ("system", "user", "assistant", "tool"))
    msgs = [SYSTEM, {"role": "user", "content": PARTS}]
    assert r.render_text(msgs) == smol_tok.apply_chat_template(msgs, chat_template=r.chat_template, tokenize=False)
    assert "first half, second half" in r.render_text(msgs)
    # only text parts: an image part is refused, naming the part
    image = {"role": "user", "content": PARTS + [{"type": "image_url", "image_url": {"url": "x"}}]}
    text = _refusal(lambda: r.render_text([SYSTEM, image]), field="content", index=1, role="user")
    assert "part 2 is of type 'image_url'" in text

    printing = ChatRenderer(smol_tok, str(raw))
    assert not printing.shows(("content_parts", "user"))
    _refusal(lambda: printing.render_text(msgs), field="content", index=1, role="user")


# ------------------------------------------------------------------------------------ refusals
def test_smollm2_own_template_refuses_tools_and_structured_calls(renderers):
    r = renderers["smollm2_own"]
    text = _refusal(lambda: r.render_prompt([SYSTEM, user_msg("List.")], TOOLS), field="tools")
    assert "chat template 'tokenizer' (the tokenizer's own)" in text and f"({len(TOOLS)} tools)" in text
    msgs = [SYSTEM, user_msg("List."), _structured(), *tool_msgs("[]"), {"role": "assistant", "content": "None."}]
    text = _refusal(lambda: r.render_full(msgs), field="tool_calls", index=2, role="assistant")
    assert "smollm2_tools" in text  # says what to use instead
    # the same calls written into the content (as the policy writes them) are accepted
    as_text = [SYSTEM, user_msg("List."), {"role": "assistant", "content": CALL_LS}]
    assert CALL_LS in r.render_text(as_text)


@pytest.mark.parametrize("name", ["smollm2_tools", "qwen3_instruct", "smollm2_own"])
def test_templates_without_reasoning_refuse_reasoning_content(renderers, name):
    r = renderers[name]
    msgs = [SYSTEM, user_msg("How many?"), _reasoning()]
    _refusal(lambda: r.render_text(msgs), field="reasoning_content", index=2, role="assistant")
    # an empty reasoning_content carries nothing: accepted
    assert r.render_text([SYSTEM, user_msg("How many?"), dict(_reasoning(), reasoning_content="")])


def test_qwen3_shows_reasoning_content(renderers):
    text = renderers["qwen3"].render_text([SYSTEM, user_msg("How many?"), _reasoning()])
    assert "<think>\nThe user wants a count.\n</think>\n\nTwo entries." in text


@pytest.mark.parametrize("name", ["smollm2_tools", "qwen3_instruct", "qwen3", "smollm2_own"])
def test_list_of_parts_content_is_refused_everywhere(renderers, name):
    r = renderers[name]
    user = {"role": "user", "content": PARTS}
    _refusal(lambda: r.render_prompt([SYSTEM, user]), field="content", index=1, role="user")
    _refusal(lambda: r.render_prompt([{"role": "system", "content": PARTS}, user_msg("Hi")]),
             field="content", index=0, role="system")
    # in an observation: named within the observation's new messages
    obs = [{"role": "tool", "content": "ok"}, {"role": "tool", "content": PARTS}]
    text = _refusal(lambda: r.render_delta(obs), field="content", index=1, role="tool", where="observation message")
    assert "list of 2 parts" in text and "must be a string" in text
    # any other non-string content too
    _refusal(lambda: r.render_delta([{"role": "tool", "content": {"result": 1}}]), field="content", index=0,
             role="tool", where="observation message")


def test_fields_on_roles_that_do_not_show_them_are_refused(renderers):
    r = renderers["smollm2_tools"]
    user = {"role": "user", "content": "Hi", "tool_calls": [_call("ls", {})]}
    _refusal(lambda: r.render_prompt([SYSTEM, user], TOOLS), field="tool_calls", index=1, role="user")
    tool = {"role": "tool", "content": "ok", "reasoning_content": "hmm"}
    _refusal(lambda: r.render_delta([tool]), field="reasoning_content", index=0, role="tool",
             where="observation message")


def test_sft_rows_name_the_conversation_index(renderers):
    r = renderers["qwen3_instruct"]
    messages = [SYSTEM, user_msg("List."), {"role": "assistant", "content": CALL_LS}, *tool_msgs("[]"),
                _reasoning()]
    with pytest.raises(BadConversation) as info:
        render_conversation(r, messages, TOOLS)
    assert info.value.kind == "render"
    assert str(info.value).startswith("message 4 (role 'assistant'): field 'reasoning_content'")
    report = render_rows(r, [("row-7", messages, TOOLS), ("ok", messages[:3], TOOLS)])
    assert [row.row_id for row in report.rows] == ["ok"]
    assert report.skipped[0][:2] == ("row-7", "render") and "field 'reasoning_content'" in report.skipped[0][2]
    # with SmolLM2's own template the tool list is refused for the row
    report = render_rows(renderers["smollm2_own"], [("t", messages[:3], TOOLS)])
    assert not report.rows and report.skipped[0][2].startswith("tools: field 'tools'")
    # messages after the last assistant message are left out of a row, so they are not checked
    trailing = messages[:3] + [{"role": "user", "content": PARTS}]
    ids, _ = render_conversation(r, trailing, TOOLS)
    assert ids == render_conversation(r, messages[:3], TOOLS)[0]


# ------------------------------------------------------------------------------------ accepted: as before
def _conversations():
    return {
        # BFCL/toolcall style: hermes calls written in the content strings
        "hermes_in_content": ([SYSTEM, user_msg("List, then answer."), {"role": "assistant", "content": CALL_LS},
                               *tool_msgs('["docs", ".git"]', "ok"), {"role": "assistant", "content": "Two."},
                               user_msg("Thanks")], TOOLS),
        # structured calls, content None, empty optional fields
        "structured": ([user_msg("Go."), {"role": "assistant", "content": None, "tool_calls": [
            _call("cd", {"folder": "docs"}), _call("ls", '{"a": false}')]},
            {"role": "tool", "name": "cd", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "Done.", "tool_calls": [], "reasoning_content": ""}], TOOLS),
        "no_tools": ([SYSTEM, user_msg("Hi"), {"role": "assistant", "content": "Hello!"}, user_msg("Bye")], None),
    }


@pytest.mark.parametrize("name", ["smollm2_tools", "qwen3_instruct", "qwen3", "smollm2_own"])
def test_accepted_conversations_render_exactly_as_the_template_does(renderers, name):
    r = renderers[name]
    for key, (msgs, tools) in _conversations().items():
        if name == "smollm2_own" and key != "no_tools":
            continue  # SmolLM2's own template shows neither tools nor structured calls (refused above)
        for prompt in (False, True):
            direct = r.tokenizer.apply_chat_template(
                [dict(m) for m in msgs], tools=tools, chat_template=r.chat_template,
                add_generation_prompt=prompt, tokenize=False, **r.chat_template_kwargs)
            assert r.render_text(msgs, tools, add_generation_prompt=prompt) == direct, (key, prompt)
        new = [m for m in msgs if m["role"] != "assistant"][-2:]
        anchored = r.tokenizer.apply_chat_template(
            list(_ANCHOR_PREFIX) + new, chat_template=r.chat_template, add_generation_prompt=True, tokenize=False,
            **r.chat_template_kwargs)
        after = anchored[anchored.index(ANCHOR) + len(ANCHOR) + len(r.end_of_turn):]
        assert r.render_delta_text(new) == after


def test_probes_run_once_per_template_not_per_renderer(smol_tok, monkeypatch):
    ChatRenderer(smol_tok, "smollm2_tools").check_messages([_structured()], TOOLS)  # probed (or cached) here
    calls = []
    real = smol_tok.apply_chat_template

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(smol_tok, "apply_chat_template", counting)
    for _ in range(3):  # verl builds an agent loop, so a renderer, per episode
        r = ChatRenderer(smol_tok, "smollm2_tools")  # one render: the end-of-turn token
        r.render_prompt([SYSTEM, user_msg("Go."), _structured(), *tool_msgs("[]")], TOOLS)
        r.render_delta(tool_msgs("ok"))
    assert len(calls) == 3 * 3  # no probe renders
