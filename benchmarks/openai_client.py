"""Requests/s of the eval's client: the old aiohttp client (BASELINE) against the shared client that replaced it.

Issue 21, item 5: one client for OpenAI-compatible servers (:mod:`agent_tune.openai_client`: the eval's, the
simulated user's, tau2's judge's start-up check), preferably the ``openai`` SDK, "unless a benchmark shows it
slower at the eval's concurrency". It did (the SDK's raw ``post``, over its aiohttp transport: 1.2-1.9x fewer
requests/s at 0 ms server latency, 1.06-1.16x at 50 ms, the whole eval 1.11-1.29x slower), so the shared client
is built directly on aiohttp, as the old eval client was. This benchmark checks it is as fast as that client.
Every client runs in this one process, in alternating rounds (each round starting with the next client; the
median round is printed), so a busy machine slows them alike.

Part 1, the client alone: ``--requests`` ``POST /v1/completions`` at the eval's concurrency (16, the default
of ``agent-tune eval --concurrency``), each with the body the eval's token mode sends
(:meth:`~agent_tune.eval.policies.CompletionsPolicy.request_body`: a ``--prompt-tokens`` token-id prompt,
``return_token_ids``, ``logprobs``, ``stop_token_ids``, ...), against a fake vLLM: an aiohttp app in a child
process (so its CPU is not the client's) answering a canned completion with ``--completion-tokens`` token
ids and log-probs after ``latency`` seconds. Latency 0 measures the client's own overhead; 50 ms
(``benchmarks/eval_throughput.py``'s default) is a fast real server. Printed: requests/s, this process's CPU
ms per request (the client's), and base/x (how many times more requests/s BASELINE made: above 1, slower than
BASELINE). "new" is :class:`agent_tune.eval.client.OpenAIClient` (:class:`agent_tune.openai_client.AsyncClient`
with the eval's start-up messages). For reference (unless ``--no-sdk``, and only where ``openai`` is
installed: agent_tune does not need it), the ``openai`` SDK's ``AsyncOpenAI`` raw ``post`` over its aiohttp
transport, the shared client this one replaced.

Part 2, the whole eval (unless ``--no-eval``): ``agent-tune eval``'s :class:`~agent_tune.eval.evaluate.Evaluator`
(the episode runner, the BFCL env, token mode) on the scripted server of the eval tests
(``tests/eval/scripted_server.py``, in this process, answering each entry's ground truth) at the same
concurrency, with BASELINE and with the new client; entries/s and CPU ms per entry (the scripted server's
included).

Part 3, the simulated user's path (unless ``--no-user``): the user builds a client per reply (each reply may
run on a fresh event loop), so what counts there is a client's cost from construction to close. ``--replies``
replies one after another, each ``asyncio.run`` of: build a client, ``POST /v1/chat/completions`` (a short
conversation), close it; against the fake vLLM at latency 0. Printed: the construction alone (microseconds),
and a whole reply's wall and CPU ms, for the new client, the user's old code (``httpx.AsyncClient`` per reply,
when httpx is installed) and the SDK reference (its default httpx2 transport, as the user had it).

    python benchmarks/openai_client.py [--requests 1000] [--concurrency 16] [--latencies 0 0.05] \\
        [--rounds 5] [--eval-entries 24] [--eval-rounds 5] [--replies 200] [--no-client] [--no-eval] \\
        [--no-user] [--no-sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing as mp
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402

from agent_tune.eval.client import OpenAIClient  # noqa: E402
from agent_tune.eval.policies import CompletionsPolicy, parse_completion  # noqa: E402

# The old client's data types and errors are unchanged in the shared module: imported, not copied.
from agent_tune.openai_client import (  # noqa: E402
    TRANSIENT_STATUSES,
    AsyncClient,
    ModelInfo,
    ModelNotFoundError,
    RequestError,
    RetryPolicy,
    ServerUnavailableError,
)

EOT = 151645  # Qwen's <|im_end|>
OLD = "BASELINE: old eval client (aiohttp)"
NEW = "new: openai_client.AsyncClient (aiohttp)"
SDK = "reference: openai SDK raw post (aiohttp transport)"
OLD_USER = "old user code: httpx.AsyncClient per reply"
SDK_USER = "reference: openai SDK per reply (httpx2 transport)"
HAVE_SDK = importlib.util.find_spec("openai") is not None and importlib.util.find_spec("httpx2") is not None
HAVE_HTTPX = importlib.util.find_spec("httpx") is not None


# ============================================================================ BASELINE (old code, used by nothing
# in agent_tune): the eval's aiohttp client as agent_tune/eval/client.py had it before the shared client
# (issue 21, item 5), kept here only to compare against. Verbatim but for the class name.
class BaselineAiohttpClient:
    """Async JSON client for one OpenAI-compatible base URL (``http://host:port/v1``).

    Use as an async context manager, or call :meth:`close`. ``timeout`` bounds one request (seconds);
    ``connect_timeout`` bounds connecting, so a dead server is reported at once.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        max_connections: int = 256,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self.retry = retry
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0
        self.retries = 0

    async def __aenter__(self) -> "BaselineAiohttpClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._session = aiohttp.ClientSession(
                timeout=self.timeout,
                headers=headers,
                connector=aiohttp.TCPConnector(limit=self.max_connections),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    # ------------------------------------------------------------------ requests
    async def _request(self, method: str, path: str, payload: dict[str, Any] | None, retries: int) -> Any:
        url = f"{self.base_url}/{path.lstrip('/')}"
        last: str = ""
        for attempt in range(retries + 1):
            if attempt:
                self.retries += 1
                await asyncio.sleep(self.retry.delay(attempt - 1))
            try:
                self.requests_sent += 1
                async with self._get_session().request(method, url, json=payload) as resp:
                    text = await resp.text()
                    if resp.status < 400:
                        try:
                            return await resp.json(content_type=None)
                        except ValueError:
                            raise ServerUnavailableError(
                                f"{url} answered HTTP {resp.status} with non-JSON: {text[:200]!r}"
                            )
                    message = _baseline_error_message(text)
                    if resp.status not in TRANSIENT_STATUSES:
                        raise RequestError(resp.status, message)
                    last = f"HTTP {resp.status}: {message}"
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ServerUnavailableError(f"{method} {url} failed after {retries + 1} attempts; last error: {last}")

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``base_url/path``, retrying transient failures; return the JSON answer."""
        return await self._request("POST", path, payload, self.retry.max_retries)

    async def list_models(self, retries: int = 0) -> list[ModelInfo]:
        """``GET /models`` (no retries by default: used to fail fast)."""
        try:
            data = await self._request("GET", "models", None, retries)
        except ServerUnavailableError as exc:
            raise ServerUnavailableError(
                f"no OpenAI-compatible server answers at {self.base_url} ({exc}). Start one, e.g. "
                "`python -m vllm.entrypoints.openai.api_server --model DIR --served-model-name NAME`, "
                "and check --base-url (it ends in /v1)"
            ) from None
        except RequestError as exc:
            raise ServerUnavailableError(
                f"{self.base_url}/models answered {exc}; is --base-url right (it ends in /v1)?"
            ) from None
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ServerUnavailableError(
                f"{self.base_url}/models did not return an OpenAI model list: {str(data)[:200]}"
            )
        return [
            ModelInfo(
                str(r.get("id")),
                r.get("max_model_len") if isinstance(r.get("max_model_len"), int) else None,
                r.get("root"),
            )
            for r in rows
            if isinstance(r, dict)
        ]

    async def check_model(self, model: str) -> ModelInfo:
        """Fail fast unless the server is up and serves ``model``; return its info."""
        models = await self.list_models()
        for info in models:
            if info.id == model:
                return info
        served = ", ".join(repr(m.id) for m in models) or "none"
        raise ModelNotFoundError(
            f"the server at {self.base_url} does not serve model {model!r}; it serves: {served} "
            "(pass one of these to --model, or start vLLM with --served-model-name)"
        )


def _baseline_error_message(text: str) -> str:
    """The ``message`` of an OpenAI-style error body, or the body itself (shortened)."""
    import json

    try:
        body = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:500]
        if isinstance(body.get("message"), str):
            return body["message"][:500]
    return text[:500]
# ============================================================================ END OF BASELINE


# ---------------------------------------------------------------------------- reference: the openai SDK
class SdkReference:
    """What the shared client was before it moved to aiohttp: ``openai.AsyncOpenAI`` (SDK retries off), JSON
    bodies sent as given through its raw ``post``, the JSON answer read from the raw response. For reference
    only (the ``openai`` package is not a dependency of agent_tune)."""

    def __init__(self, base_url: str, max_connections: int = 256, transport: str = "aiohttp") -> None:
        import httpx2
        import openai

        timeout = httpx2.Timeout(600.0, connect=10.0)
        factory = {"httpx": openai.DefaultAsyncHttpxClient, "aiohttp": openai.DefaultAioHttpClient}[transport]
        http = factory(timeout=timeout, verify=_sdk_ssl_context(),
                       limits=httpx2.Limits(max_connections=max_connections,
                                            max_keepalive_connections=max_connections))
        self._response = httpx2.Response
        self.sdk = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=timeout,
                                      http_client=http)

    async def __aenter__(self) -> "SdkReference":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sdk.close()

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return json.loads((await self.sdk.post(path, cast_to=self._response, body=body)).content)


_SSL: list[Any] = []


def _sdk_ssl_context() -> Any:
    """One SSL context for every SDK client (as the SDK-based shared client cached it)."""
    if not _SSL:
        import httpx2

        _SSL.append(httpx2.create_ssl_context())
    return _SSL[0]


# ---------------------------------------------------------------------------- the fake vLLM (child process)
def _serve(port: int, completion_tokens: int, latency: Any, ready: Any) -> None:
    """A canned vLLM: ``GET /v1/models``; ``POST /v1/completions`` (a token-id prompt and ``return_token_ids``
    required) answers ``completion_tokens`` token ids with their log-probs after ``latency.value`` seconds;
    ``POST /v1/chat/completions`` answers a short chat message (the simulated user's) after the same wait."""
    from aiohttp import web

    ids = list(range(1000, 1000 + completion_tokens - 1)) + [EOT]
    answer = json.dumps({
        "id": "cmpl-fake", "object": "text_completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "text": "tok " * completion_tokens, "finish_reason": "stop",
                     "logprobs": {"token_logprobs": [-0.5] * completion_tokens, "tokens": []},
                     "token_ids": ids, "prompt_logprobs": None, "stop_reason": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": completion_tokens},
    }).encode()
    chat = json.dumps({
        "id": "chat-fake", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "My user id is mia_li_3668. Please help me."}}],
        "usage": {"prompt_tokens": 400, "completion_tokens": 12},
    }).encode()

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model",
                                                              "max_model_len": 1 << 20}]})

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body.get("prompt"), list) or body.get("return_token_ids") is not True:
            return web.json_response({"error": {"message": "token mode sends token ids"}}, status=400)
        if latency.value:
            await asyncio.sleep(latency.value)
        return web.Response(body=answer, content_type="application/json")

    async def chat_completions(request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body.get("messages"), list):
            return web.json_response({"error": {"message": "no messages"}}, status=400)
        if latency.value:
            await asyncio.sleep(latency.value)
        return web.Response(body=chat, content_type="application/json")

    async def run() -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/completions", completions)
        app.router.add_post("/v1/chat/completions", chat_completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(run())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeVLLM:
    """The fake vLLM in a child process; ``latency.value``: its seconds per request."""

    def __init__(self, completion_tokens: int) -> None:
        fork = mp.get_context("fork")
        self.latency, ready, port = fork.Value("d", 0.0), fork.Event(), _free_port()
        self.process = fork.Process(target=_serve, args=(port, completion_tokens, self.latency, ready), daemon=True)
        self.process.start()
        if not ready.wait(60):
            self.process.kill()
            raise RuntimeError("the fake server did not start")
        self.url = f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> "FakeVLLM":
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.join()


def _rotated(items: dict[str, Any], round_: int) -> list[tuple[str, Any]]:
    """``items`` in an order that starts one later each round, so that no client always runs first."""
    pairs = list(items.items())
    k = round_ % len(pairs)
    return pairs[k:] + pairs[:k]


def _medians(results: dict[str, list[tuple[float, ...]]]) -> dict[str, tuple[float, ...]]:
    return {name: tuple(statistics.median(r[i] for r in rs) for i in range(len(rs[0])))
            for name, rs in results.items()}


# ---------------------------------------------------------------------------- part 1: the client alone
def request_body(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The body the eval's token mode sends (CompletionsPolicy.request_body), a random token-id prompt."""
    rng = random.Random(0)
    prompt = [rng.randrange(151_000) for _ in range(prompt_tokens)]
    policy = CompletionsPolicy(None, "fake", max_model_len=1 << 20)  # type: ignore[arg-type]
    return policy.request_body(prompt, {"temperature": 1.0, "top_p": 1.0, "max_tokens": completion_tokens,
                                        "stop_token_ids": [EOT]})


async def _drive(post: Any, body: dict[str, Any], n: int, concurrency: int) -> tuple[float, float]:
    """(requests/s, CPU ms per request) of ``n`` posts, ``concurrency`` at a time, after a warm-up."""
    sem = asyncio.Semaphore(concurrency)

    async def one() -> Any:
        async with sem:
            return await post(body)

    first = await asyncio.gather(*(one() for _ in range(concurrency)))  # connections opened
    out = parse_completion(first[0])
    assert len(out.token_ids) == body["max_tokens"] and out.log_probs is not None, "token ids must come back"
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e3


async def run_client(client: Any, body: dict[str, Any], n: int, concurrency: int) -> tuple[float, float]:
    async with client:
        return await _drive(lambda b: client.post("completions", b), body, n, concurrency)


def part1(args: argparse.Namespace) -> None:
    conns = max(8, 2 * args.concurrency)  # what the eval gives its client
    clients: dict[str, Callable[[str], Any]] = {
        OLD: lambda url: BaselineAiohttpClient(url, max_connections=conns),
        NEW: lambda url: OpenAIClient(url, max_connections=conns),
    }
    if args.sdk:
        clients[SDK] = lambda url: SdkReference(url, max_connections=conns, transport="aiohttp")
    with FakeVLLM(args.completion_tokens) as server:
        body = request_body(args.prompt_tokens, args.completion_tokens)
        print(f"part 1: the client alone. POST /v1/completions, concurrency {args.concurrency}, prompt "
              f"{args.prompt_tokens} token ids ({len(json.dumps(body)) / 1024:.0f} KiB), answer "
              f"{args.completion_tokens} token ids + log-probs; fake vLLM in a child process; median of "
              f"{args.rounds} alternating rounds of {args.requests} requests")
        for lat in args.latencies:
            server.latency.value = lat
            results: dict[str, list[tuple[float, ...]]] = {name: [] for name in clients}
            for r in range(args.rounds):
                for name, make in _rotated(clients, r):
                    results[name].append(asyncio.run(run_client(make(server.url), body, args.requests,
                                                                args.concurrency)))
            med = _medians(results)
            print(f"\n  server latency {lat * 1000:.0f} ms")
            print(f"  {'client':<52} {'req/s':>8} {'CPU ms/req':>11} {'base/x':>7}")
            for name, (rps, cpu) in med.items():
                print(f"  {name:<52} {rps:8.1f} {cpu:11.2f} {med[OLD][0] / rps:6.2f}x")


# ---------------------------------------------------------------------------- part 2: the whole eval
async def eval_rate(tok: Any, ids: list[str], latency: float, concurrency: int, client_cls: Any
                    ) -> tuple[float, float]:
    """(entries/s, CPU ms per entry) of one eval run with ``client_cls`` as the evaluator's client."""
    import agent_tune.eval.evaluate as evaluate
    from agent_tune.eval.evaluate import EvalSettings, Evaluator
    from tests.eval.scripted_server import ScriptedServer, oracle_script

    saved = evaluate.OpenAIClient
    evaluate.OpenAIClient = client_cls
    try:
        async with ScriptedServer(tok, oracle_script(ids), ids, latency=latency) as srv:
            with tempfile.TemporaryDirectory() as d:
                s = EvalSettings(base_url=srv.base_url, model="scripted", template="qwen3", concurrency=concurrency,
                                 progress=False)
                t0, c0 = time.perf_counter(), time.process_time()
                out = await Evaluator(s, tok).run(ids, Path(d) / "r.jsonl")
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        evaluate.OpenAIClient = saved
    assert len(out.records) == len(ids) and all(r["accuracy"] == 1.0 for r in out.records), "the oracle scores 1"
    return len(ids) / dt, cpu / len(ids) * 1e3


def part2(args: argparse.Namespace) -> None:
    from agent_tune.models.qwen_vocab import load_qwen3_tokenizer
    from benchmarks.eval_throughput import pick_ids

    tok = load_qwen3_tokenizer()
    ids = pick_ids(args.eval_entries)
    clients = {OLD: BaselineAiohttpClient, NEW: OpenAIClient}
    print(f"\npart 2: the whole eval (Evaluator, BFCL multi-turn, token mode), {len(ids)} entries, concurrency "
          f"{args.concurrency}, scripted server in this process (its CPU counted); median of {args.eval_rounds} "
          "alternating rounds")
    for lat in args.latencies:
        asyncio.run(eval_rate(tok, ids[:2], lat, args.concurrency, OpenAIClient))  # warm-up (imports, caches)
        rates: dict[str, list[tuple[float, ...]]] = {name: [] for name in clients}
        for r in range(args.eval_rounds):
            for name, cls in _rotated(clients, r):
                rates[name].append(asyncio.run(eval_rate(tok, ids, lat, args.concurrency, cls)))
        med = _medians(rates)
        print(f"\n  server latency {lat * 1000:.0f} ms")
        print(f"  {'client':<52} {'entries/s':>9} {'CPU ms/entry':>13} {'base/x':>7}")
        for name, (rate, cpu) in med.items():
            print(f"  {name:<52} {rate:9.2f} {cpu:13.1f} {med[OLD][0] / rate:6.2f}x")


# ---------------------------------------------------------------------------- part 3: the user's path
USER_BODY = {"model": "fake", "temperature": 0.0, "messages": [
    {"role": "system", "content": "You are a customer of an airline. " * 40},
    {"role": "user", "content": "Hi! How can I help you today?"},
    {"role": "assistant", "content": "I want to change my flight."},
    {"role": "user", "content": "Sure, what is your user id?"},
]}


class OldHttpxUser:
    """The simulated user's HTTP code before the shared client (agent_tune/users/llm.py): an
    ``httpx.AsyncClient`` per reply, ``raise_for_status``, ``response.json()`` (retries left out: none happen)."""

    def __init__(self, base_url: str) -> None:
        import httpx

        self.base_url = base_url
        self.client = httpx.AsyncClient(timeout=120.0, headers={})

    async def __aenter__(self) -> "OldHttpxUser":
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self.client.post(f"{self.base_url}/{path}", json=body)
        response.raise_for_status()
        return response.json()


def _user_clients(args: argparse.Namespace) -> dict[str, Callable[[str], Any]]:
    retry = RetryPolicy.persistent(3, 1.0)  # the user's: UserConfig's max_retries and backoff_s
    clients: dict[str, Callable[[str], Any]] = {
        NEW: lambda url: AsyncClient(url, None, timeout=120.0, retry=retry, max_connections=1, what="user simulator"),
    }
    if HAVE_HTTPX:
        clients[OLD_USER] = OldHttpxUser
    if args.sdk:
        clients[SDK_USER] = lambda url: SdkReference(url, max_connections=1, transport="httpx")
    return clients


async def _one_reply(make: Callable[[str], Any], url: str) -> None:
    async with make(url) as client:
        answer = await client.post("chat/completions", USER_BODY)
    assert answer["choices"][0]["message"]["content"]


def _reply_costs(make: Callable[[str], Any], url: str, n: int) -> tuple[float, float, float]:
    """(construction µs, wall ms per reply, CPU ms per reply) of ``n`` replies, each its own event loop."""
    t0 = time.perf_counter()
    for _ in range(n):
        make(url)  # construction alone, outside any loop (the user builds its client inside one)
    build = (time.perf_counter() - t0) / n * 1e6
    asyncio.run(_one_reply(make, url))  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        asyncio.run(_one_reply(make, url))
    return build, (time.perf_counter() - t0) / n * 1e3, (time.process_time() - c0) / n * 1e3


def part3(args: argparse.Namespace) -> None:
    import gc
    import warnings

    clients = _user_clients(args)
    print(f"\npart 3: the simulated user's path, a client per reply: {args.replies} replies one after another, "
          f"each asyncio.run(build, POST /v1/chat/completions, close); fake vLLM at 0 ms; median of "
          f"{args.rounds} alternating rounds")
    with FakeVLLM(args.completion_tokens) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        results: dict[str, list[tuple[float, ...]]] = {name: [] for name in clients}
        for r in range(args.rounds):
            for name, make in _rotated(clients, r):
                results[name].append(_reply_costs(make, server.url, args.replies))
        gc.collect()
    med = _medians(results)
    print(f"\n  {'client':<52} {'build us':>9} {'ms/reply':>9} {'CPU ms/reply':>13} {'x/new':>6}")
    for name, (build, wall, cpu) in med.items():
        print(f"  {name:<52} {build:9.1f} {wall:9.2f} {cpu:13.2f} {wall / med[NEW][1]:5.2f}x")
    unclosed = [str(w.message) for w in caught if "Unclosed" in str(w.message)]
    print(f"  aiohttp 'Unclosed client session' warnings in part 3: {len(unclosed)} (each reply closes its client's "
          "session; a client built but never used opens none)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=1000, help="requests per client and round (part 1)")
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight (agent-tune eval's default: 16)")
    p.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.05], help="server seconds per request")
    p.add_argument("--prompt-tokens", type=int, default=3000)
    p.add_argument("--completion-tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds of parts 1 and 3; medians printed")
    p.add_argument("--eval-entries", type=int, default=24, help="BFCL entries per whole-eval run (part 2)")
    p.add_argument("--eval-rounds", type=int, default=5, help="alternating whole-eval rounds (part 2)")
    p.add_argument("--replies", type=int, default=200, help="replies per client and round (part 3)")
    p.add_argument("--no-client", action="store_true", help="skip part 1 (the client alone)")
    p.add_argument("--no-eval", action="store_true", help="skip part 2 (the whole eval)")
    p.add_argument("--no-user", action="store_true", help="skip part 3 (the user's client per reply)")
    p.add_argument("--no-sdk", dest="sdk", action="store_false", help="leave out the openai SDK reference rows")
    args = p.parse_args(argv)
    args.sdk = args.sdk and HAVE_SDK
    if not args.no_client:
        part1(args)
    if not args.no_eval:
        part2(args)
    if not args.no_user:
        part3(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
