"""Token-exact eval policy over an SGLang server's native ``POST /generate`` (``agent-tune eval --api sglang``).

SGLang serves its native API at the server's root (``http://host:30000/generate``) and its OpenAI-compatible one
under ``/v1``; :class:`SGLangClient` takes either URL and works from the root. At start-up
(:meth:`SGLangClient.check_model`) it asks ``GET /v1/models`` (the served name and its context length, one try,
the connect timeout bounding it) and ``GET /model_info`` (SGLang's own: a vLLM server answers 404 there, and an
embedding model is refused), so a wrong URL, a dead server or another kind of server fails before any episode
with what to do. Every generation is one ``/generate`` with the prompt's token ids
(:func:`agent_tune.rollout.sglang_protocol.generate_request`): the ids and log-probs SGLang sampled come back into
the trajectory as they are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from agent_tune.eval.client import ModelInfo, RequestError, ServerUnavailableError
from agent_tune.eval.policies import TokenIdsUnavailableError, TokenPolicy
from agent_tune.openai_client import AsyncClient, RetryPolicy, find_model, parse_models
from agent_tune.rollout.policy import GenerationOutput
from agent_tune.rollout.sglang_protocol import GenerateAnswerError, generate_request, parse_generate

START_HINT = ("Start one, e.g. `python -m sglang.launch_server --model-path DIR --served-model-name NAME --port "
              "30000`, and check --base-url (the server's root, e.g. http://127.0.0.1:30000)")
MODEL_HINT = "pass it to --model, or start SGLang with --served-model-name"
OPENAI_PREFIX = "/v1"
STARTUP_TIMEOUT_S = 30.0  # the start-up check's bound per request: a server that accepts and never answers fails


def native_root(base_url: str) -> str:
    """The server's root URL: ``base_url`` without a trailing ``/`` or ``/v1`` (its OpenAI prefix)."""
    root = base_url.rstrip("/")
    return root[: -len(OPENAI_PREFIX)] if root.endswith(OPENAI_PREFIX) else root


class SGLangClient(AsyncClient):
    """Async JSON client of an SGLang server (its root URL; a ``.../v1`` URL is accepted and its ``/v1`` dropped).

    The timeouts and retries are :class:`~agent_tune.openai_client.AsyncClient`'s: ``timeout`` bounds one request,
    ``connect_timeout`` connecting (a dead server fails the start-up check at once), transient failures (5xx,
    429, connection errors) are retried with backoff and client errors (4xx) are not. ``startup_timeout`` bounds
    each request of the start-up check (one try each), so a server that accepts connections and never answers
    fails it too.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0,
                 connect_timeout: float | None = 10.0, retry: RetryPolicy = RetryPolicy(),
                 max_connections: int = 256, startup_timeout: float = STARTUP_TIMEOUT_S) -> None:
        super().__init__(native_root(base_url), api_key, timeout, connect_timeout, retry, max_connections,
                         what="the SGLang server")
        self.startup_timeout = startup_timeout

    async def _get_once(self, path: str, retries: int = 0) -> Any:
        return await self.request("GET", path, retry=replace(self.retry, max_retries=retries),
                                  timeout=min(self.timeout, self.startup_timeout))

    async def list_models(self, retries: int = 0) -> list[ModelInfo]:
        """``GET /v1/models`` (one try by default); the errors say how to fix the command."""
        try:
            data = await self._get_once("v1/models", retries)
        except ServerUnavailableError as exc:
            raise ServerUnavailableError(
                f"no SGLang server answers at {self.base_url} ({exc.last or exc}). {START_HINT}", exc.url
            ) from None
        except RequestError as exc:
            raise ServerUnavailableError(
                f"{self.base_url}/v1/models answered {exc}; is --base-url the SGLang server's root?"
            ) from None
        return parse_models(data, self.base_url, self.what)

    async def model_info(self) -> dict[str, Any]:
        """SGLang's ``GET /model_info`` (``/get_model_info`` on SGLang versions before it); a server without
        either is not SGLang: :class:`ServerUnavailableError` saying so."""
        last: RequestError | None = None
        for path in ("model_info", "get_model_info"):
            try:
                data = await self._get_once(path)
            except RequestError as exc:
                last = exc
                continue
            except ServerUnavailableError as exc:
                raise ServerUnavailableError(f"GET {self.base_url}/{path} failed: {exc.last or exc}", exc.url) from None
            if isinstance(data, dict):
                return data
            break
        raise ServerUnavailableError(
            f"{self.base_url} answers the OpenAI API but not SGLang's native one (GET /model_info: "
            f"{last if last is not None else 'not a JSON object'}): is it an SGLang server? For vLLM or another "
            "OpenAI-compatible server use --api openai"
        )

    async def check_model(self, model: str, hint: str = MODEL_HINT) -> ModelInfo:
        """Fail fast unless the server is up, is SGLang, serves ``model`` and generates text; return its info."""
        info = find_model(await self.list_models(), model, self.base_url, self.what, hint)
        native = await self.model_info()
        if native.get("is_generation") is False:
            raise ServerUnavailableError(
                f"the SGLang server at {self.base_url} serves {model!r} as an embedding model (is_generation: false)"
            )
        return info


class SGLangGeneratePolicy(TokenPolicy):
    """Token-in/token-out :class:`~agent_tune.rollout.Policy` over SGLang's ``POST /generate``.

    Args:
        client: the server's client.
        model: the served model name (checked at start-up; ``/generate`` itself takes none: one model a server).
        max_model_len: the server's context length; ``max_tokens`` is clamped so that prompt + completion fits (a
            full context returns no tokens with stop reason ``"length"``, ending the episode).
        defaults: sampling parameters merged under the runner's (vLLM's names, translated for SGLang).
        logprobs: ask for the sampled tokens' log-probs.
    """

    endpoint = "generate"

    def body(self, prompt_ids: Sequence[int], params: Mapping[str, Any]) -> dict[str, Any]:
        return generate_request(prompt_ids, params, self.logprobs)

    def answer(self, data: Mapping[str, Any]) -> tuple[GenerationOutput, Mapping[str, Any]]:
        try:
            out = parse_generate(data)
        except GenerateAnswerError as exc:
            raise TokenIdsUnavailableError(str(exc)) from None
        return out, data["meta_info"]
