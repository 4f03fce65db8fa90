"""A user simulated by an LLM behind any OpenAI-compatible ``/chat/completions`` endpoint
(:mod:`agent_tune.openai_client`: aiohttp, the eval's client too)."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from agent_tune.openai_client import AsyncClient, RetryPolicy, ServerUnavailableError, UnusableAnswerError
from agent_tune.users.base import UserError, UserReply, UserToolCall
from agent_tune.users.config import UserConfig
from agent_tune.users.endpoint import EndpointUnavailableError, check_endpoint


class UserUnavailableError(EndpointUnavailableError):
    """The user's endpoint failed its start-up health check (the message names the URL)."""


class LLMUser:
    """Asks ``config.model`` at ``config.base_url`` for the user's next message.

    Every request is retried (``max_retries``, exponential backoff) on a transport error, an HTTP error
    status, or an answer that is not a usable chat completion (no choices, invalid tool-call arguments,
    neither text nor tool calls); when all tries fail :meth:`reply` raises :class:`UserError` with the last
    reason. Stateless: the conversation is the caller's. :meth:`health_check` is for start-up.
    """

    def __init__(self, config: UserConfig | dict[str, Any]) -> None:
        self.config = UserConfig.parse(config, "user")
        if self.config.kind != "llm":
            raise ValueError(f"LLMUser needs user.kind=llm, got {self.config.kind!r}")
        self.url = self.config.base_url.rstrip("/")

    def _api_key(self) -> str | None:
        env = self.config.api_key_env
        return os.environ[env] if env else None

    def health_check(self) -> None:
        """``GET <base_url>/models``; raise :class:`UserUnavailableError` naming the URL unless it answers and
        lists ``model``."""
        try:
            check_endpoint(self.url, self.config.model, self._api_key(), self.config.timeout_s, "user simulator")
        except EndpointUnavailableError as exc:
            raise UserUnavailableError(str(exc)) from None

    def _payload(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{k: v for k, v in m.items() if v is not None} for m in messages],
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            payload["max_tokens"] = self.config.max_tokens
        if tools:
            payload["tools"] = list(tools)
            payload["tool_choice"] = "auto"
        return payload

    @staticmethod
    def _decode(body: Any) -> UserReply:
        try:
            message = body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise UnusableAnswerError(f"not a chat completion: {str(body)[:200]}") from None
        if not isinstance(message, dict):
            raise UnusableAnswerError(f"not a chat message: {str(message)[:200]}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise UnusableAnswerError(f"content is not text: {str(content)[:200]}")
        calls = []
        for k, call in enumerate(message.get("tool_calls") or ()):
            try:
                function = call["function"]
                arguments = json.loads(function.get("arguments") or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("arguments are not an object")
                calls.append(UserToolCall(str(call.get("id") or f"user_call_{k}"), str(function["name"]), arguments))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise UnusableAnswerError(f"invalid tool call {str(call)[:200]}: {exc}") from None
        if not calls and (content is None or not content.strip()):
            raise UnusableAnswerError("empty reply (no text, no tool call)")
        return UserReply(content, tuple(calls))

    async def reply(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> UserReply:
        """The user's next message; :class:`UserError` after ``max_retries`` failed retries."""
        retry = RetryPolicy.persistent(self.config.max_retries, self.config.backoff_s)
        # a client per reply (cheap: its aiohttp session opens at the first request and closes on exit):
        # run_sync may run each reply on a fresh event loop, and a session belongs to one loop
        async with AsyncClient(self.url, self._api_key(), timeout=float(self.config.timeout_s), retry=retry,
                               max_connections=1, what="user simulator") as client:
            try:
                return await client.post("chat/completions", self._payload(messages, tools), decode=self._decode)
            except ServerUnavailableError as exc:
                raise UserError(f"user simulator at {self.url} failed {exc.attempts} times; last: {exc.last}") from None
