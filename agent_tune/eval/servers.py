"""The inference-server APIs ``agent-tune eval`` speaks (``--api``): each one's client and token-mode policy.

* ``openai`` (the default): an OpenAI-compatible ``/v1`` base URL. Token mode: ``POST /completions`` with a
  token-id prompt and vLLM's ``return_token_ids`` (:class:`~agent_tune.eval.policies.CompletionsPolicy`); chat
  mode: ``POST /chat/completions`` with ``tools=`` (any OpenAI-compatible server, SGLang's ``/v1`` included).
* ``sglang``: SGLang's native ``POST /generate`` at the server's root, token ids in, ids and log-probs out
  (:class:`~agent_tune.eval.sglang_policy.SGLangGeneratePolicy`); token mode only (for chat mode against SGLang,
  ``--api openai`` with its ``/v1`` URL).

The evaluator asks the registry (:func:`get_server_api`) for the client and the policy; nothing else in the
evaluator knows which API it talks to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from agent_tune.eval.client import OpenAIClient
from agent_tune.eval.policies import CompletionsPolicy
from agent_tune.eval.sglang_policy import SGLangClient, SGLangGeneratePolicy
from agent_tune.openai_client import AsyncClient


@dataclass(frozen=True)
class ServerAPI:
    """One API: its client class (``base_url, api_key, timeout=, retry=, max_connections=``), its token-mode
    policy class (``client, model, max_model_len=, usage=``) and the eval modes it plays."""

    name: str
    client: Callable[..., AsyncClient]
    token_policy: Callable[..., Any]
    modes: tuple[str, ...]
    hint: str = ""  # why a mode is missing, for the error


SERVER_APIS: dict[str, ServerAPI] = {
    "openai": ServerAPI("openai", OpenAIClient, CompletionsPolicy, ("tokens", "chat")),
    "sglang": ServerAPI("sglang", SGLangClient, SGLangGeneratePolicy, ("tokens",),
                        hint="for chat mode against an SGLang server use --api openai with its OpenAI URL "
                             "(http://host:port/v1)"),
}


def get_server_api(name: str) -> ServerAPI:
    """The API called ``name``; ``ValueError`` listing the known ones."""
    try:
        return SERVER_APIS[name]
    except KeyError:
        raise ValueError(f"--api must be one of {', '.join(SERVER_APIS)}, got {name!r}") from None


def check_mode(name: str, mode: str) -> None:
    """``ValueError`` unless API ``name`` plays eval mode ``mode``."""
    api = get_server_api(name)
    if mode not in api.modes:
        raise ValueError(f"--api {name} plays --mode {' / '.join(api.modes)}, not {mode!r}"
                         + (f"; {api.hint}" if api.hint else ""))
