"""Policies backed by an OpenAI-compatible server, for the one episode runner (:mod:`agent_tune.rollout`).

* :class:`CompletionsPolicy` (token mode, the default): ``POST /completions`` with the prompt as a list of
  token ids and ``return_token_ids``, so the server continues exactly the tokens the runner rendered and
  the runner receives exactly the tokens it sampled (with their log-probs): the evaluation sees what
  training sees. vLLM's completions endpoint accepts all of it (``prompt: list[int]``, ``logprobs``,
  ``return_token_ids``, ``stop_token_ids``, ``include_stop_str_in_output``, ``skip_special_tokens``).
* :class:`ChatCompletionsPolicy` (chat mode): for servers that only offer ``/chat/completions`` with
  ``tools=``. The server applies its own chat template and tool-call parser, so this mode is *not*
  token-exact. It still runs through the same runner: :class:`MessageLedger` is a view of the runner's
  :class:`~agent_tune.rollout.ChatRenderer` that records the messages the runner renders (initial prompt,
  each observation), from which the policy rebuilds the conversation; the server's structured answer is
  turned back into the text the env's tool parser reads (``format_calls``), and into local token ids
  (the episode's tokenizer) for the runner's budget accounting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from agent_tune.errors import RolloutError
from agent_tune.eval.client import OpenAIClient, RequestError
from agent_tune.parsing import ToolCall, get_reasoning_parser
from agent_tune.rollout.policy import GenerationOutput

# vLLM SamplingParams names forwarded to /completions as they are.
_FORWARDED = (
    "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "include_stop_str_in_output",
    "repetition_penalty", "presence_penalty", "frequency_penalty", "ignore_eos", "min_tokens",
)


class TokenIdsUnavailableError(RolloutError, RuntimeError):
    """The server's completion carried no token ids (not vLLM, or too old): token mode cannot be exact."""


@dataclass
class UsageCounter:
    """Totals over every request a policy made (shared by all episodes of a run)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_clamped: int = 0


class TokenPolicy:
    """Token-in/token-out :class:`~agent_tune.rollout.Policy` over one server endpoint: the prompt's token ids in,
    the sampled ids and their log-probs out. A subclass names its ``endpoint`` and writes :meth:`body` (the
    request) and :meth:`answer` (the generation and the usage it reports); the rest (defaults, the context clamp,
    a full context ending the episode, the usage totals) is this class's.

    Args:
        client: the server's client.
        model: the served model name.
        max_model_len: the server's context length; ``max_tokens`` is clamped so that prompt + completion
            fits (an exhausted context returns no tokens with stop reason ``"length"``, ending the episode).
        defaults: sampling parameters merged under the runner's (``temperature``, ``top_p``, ``top_k``, ``seed``,
            ...: vLLM's names).
        logprobs: ask for the sampled tokens' log-probs.
    """

    endpoint: str = ""

    def __init__(
        self,
        client: Any,
        model: str,
        max_model_len: int | None = None,
        defaults: Mapping[str, Any] | None = None,
        logprobs: bool = True,
        usage: UsageCounter | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.max_model_len = max_model_len
        self.defaults = dict(defaults or {})
        self.logprobs = logprobs
        self.usage = usage if usage is not None else UsageCounter()

    def request_body(self, prompt_ids: Sequence[int], sampling_params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The JSON body for one generation, or ``None`` when the context has no room left."""
        params = fit_to_context({**self.defaults, **dict(sampling_params)}, len(prompt_ids), self.max_model_len,
                                self.usage)
        return None if params is None else self.body(prompt_ids, params)

    def body(self, prompt_ids: Sequence[int], params: Mapping[str, Any]) -> dict[str, Any]:
        """The request for ``prompt_ids`` with the (clamped) sampling ``params``."""
        raise NotImplementedError

    def answer(self, data: Mapping[str, Any]) -> tuple[GenerationOutput, Mapping[str, Any]]:
        """The generation in the server's answer ``data``, and its usage (``prompt_tokens``,
        ``completion_tokens``)."""
        raise NotImplementedError

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        body = self.request_body(prompt_ids, sampling_params)
        if body is None:  # context full: nothing can be generated
            return GenerationOutput([], [], "length")
        try:
            data = await self.client.post(self.endpoint, body)
        except RequestError as exc:
            if is_context_error(exc.message):
                return GenerationOutput([], [], "length")
            raise
        out, usage = self.answer(data)
        self.usage.requests += 1
        self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
        return out


class CompletionsPolicy(TokenPolicy):
    """:class:`TokenPolicy` over an OpenAI-compatible ``POST /completions`` (vLLM's: ``prompt`` as token ids,
    ``return_token_ids``)."""

    endpoint = "completions"

    def body(self, prompt_ids: Sequence[int], params: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(t) for t in prompt_ids],
            "max_tokens": params.get("max_tokens"),
            "n": 1,
            "stream": False,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if self.logprobs:
            body["logprobs"] = 0  # the sampled token's log-prob only
        for key in _FORWARDED:
            if params.get(key) is not None:
                body[key] = params[key]
        return body

    def answer(self, data: Mapping[str, Any]) -> tuple[GenerationOutput, Mapping[str, Any]]:
        return parse_completion(data), data.get("usage") or {}


def parse_completion(data: Mapping[str, Any]) -> GenerationOutput:
    """Token ids, log-probs and stop reason of a ``/completions`` answer (first choice)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"not a completions answer: {str(data)[:300]}") from None
    lp = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        tokens = lp.get("tokens") or []
        if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            ids = [int(t.split(":", 1)[1]) for t in tokens]
        elif not choice.get("text"):
            ids = []
        else:
            raise TokenIdsUnavailableError(
                "the server returned text but no token ids (`return_token_ids` unsupported): token mode needs "
                "vLLM >= 0.10 or another server returning token ids; use --mode chat otherwise"
            )
    logprobs = lp.get("token_logprobs")
    if logprobs is not None:
        logprobs = [0.0 if x is None else float(x) for x in logprobs]
        if len(logprobs) != len(ids):
            logprobs = None
    return GenerationOutput(ids, logprobs, choice.get("finish_reason") or "stop")


def fit_to_context(params: dict[str, Any], prompt_len: int, max_model_len: int | None,
                   usage: UsageCounter) -> dict[str, Any] | None:
    """``params`` with ``max_tokens`` clamped so that prompt + completion fit ``max_model_len`` (set to the room
    left when not given; a clamp is counted in ``usage.context_clamped``), or ``None`` when the prompt leaves
    no room."""
    if max_model_len is None:
        return params
    room = max_model_len - prompt_len
    if room <= 0:
        return None
    max_tokens = params.get("max_tokens")
    if max_tokens is None or max_tokens > room:
        usage.context_clamped += max_tokens is not None
        params = {**params, "max_tokens": room}
    return params


def is_context_error(message: str) -> bool:
    """Whether a server's error message says the prompt does not fit the context (vLLM's and SGLang's words)."""
    m = message.lower()
    return "context length" in m or "maximum model length" in m or "max_model_len" in m or "too long" in m


# --------------------------------------------------------------------------- chat mode
class MessageLedger:
    """A per-episode view of a :class:`~agent_tune.rollout.ChatRenderer` that records the conversation.

    It behaves exactly like the renderer it wraps (every attribute is delegated), and additionally keeps
    the messages the runner renders: the initial prompt's messages and tools, and each observation's new
    messages. The chat policy of the same episode reads them to build its ``/chat/completions`` request.
    """

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer
        self.initial: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] | None = None
        self.observations: list[list[dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._renderer, name)

    def render_prompt(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> list[int]:
        self.initial = [dict(m) for m in messages]
        self.tools = [dict(t) for t in tools] if tools else None
        return self._renderer.render_prompt(messages, tools)

    def render_delta(self, new_messages: Sequence[Mapping[str, Any]]) -> list[int]:
        self.observations.append([dict(m) for m in new_messages])
        return self._renderer.render_delta(new_messages)


def reasoning_tags(reasoning_parser: str) -> tuple[str, str] | None:
    """The (start, end) tags a chat-mode answer's separate reasoning is written back in: the reasoning parser's
    own (a name or a ``tags:`` spec, :func:`agent_tune.parsing.get_reasoning_parser`); ``None`` for a parser
    without tags (``none``): the reasoning is dropped."""
    parser = get_reasoning_parser(reasoning_parser)
    start, end = getattr(parser, "start_tag", None), getattr(parser, "end_tag", None)
    return (start, end) if start and end else None


@dataclass
class _Turn:
    """One assistant answer as the chat server gave it, and the ids given to its tool calls."""

    message: dict[str, Any]
    call_ids: list[str] = field(default_factory=list)


class ChatCompletionsPolicy:
    """Message-level policy for one episode over ``POST /chat/completions`` with ``tools=``.

    Not token-exact: the server renders with its own chat template and parses tool calls with its own
    parser. The answer's tool calls are written back as text with ``tool_parser.format_calls`` (the
    env parses that text); the returned token ids are the local tokenizer's encoding of that text plus
    the end-of-turn token, used by the runner only for its token budget.
    """

    def __init__(
        self,
        client: OpenAIClient,
        model: str,
        ledger: MessageLedger,
        tool_parser: Any,
        defaults: Mapping[str, Any] | None = None,
        reasoning_tags: tuple[str, str] | None = None,
        usage: UsageCounter | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.ledger = ledger
        self.tool_parser = tool_parser
        self.defaults = dict(defaults or {})
        self.reasoning_tags = reasoning_tags
        self.usage = usage if usage is not None else UsageCounter()
        self._turns: list[_Turn] = []
        self.invalid_arguments = 0

    def conversation(self) -> list[dict[str, Any]]:
        """The OpenAI chat messages of the episode so far (assistant turns as the server answered)."""
        msgs = [dict(m) for m in self.ledger.initial]
        for i, turn in enumerate(self._turns):
            msgs.append(turn.message)
            if i < len(self.ledger.observations):
                ids = iter(turn.call_ids)
                for m in self.ledger.observations[i]:
                    m = dict(m)
                    if m.get("role") == "tool":
                        call_id = next(ids, None)
                        if call_id is not None:
                            m["tool_call_id"] = call_id
                        m.pop("name", None)
                    msgs.append(m)
        return msgs

    def request_body(self, sampling_params: Mapping[str, Any]) -> dict[str, Any]:
        params = {**self.defaults, **dict(sampling_params)}
        body: dict[str, Any] = {"model": self.model, "messages": self.conversation(), "n": 1, "stream": False}
        if self.ledger.tools:
            body["tools"] = self.ledger.tools
        for key in ("max_tokens", "temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty"):
            if params.get(key) is not None:
                body[key] = params[key]
        stop = [s for s in (params.get("stop") or [])]
        if stop:
            body["stop"] = stop
        return body

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        body = self.request_body(sampling_params)
        try:
            data = await self.client.post("chat/completions", body)
        except RequestError as exc:
            if is_context_error(exc.message):
                return GenerationOutput([], [], "length")
            raise
        self.usage.requests += 1
        usage = data.get("usage") or {}
        self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"not a chat completions answer: {str(data)[:300]}") from None
        text, history = self._to_text(message)
        self._turns.append(history)
        finish = choice.get("finish_reason") or "stop"
        finish = "stop" if finish == "tool_calls" else finish
        ids = self.ledger.encode(text)
        if finish != "length":
            ids.append(self.ledger.end_of_turn_id)
        return GenerationOutput(ids, None, finish)

    def _to_text(self, message: Mapping[str, Any]) -> tuple[str, _Turn]:
        content = message.get("content") or ""
        calls: list[ToolCall] = []
        bad_blocks: list[str] = []
        history_calls: list[dict[str, Any]] = []
        call_ids: list[str] = []
        for k, tc in enumerate(message.get("tool_calls") or []):
            fn = tc.get("function") or {}
            name, raw_args = fn.get("name"), fn.get("arguments")
            try:
                args = json.loads(raw_args) if isinstance(raw_args, str) else (raw_args or {})
                if not isinstance(args, dict) or not isinstance(name, str):
                    raise ValueError
            except ValueError:
                self.invalid_arguments += 1
                bad_blocks.append(f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {raw_args}}}\n</tool_call>')
                continue
            calls.append(ToolCall(name, args))
            call_id = str(tc.get("id") or f"call_{len(self._turns)}_{k}")
            call_ids.append(call_id)
            history_calls.append({"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
        text = self.tool_parser.format_calls(calls, content) if calls else content
        if bad_blocks:
            text = "\n".join([text] + bad_blocks) if text else "\n".join(bad_blocks)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if self.reasoning_tags is not None and reasoning:
            start, end = self.reasoning_tags
            text = f"{start}\n{reasoning}\n{end}\n\n{text}"
        history: dict[str, Any] = {"role": "assistant", "content": content or None}
        if history_calls:
            history["tool_calls"] = history_calls
        return text, _Turn(history, call_ids)
