"""``agent-tune eval --api sglang`` against a scripted server that speaks SGLang's documented native API.

The server (:class:`ScriptedSGLang`, here in the test) answers as SGLang's native-API and sampling-parameter
references describe: ``GET /v1/models`` (SGLang's model card, ``max_model_len`` its context length), ``GET
/model_info``, and ``POST /generate`` taking ``input_ids``, ``sampling_params`` (unknown keys refused with HTTP
400, as SGLang's schema does) and ``return_logprob``, answering ``{"text", "output_ids", "meta_info":
{"finish_reason": {"type": ...}, "prompt_tokens", "completion_tokens", "output_token_logprobs": [[logprob,
token_id, null], ...], ...}}`` with the stop token kept in ``output_ids`` and trimmed from ``text``. The tests
check token exactness (the ids the client sends are the trajectory so far; the ids and log-probs it gets back
are the trajectory's policy tokens), the translated sampling parameters, and the start-up errors.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from typing import Any, Sequence

import pytest
from aiohttp import web

from agent_tune.envs import make_env
from agent_tune.envs.tasks import select_tasks
from agent_tune.eval.cli import parse_run_args
from agent_tune.eval.client import ModelNotFoundError, RetryPolicy, ServerUnavailableError
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.policies import UsageCounter
from agent_tune.eval.sglang_policy import SGLangClient, SGLangGeneratePolicy, native_root
from agent_tune.eval.task_rows import catalogue_task_rows, row_env_kwargs
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.rollout.sglang_protocol import SGLangSamplingError
from agent_tune.testing.scripted_server import Script, chatml_position, first_questions, oracle_script
from agent_tune.testing.server_process import free_port

IDS = ["multi_turn_base_0", "multi_turn_base_5", "multi_turn_miss_func_1"]

# SGLang's documented /generate request fields (GenerateReqInput) and sampling_params keys.
GENERATE_FIELDS = {
    "text", "input_ids", "input_embeds", "image_data", "audio_data", "video_data", "sampling_params", "rid",
    "return_logprob", "logprob_start_len", "top_logprobs_num", "token_ids_logprob", "return_text_in_logprobs",
    "stream", "log_metrics", "return_hidden_states", "modalities", "session_params", "lora_path", "lora_id",
    "custom_logit_processor", "bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key",
}
SAMPLING_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "stream_interval", "logit_bias", "sampling_seed", "custom_params",
}
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's default


class ScriptedSGLang:
    """``async with ScriptedSGLang(tok, script, ids) as srv``; ``srv.url`` is the server's root.

    ``native=False`` leaves out SGLang's own endpoints (an OpenAI-only server, as vLLM is); ``fail_first``
    answers the first N generations with 503. Each generated token's log-prob is ``-0.001 * (k + 1)``, ``k`` its
    index over the whole run, so every returned log-prob is told from the others."""

    def __init__(self, tokenizer: Any, script: Script, test_ids: Sequence[str], served: str = "smol",
                 context_len: int = 65536, native: bool = True, fail_first: int = 0) -> None:
        self.tok = tokenizer
        self.script = script
        self.questions = first_questions(test_ids)
        self.served = served
        self.context_len = context_len
        self.native = native
        self.fail_first = fail_first
        self.eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.requests: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.emitted: list[int] = []
        self.emitted_logprobs: list[float] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> "ScriptedSGLang":
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/v1/models", self.models)
        if self.native:
            app.router.add_get("/model_info", self.model_info)
            app.router.add_post("/generate", self.generate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.served, "object": "model", "created": 0, "owned_by": "sglang", "root": self.served,
                "parent": None, "max_model_len": self.context_len}
        return web.json_response({"object": "list", "data": [card]})

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": "/models/smol", "served_model_name": self.served,
                                  "tokenizer_path": "/models/smol", "is_generation": True,
                                  "preferred_sampling_params": None, "weight_version": "default"})

    @staticmethod
    def _bad(message: str) -> web.Response:
        return web.json_response({"error": {"message": message}}, status=400)

    async def generate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        sampling = body.get("sampling_params") or {}
        unknown = sorted(set(sampling) - SAMPLING_FIELDS)
        if unknown:  # SGLang's schema refuses unknown sampling parameters
            return web.json_response({"error": f"unknown field `{unknown[0]}`, expected one of "
                                               f"{', '.join(f'`{k}`' for k in sorted(SAMPLING_FIELDS))}"}, status=400)
        ids_in = body.get("input_ids")
        if body.get("text") is not None or not isinstance(ids_in, list) or not all(isinstance(t, int) for t in ids_in):
            return self._bad("token mode sends input_ids, a list of token ids, and no text")
        if len(ids_in) >= self.context_len:
            return self._bad(f"The input ({len(ids_in)} tokens) is longer than the model's context length "
                             f"({self.context_len} tokens).")
        max_new = sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        if max_new + len(ids_in) > self.context_len:
            return self._bad(f"Requested token count exceeds the model's maximum context length of "
                             f"{self.context_len} tokens. You requested a total of {max_new + len(ids_in)} tokens")
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        first, turn, step = chatml_position(self.tok.decode(ids_in, skip_special_tokens=False))
        ids = self.tok.encode(self.script(self.questions[first], turn, step), add_special_tokens=False) + [self.eot]
        finish: dict[str, Any] = {"type": "stop", "matched": self.eot}
        if self.eot not in (sampling.get("stop_token_ids") or []):
            return self._bad("the scripted server ends every answer with <|im_end|>: ask to stop on it")
        if len(ids) > max_new:
            ids, finish = ids[:max_new], {"type": "length", "length": max_new}
        start = len(self.emitted)
        lps = [-0.001 * (start + i + 1) for i in range(len(ids))]
        self.emitted += ids
        self.emitted_logprobs += lps
        meta: dict[str, Any] = {"id": uuid.uuid4().hex, "finish_reason": finish, "prompt_tokens": len(ids_in),
                                "weight_version": "default", "total_retractions": 0, "completion_tokens": len(ids),
                                "cached_tokens": 0, "e2e_latency": 0.001}
        if body.get("return_logprob"):
            meta["input_token_logprobs"] = []
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(lps, ids)]
            meta["output_token_logprobs_length"] = len(ids)
        text_ids = ids[:-1] if finish["type"] == "stop" and not sampling.get("no_stop_trim") else ids
        answer = {"text": self.tok.decode(text_ids, skip_special_tokens=sampling.get("skip_special_tokens", True)),
                  "output_ids": ids, "meta_info": meta}
        self.answers.append(answer)
        return web.json_response(answer)


def _env_and_task(test_id: str):
    row = catalogue_task_rows("bfcl", select_tasks("bfcl", ids=[test_id]))[test_id]
    return make_env(row.env, **row_env_kwargs(row, "hermes", "none")), row.task


async def test_episode_is_token_exact_over_generate(qwen_tok) -> None:
    test_id = "multi_turn_base_5"
    async with ScriptedSGLang(qwen_tok, oracle_script([test_id]), [test_id]) as srv:
        async with SGLangClient(srv.url + "/v1") as client:  # an OpenAI-style URL works too: its /v1 is dropped
            info = await client.check_model("smol")
            policy = SGLangGeneratePolicy(client, "smol", max_model_len=info.max_model_len)
            env, task = _env_and_task(test_id)
            try:
                result = await run_episode(env, policy, ChatRenderer(qwen_tok, "qwen3"),
                                           RolloutLimits(max_prompt_length=16000, max_response_length=16000),
                                           {"temperature": 0.7, "top_k": 20, "seed": 3}, task=task)
            finally:
                env.close()
    traj = result.trajectory
    assert result.info["accuracy"] == 1.0 and len(srv.requests) >= 2
    # what came back is the trajectory's policy part, id for id and log-prob for log-prob
    policy_ids = [t for t, m in zip(traj.response_ids, traj.response_mask) if m == 1]
    policy_lps = [lp for lp, m in zip(traj.response_logprobs, traj.response_mask) if m == 1]
    assert policy_ids == srv.emitted and policy_lps == pytest.approx(srv.emitted_logprobs, abs=0)
    # what went out is the trajectory so far: the prompt, then each earlier request + its answer + the env's tokens
    full = traj.prompt_ids + traj.response_ids
    assert srv.requests[0]["input_ids"] == traj.prompt_ids
    for k, body in enumerate(srv.requests):
        assert body["input_ids"] == full[: len(body["input_ids"])]
        if k:
            before = srv.requests[k - 1]["input_ids"] + srv.answers[k - 1]["output_ids"]
            assert body["input_ids"][: len(before)] == before
    body = srv.requests[0]
    assert set(body) <= GENERATE_FIELDS and body["return_logprob"] is True and body["stream"] is False
    sampling = body["sampling_params"]
    assert sampling["temperature"] == 0.7 and sampling["top_k"] == 20 and sampling["sampling_seed"] == 3
    assert sampling["max_new_tokens"] == min(16000, srv.context_len - len(body["input_ids"]))
    assert qwen_tok.convert_tokens_to_ids("<|im_end|>") in sampling["stop_token_ids"]
    assert policy.usage.requests == len(srv.requests)
    assert policy.usage.completion_tokens == len(srv.emitted)


def settings(srv: ScriptedSGLang, **kw) -> EvalSettings:
    base = dict(base_url=srv.url, model="smol", api="sglang", template="qwen3", concurrency=2, progress=False,
                seed=11, top_k=0)
    base.update(kw)
    return EvalSettings(**base)


async def test_eval_run_scores_and_retries(qwen_tok, tmp_path) -> None:
    async with ScriptedSGLang(qwen_tok, oracle_script(IDS), IDS, fail_first=2) as srv:
        out = await Evaluator(settings(srv, max_retries=3), qwen_tok).run(IDS, tmp_path / "r.jsonl")
    assert out.ran == len(IDS) and not out.failed
    assert all(r["accuracy"] == 1.0 and r["format_errors"] == 0 for r in out.records)
    generations = sum(r["num_generations"] for r in out.records)
    assert len(srv.requests) == generations + 2  # the two 503s were retried
    assert {b["sampling_params"]["sampling_seed"] for b in srv.requests} == {11}
    assert {b["sampling_params"]["top_k"] for b in srv.requests} == {-1}  # "all tokens" as SGLang spells it
    assert out.usage.completion_tokens == len(srv.emitted)


async def test_context_limit_ends_the_episode_as_length(qwen_tok) -> None:
    test_id = "multi_turn_base_0"
    async with ScriptedSGLang(qwen_tok, oracle_script([test_id]), [test_id], context_len=100000) as srv:
        async with SGLangClient(srv.url) as client:
            policy = SGLangGeneratePolicy(client, "smol")  # no context length known: the server's 400 says it
            srv.context_len = 10
            out = await policy.generate(list(range(20)), {"max_tokens": 5, "stop_token_ids": [srv.eot]})
            assert out.token_ids == [] and out.stop_reason == "length"
            clamped = SGLangGeneratePolicy(client, "smol", max_model_len=30, usage=UsageCounter())
            assert clamped.request_body(list(range(20)), {"max_tokens": 50})["sampling_params"]["max_new_tokens"] == 10
            assert clamped.usage.context_clamped == 1
            assert clamped.request_body(list(range(30)), {}) is None  # no room left: nothing is sent


async def test_a_sampling_parameter_sglang_lacks_fails_before_any_request(qwen_tok) -> None:
    async with ScriptedSGLang(qwen_tok, oracle_script(IDS[:1]), IDS[:1]) as srv:
        async with SGLangClient(srv.url) as client:
            with pytest.raises(SGLangSamplingError, match="'best_of'"):
                await SGLangGeneratePolicy(client, "smol").generate([1, 2], {"best_of": 2})
    assert srv.requests == []


async def test_start_up_errors_say_what_to_fix(qwen_tok) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with SGLangClient(dead) as client:
        with pytest.raises(ServerUnavailableError, match=r"no SGLang server answers at .*ConnectError.*"
                                                         r"python -m sglang\.launch_server"):
            await client.check_model("smol")
    async with ScriptedSGLang(qwen_tok, oracle_script(IDS[:1]), IDS[:1]) as srv:
        async with SGLangClient(srv.url) as client:
            with pytest.raises(ModelNotFoundError, match=r"does not serve model 'x'; it serves: 'smol' \(pass it "
                                                         r"to --model, or start SGLang with --served-model-name\)"):
                await client.check_model("x")
    async with ScriptedSGLang(qwen_tok, oracle_script(IDS[:1]), IDS[:1], native=False) as srv:
        async with SGLangClient(srv.url) as client:  # an OpenAI-only server (vLLM): no /model_info
            with pytest.raises(ServerUnavailableError, match=r"not SGLang's native one .*HTTP 404.*use --api openai"):
                await client.check_model("smol")


async def test_a_server_that_never_answers_fails_the_start_up_check_in_time() -> None:
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepts connections (the kernel does) and never answers
    try:
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        async with SGLangClient(url, startup_timeout=0.5, retry=RetryPolicy(base_delay=0.0)) as client:
            t0 = time.monotonic()
            with pytest.raises(ServerUnavailableError, match=r"no SGLang server answers.*ReadTimeout.*0\.5 s"):
                await asyncio.wait_for(client.check_model("smol"), 30)
            assert time.monotonic() - t0 < 5
    finally:
        hung.close()


def test_the_api_is_a_setting_with_its_modes() -> None:
    args = parse_run_args(["--base-url", "http://127.0.0.1:30000", "--model", "smol", "--api", "sglang"])
    assert args.api == "sglang" and args.mode == "tokens"
    with pytest.raises(SystemExit):
        parse_run_args(["--base-url", "http://h", "--model", "m", "--api", "tgi"])
    with pytest.raises(ValueError, match=r"--api sglang plays --mode tokens, not 'chat'; .*--api openai"):
        EvalSettings(base_url="http://h", model="m", api="sglang", mode="chat")
    assert native_root("http://h:30000/v1/") == native_root("http://h:30000") == "http://h:30000"
