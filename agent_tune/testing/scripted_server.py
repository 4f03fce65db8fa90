"""A scripted OpenAI-compatible server for the eval tests and benchmark (aiohttp, 127.0.0.1, random port).

It serves ``GET /v1/models``, ``POST /v1/completions`` (token-id prompts, vLLM's ``return_token_ids``) and
``POST /v1/chat/completions`` (with ``tools``). What it answers is decided by a *script*: a function of the
BFCL entry (found from the conversation's first user message), the user-turn index and the step within
the turn, returning the assistant text (Hermes ``<tool_call>`` blocks for calls). Multi-turn and
single-turn entries alike (single-turn ones have one turn of one step).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Callable, Sequence

from aiohttp import web

from agent_tune.envs.bfcl.multi_turn.data import load_entry
from agent_tune.envs.bfcl.multi_turn.replay import TURN_END_TEXT, ground_truth_calls
from agent_tune.envs.bfcl.single_turn.entries import is_single_turn_id, load_single_turn
from agent_tune.envs.bfcl.single_turn.task import toolrl_ground_truth
from agent_tune.parsing import ToolCall, get_tool_parser
from agent_tune.testing.server_process import free_port

Script = Callable[[str, int, int], str]  # (test_id, turn, step) -> assistant text

GARBAGE = '<tool_call>\n{"name": "ls", "arguments": {oops\n</tool_call>'


def oracle_script(test_ids: Sequence[str]) -> Script:
    """Answers every turn with its ground truth (all calls in one step), then ``Done.``."""
    hermes = get_tool_parser("hermes")
    table: dict[str, list[list[str]]] = {}
    for tid in test_ids:
        entry = load_entry(tid)
        table[tid] = [[hermes.format_calls(calls)] if calls else [] for calls in ground_truth_calls(entry)]

    def script(test_id: str, turn: int, step: int) -> str:
        steps = table[test_id][turn]
        return steps[step] if step < len(steps) else TURN_END_TEXT

    return script


def garbage_script(test_id: str, turn: int, step: int) -> str:
    """A malformed call block (invalid JSON): BFCL drops it, so every turn ends with nothing done."""
    return GARBAGE


def single_turn_answer(test_id: str, correct: bool = True) -> str:
    """A single-turn entry answered right (one accepted answer: the env's ToolRL ground truth; irrelevance: no
    call; relevance: a call of the first tool) or wrong (the opposite shape: no call where one is
    expected, a call where none is)."""
    entry = load_single_turn(test_id)
    first_tool = entry.tools[0]["function"]["name"]
    if entry.possible_answer is None:  # (ir)relevance: BFCL only checks whether a call was made
        makes_call = (entry.category == "live_relevance") == correct
        return get_tool_parser("hermes").format_calls([ToolCall(first_tool, {})]) if makes_call else "No call."
    if not correct:
        return "I cannot help with that."
    calls = [ToolCall(c["name"], c["arguments"]) for c in toolrl_ground_truth(entry)]
    return get_tool_parser("hermes").format_calls(calls)


def single_turn_script(right: Sequence[str] | None = None) -> Script:
    """Answers single-turn entries right when their id is in ``right`` (None: all), wrong otherwise."""

    def script(test_id: str, turn: int, step: int) -> str:
        return single_turn_answer(test_id, right is None or test_id in right)

    return script


def first_user_message(test_id: str) -> str:
    """The first user message of an entry (multi-turn or single-turn)."""
    messages = load_single_turn(test_id).messages if is_single_turn_id(test_id) else load_entry(test_id).question[0]
    return next(m["content"] for m in messages if m["role"] == "user")


def first_questions(test_ids: Sequence[str]) -> dict[str, str]:
    """First user message -> test id (asserting it identifies the entry among ``test_ids``)."""
    out: dict[str, str] = {}
    for tid in test_ids:
        q = first_user_message(tid)
        assert q not in out, f"{tid} and {out.get(q)} share their first question: pick other ids"
        out[q] = tid
    return out


_SEGMENT = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?=<\|im_start\|>|\Z)", re.S)


def chatml_position(text: str) -> tuple[str, int, int]:
    """(first user message, user-turn index, step within the turn) of a ChatML prompt."""
    first, questions, step = None, -1, 0
    for role, body in _SEGMENT.findall(text):
        body = body.split("<|im_end|>")[0]
        if role == "user" and not body.lstrip().startswith("<tool_response>"):
            if first is None:
                first = body
            questions += 1
            step = 0
        elif role == "assistant" and body:
            step += 1
    return first or "", questions, step


def messages_position(messages: list[dict[str, Any]]) -> tuple[str, int, int]:
    first, questions, step = None, -1, 0
    for m in messages:
        if m["role"] == "user":
            first = first if first is not None else m["content"]
            questions += 1
            step = 0
        elif m["role"] == "assistant":
            step += 1
    return first or "", questions, step


class ScriptedServer:
    """Run with ``async with ScriptedServer(...) as srv:``; ``srv.base_url`` ends in ``/v1``.

    ``latency`` (seconds) is added to every generation; ``fail_first`` makes the first N generation
    requests answer 503 (to exercise retries); ``served`` is the model name /v1/models lists. Entries of other
    envs than BFCL: ``questions`` maps the question that identifies an entry to its id, and ``locate`` reads
    (that question, turn, step) from a token-mode prompt's text (default: BFCL's first user message).
    """

    def __init__(self, tokenizer: Any, script: Script, test_ids: Sequence[str], served: str = "scripted",
                 latency: float = 0.0, fail_first: int = 0, max_model_len: int | None = 65536,
                 return_token_ids: bool = True, questions: dict[str, str] | None = None,
                 locate: Callable[[str], tuple[str, int, int]] | None = None) -> None:
        self.tok = tokenizer
        self.script = script
        self.questions = dict(questions) if questions is not None else first_questions(test_ids)
        self.locate = locate or chatml_position
        self.served = served
        self.latency = latency
        self.fail_first = fail_first
        self.max_model_len = max_model_len
        self.return_token_ids = return_token_ids
        self.eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> "ScriptedServer":
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        row: dict[str, Any] = {"id": self.served, "object": "model"}
        if self.max_model_len:
            row["max_model_len"] = self.max_model_len
        return web.json_response({"object": "list", "data": [row]})

    async def _gate(self, body: dict[str, Any]) -> web.Response | None:
        self.requests.append(body)
        if body.get("model") != self.served:
            return web.json_response(
                {"error": {"message": f"The model `{body.get('model')}` does not exist."}}, status=404
            )
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        return None

    async def _sleep(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1

    async def completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        if (resp := await self._gate(body)) is not None:
            return resp
        prompt = body["prompt"]
        assert isinstance(prompt, list) and all(isinstance(t, int) for t in prompt), "token mode sends token ids"
        first, turn, step = self.locate(self.tok.decode(prompt, skip_special_tokens=False))
        text = self.script(self.questions[first], turn, step)
        ids = self.tok.encode(text, add_special_tokens=False) + [self.eot]
        finish = "stop"
        if len(ids) > body.get("max_tokens", 1 << 30):
            ids, finish = ids[: body["max_tokens"]], "length"
        await self._sleep()
        choice: dict[str, Any] = {"index": 0, "text": self.tok.decode(ids), "finish_reason": finish,
                                  "logprobs": {"token_logprobs": [-0.5] * len(ids), "tokens": []}}
        if self.return_token_ids and body.get("return_token_ids"):
            choice["token_ids"] = ids
        return web.json_response({"id": "cmpl-x", "object": "text_completion", "model": self.served,
                                  "choices": [choice],
                                  "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids)}})

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        if (resp := await self._gate(body)) is not None:
            return resp
        assert body.get("tools"), "chat mode sends the tool schemas"
        first, turn, step = messages_position(body["messages"])
        text = self.script(self.questions[first], turn, step)
        parsed = get_tool_parser("hermes").parse(text)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content or None}
        if parsed.calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for i, c in enumerate(parsed.calls)
            ]
        elif parsed.errors:
            message["content"] = text
        await self._sleep()
        return web.json_response({"id": "chat-x", "object": "chat.completion", "model": self.served,
                                  "choices": [{"index": 0, "message": message,
                                               "finish_reason": "tool_calls" if parsed.calls else "stop"}],
                                  "usage": {"prompt_tokens": 0, "completion_tokens": len(text) // 4 + 1}})
