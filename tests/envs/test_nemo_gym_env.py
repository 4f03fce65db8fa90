"""The nemo_gym env against real NeMo Gym resource servers built with NeMo Gym's own classes
(``SimpleResourcesServer``, its session middleware, its request and verify models): one written for the test and
NeMo Gym's shipped ``example_session_state_mgmt`` with its own dataset rows, each served by uvicorn in a process of
the Python that has ``nemo-gym`` (``.venv-nemo-gym``: scripts/install_nemo_gym.sh; NeMo Gym needs Python >= 3.12 and
pins openai and mcp below vLLM's, so it cannot share agent-tune's venv). Checked: the contract, scripted episodes
through the runner scored by the server's ``/verify``, each bad-input outcome counted, a server that hangs bounded by
the time-limit rule (a call: stop reason ``timeout``; the start: ``StartTimeoutError``, an episode the runner records
as not played), one that fails or is not there a ``server_error`` / :class:`~agent_tune.errors.BackendGoneError`."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Iterator

import pytest

from agent_tune.envs import check_env, make_env
from agent_tune.envs.nemo_gym.env import NemoGymEnv, nemo_gym_tasks
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, StartTimeoutError
from agent_tune.errors import BackendGoneError
from agent_tune.testing.server_process import ServerProcess, ServerStartError, free_port, http_ready
from agent_tune.utils.typed_config import OptionError

ROOT = Path(__file__).resolve().parents[2]
NEMO_PYTHON = ROOT / ".venv-nemo-gym" / "bin" / "python"
SERVER = Path(__file__).with_name("nemo_gym_server.py")

pytestmark = pytest.mark.skipif(not NEMO_PYTHON.exists(),
                                reason=f"no {NEMO_PYTHON} (NeMo Gym's own venv): bash scripts/install_nemo_gym.sh")

GUESS_TOOLS = [
    {"type": "function", "name": "guess", "description": "Guess the number.", "strict": True,
     "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"],
                    "additionalProperties": False}},
    {"type": "function", "name": "slow", "description": "Answers late.", "strict": False,
     "parameters": {"type": "object", "properties": {}}},
    {"type": "function", "name": "broken", "description": "Always fails.", "strict": False,
     "parameters": {"type": "object", "properties": {}}},
]


def guess_row(secret: int) -> dict:
    return {"responses_create_params": {"instructions": "Find the number with the guess tool.",
                                        "input": [{"role": "user", "content": "Guess my number (1 to 10)."}],
                                        "tools": GUESS_TOOLS},
            "secret": secret}


def call(name: str, **arguments) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Both servers started on free ports (waited for at most 60 s each); stopped at the end."""
    logs = tmp_path_factory.mktemp("nemo_gym")
    with ExitStack() as stack:
        started = {}
        for kind in ("guess", "counter"):
            port = free_port()
            cmd = [str(NEMO_PYTHON), str(SERVER), kind, str(port)]
            started[kind] = (f"http://127.0.0.1:{port}",
                             stack.enter_context(ServerProcess(f"the NeMo Gym {kind} server", cmd,
                                                               logs / f"{kind}.log", cwd=ROOT, grace_s=10)))
        for url, server in started.values():
            try:
                server.wait_ready(http_ready(f"{url}/"), timeout_s=60, poll_s=0.2)
            except ServerStartError as exc:
                pytest.fail(f"did not start: {exc}")
        yield {kind: url for kind, (url, _) in started.items()}


def test_the_contract(servers) -> None:
    check_env(lambda: make_env("nemo_gym", base_url=servers["guess"]), {"row": guess_row(4)},
              valid_response=call("guess", number=2),
              malformed_response='<tool_call>\n{"name": "guess", oops\n</tool_call>')


def test_check_kwargs_asks_the_server(servers) -> None:
    NemoGymEnv.check_kwargs({"base_url": servers["guess"]})
    with pytest.raises(ValueError, match=r"no NeMo Gym server answers at http://127\.0\.0\.1:1"):
        NemoGymEnv.check_kwargs({"base_url": "http://127.0.0.1:1", "start_timeout": 2.0})


def test_the_time_limits_are_the_rules_options() -> None:
    env = NemoGymEnv(base_url="http://127.0.0.1:1")
    assert (env.call_timeout, env.start_timeout) == (DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT)
    for key, value in (("call_timeout", 0.0), ("start_timeout", -1)):
        with pytest.raises(OptionError, match=key):
            NemoGymEnv.check_kwargs({"base_url": "http://127.0.0.1:1", key: value})


async def test_a_scripted_episode_through_the_runner_is_scored_by_verify(servers, qwen_tok) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    replies = [call("guess", number=5), call("guess", number=8), call("guess", number=7), "It is 7."]
    env = NemoGymEnv(base_url=servers["guess"])
    try:
        result = await run_episode(env, ScriptedPolicy(renderer, replies), renderer, RolloutLimits(8192, 2048),
                                   task={"row": json.dumps(guess_row(7))}, debug_drift=True)
    finally:
        env.close()
    assert result.stop_reason == "done" and result.drift.ok, str(result.drift)
    assert result.reward == 1.0 and result.info["accuracy"] == 1.0 and result.info["num_calls"] == 3
    # the server's own count of the session's guesses, and of the function calls in the response it verified
    assert result.info["nemo_gym_verify"] == {"num_guesses": 3, "response_calls": 3}
    tool_texts = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert [json.loads(t)["result"] for t in tool_texts] == ["higher", "lower", "correct"]
    traj = result.trajectory
    assert sum(traj.response_mask) == traj.num_policy_tokens and 0 < traj.num_policy_tokens < len(traj)


def test_a_wrong_answer_scores_zero_and_sessions_do_not_mix(servers) -> None:
    first, second = NemoGymEnv(base_url=servers["guess"]), NemoGymEnv(base_url=servers["guess"])
    try:
        first.reset(row=guess_row(3))
        second.reset(row=guess_row(9))
        assert json.loads(first.step(call("guess", number=9)).observation.messages[0]["content"]) == \
            {"result": "lower"}  # 9 would be right in the other session
        assert json.loads(second.step(call("guess", number=9)).observation.messages[0]["content"]) == \
            {"result": "correct"}
        wrong, right = first.step("I give up."), second.step("9.")
    finally:
        first.close()
        second.close()
    assert wrong.done and wrong.reward == 0.0 and wrong.info["accuracy"] == 0.0 and wrong.info["stop_reason"] == "done"
    assert right.done and right.reward == 1.0 and right.info["accuracy"] == 1.0


def test_the_shipped_counter_server_with_its_own_rows(servers) -> None:
    """NeMo Gym's example_session_state_mgmt server, played on the first row of its own data/example.jsonl."""
    where = subprocess.run([str(NEMO_PYTHON), "-c", "import resources_servers.example_session_state_mgmt as m; "
                            "print(m.__path__[0])"], capture_output=True, text=True, timeout=60, check=True)
    tasks = nemo_gym_tasks("train", str(Path(where.stdout.strip()) / "data" / "example.jsonl"))
    assert len(tasks) >= 3 and tasks[0].id == "example:1"
    row = tasks[0].kwargs  # "add 1 then add 2 then get the count", from 3: expects 6
    assert row["initial_count"] == 3 and row["expected_count"] == 6
    env = NemoGymEnv(base_url=servers["counter"])
    try:
        obs = env.reset(**tasks[0].kwargs)
        assert obs.messages == [{"role": "user", "content": "add 1 then add 2 then get the count"}]
        assert NemoGymEnv.catalogue.row_prompt(NemoGymEnv, tasks[0], {}) == obs.messages  # a row's prompt: no server
        assert [t["function"]["name"] for t in obs.tools] == ["increment_counter", "get_counter_value"]
        env.step(call("increment_counter", count=1))
        env.step(call("increment_counter", count=2))
        count = env.step(call("get_counter_value"))
        assert json.loads(count.observation.messages[0]["content"]) == {"count": 6}
        end = env.step("The count is 6.")
    finally:
        env.close()
    assert end.done and end.reward == 1.0 and end.info["num_calls"] == 3 and end.episode.format_errors == 0


def test_bad_calls_are_counted_and_a_tool_failure_is_not_a_format_error(servers) -> None:
    env = NemoGymEnv(base_url=servers["guess"])
    try:
        env.reset(row=guess_row(2))
        unknown = env.step(call("peek"))
        assert unknown.info["format_errors"] == 1
        assert "unknown tool 'peek'" in unknown.observation.messages[0]["content"]
        schema = env.step(call("guess", number="two"))  # refused by the row's schema, before the server
        assert schema.info["format_errors"] == 1
        assert "rejected by its schema" in schema.observation.messages[0]["content"]
        broken = env.step(call("broken"))  # HTTP 500 from the tool: its text, a tool error
        assert broken.info["format_errors"] == 0 and "backend is down" in broken.observation.messages[0]["content"]
        undecodable = env.step("<tool_call>\n{not json\n</tool_call>")
        assert undecodable.info["format_errors"] == 1 and not undecodable.done
        right = env.step(call("guess", number=2))
        assert right.info["format_errors"] == 0
        end = env.step("2.")
    finally:
        env.close()
    assert end.done and end.reward == 1.0 and end.episode.format_errors == 3 and end.info["tool_errors"] == 1


def test_arguments_the_servers_model_rejects_are_a_format_error(servers) -> None:
    """A row whose schema lets a string through: the server's request model answers 422, a format error."""
    row = guess_row(2)
    row["responses_create_params"]["tools"] = [dict(GUESS_TOOLS[0], parameters={"type": "object"})]
    env = NemoGymEnv(base_url=servers["guess"])
    try:
        env.reset(row=row)
        rejected = env.step(call("guess", number="two"))
    finally:
        env.close()
    assert rejected.info["format_errors"] == 1 and not rejected.done
    assert "int_parsing" in rejected.observation.messages[0]["content"]


def test_the_step_limit_ends_the_episode_and_verify_scores_it(servers) -> None:
    env = NemoGymEnv(base_url=servers["guess"], max_steps=2)
    try:
        env.reset(row=guess_row(6))
        env.step(call("guess", number=1))
        end = env.step(call("guess", number=6))  # reaches the limit: not run
    finally:
        env.close()
    assert end.done and end.info["stop_reason"] == "step_limit" and end.reward == 0.0
    assert end.info["nemo_gym_verify"] == {"num_guesses": 1, "response_calls": 1}


def test_a_tool_that_hangs_ends_the_episode_within_call_timeout(servers) -> None:
    env = NemoGymEnv(base_url=servers["guess"], call_timeout=1.0)
    try:
        env.reset(row=guess_row(6))
        t0 = time.monotonic()
        end = env.step(call("slow"))
        elapsed = time.monotonic() - t0
    finally:
        env.close()
    assert elapsed < 5.0
    assert end.done and end.info["stop_reason"] == "timeout" and end.reward == 0.0
    assert end.info["error"] == "no answer in 1 s (nemo_gym POST /slow)" and end.episode.format_errors == 0


def test_a_verify_that_hangs_times_out_and_one_that_fails_is_a_server_error(servers) -> None:
    ends, elapsed = [], []
    for extra in ({"verify_delay": 30.0}, {"verify_fails": True}):
        env = NemoGymEnv(base_url=servers["guess"], call_timeout=1.0)
        try:
            env.reset(row={**guess_row(6), **extra})
            env.step(call("guess", number=6))
            t0 = time.monotonic()
            ends.append(env.step("6."))
            elapsed.append(time.monotonic() - t0)
        finally:
            env.close()
    late, failed = ends
    assert elapsed[0] < 5.0
    assert late.done and late.info["stop_reason"] == "timeout" and late.reward == 0.0
    assert late.info["error"] == "no answer in 1 s (nemo_gym POST /verify)" and late.info["accuracy"] == 0.0
    assert failed.done and failed.info["stop_reason"] == "server_error" and failed.reward == 0.0
    assert failed.info["error"].startswith("verify failed: /verify answered HTTP 500")


def test_a_seed_session_that_hangs_is_a_start_that_timed_out(servers) -> None:
    env = NemoGymEnv(base_url=servers["guess"], start_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(StartTimeoutError, match=r"^no answer in 1 s \(nemo_gym POST /seed_session\)$"):
        env.reset(row={**guess_row(1), "seed_delay": 30.0})
    assert time.monotonic() - t0 < 5.0
    try:  # the env starts the next episode as usual
        env.reset(row=guess_row(1))
        assert env.step("1.").info["stop_reason"] == "done"
    finally:
        env.close()


async def test_the_runner_records_a_start_that_timed_out_and_the_batch_goes_on(servers, qwen_tok) -> None:
    import asyncio

    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    slow, fast = (NemoGymEnv(base_url=servers["guess"], start_timeout=1.0) for _ in range(2))
    try:
        not_played, played = await asyncio.gather(
            run_episode(slow, ScriptedPolicy(renderer, ["1."]), renderer, RolloutLimits(4096, 1024),
                        task={"row": json.dumps({**guess_row(1), "seed_delay": 30.0})}),
            run_episode(fast, ScriptedPolicy(renderer, [call("guess", number=2), "2."]), renderer,
                        RolloutLimits(4096, 1024), task={"row": json.dumps(guess_row(2))}))
    finally:
        slow.close()
        fast.close()
    assert not_played.stop_reason == "timeout" and not_played.reward == 0.0 and not_played.num_generations == 0
    assert not_played.trajectory.num_policy_tokens == 0
    assert not_played.info["error"] == "no answer in 1 s (nemo_gym POST /seed_session)"
    assert played.stop_reason == "done" and played.reward == 1.0


def test_a_server_that_is_not_there_fails_the_reset_in_time() -> None:
    env = NemoGymEnv(base_url=f"http://127.0.0.1:{free_port()}", start_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(BackendGoneError, match="did not start an episode"):
        env.reset(row=guess_row(1))
    assert time.monotonic() - t0 < 5.0


def test_a_row_without_its_prompt_is_refused(servers) -> None:
    env = NemoGymEnv(base_url=servers["guess"])
    with pytest.raises(ValueError, match="responses_create_params"):
        env.reset(row={"secret": 1})
    bad = {"responses_create_params": {"input": [{"type": "function_call", "name": "x"}]}, "secret": 1}
    with pytest.raises(ValueError, match=r"input\[0\]"):
        env.reset(row=bad)


async def test_agent_tune_eval_plays_the_shipped_rows(servers, qwen_tok, tmp_path) -> None:
    """`agent-tune eval`'s evaluator (token mode) on NeMo Gym's own example rows against its counter server, the
    policy an OpenAI-compatible server written here that plays each row right (the last row wrong)."""
    import re

    from aiohttp import web

    from agent_tune.eval.evaluate import EvalSettings, Evaluator
    from agent_tune.eval.task_rows import catalogue_task_rows

    where = subprocess.run([str(NEMO_PYTHON), "-c", "import resources_servers.example_session_state_mgmt as m; "
                            "print(m.__path__[0])"], capture_output=True, text=True, timeout=60, check=True)
    tasks = nemo_gym_tasks("train", str(Path(where.stdout.strip()) / "data" / "example.jsonl"))[:3]

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 8192}]})

    async def completions(request):
        prompt = qwen_tok.decode((await request.json())["prompt"])
        x, y = map(int, re.findall(r"add (\d+) then add (\d+) then get the count", prompt)[-1])
        done = prompt.count("<tool_response>")
        steps = [call("increment_counter", count=x), call("increment_counter", count=y if x != 7 else y + 1),
                 call("get_counter_value"), "Done."]
        ids = qwen_tok.encode(steps[done], add_special_tokens=False) + [151645]
        return web.json_response({"choices": [{"index": 0, "text": steps[done], "token_ids": ids,
                                               "finish_reason": "stop"}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        settings = EvalSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", env="nemo_gym", template="qwen3",
                                env_kwargs={"base_url": servers["counter"]}, progress=False)
        out = await Evaluator(settings, qwen_tok, task_rows=catalogue_task_rows("nemo_gym", tasks)).run(
            [t.id for t in tasks], tmp_path / "r.jsonl")
    finally:
        await runner.cleanup()
    by_id = {r["test_id"]: r for r in out.records}
    # rows 1 and 2 played right; row 3 ("add 7 then add 8") adds 9: its own /verify says wrong
    assert [by_id[f"example:{i}"]["reward"] for i in (1, 2, 3)] == [1.0, 1.0, 0.0]
    assert all(by_id[f"example:{i}"]["stop_reason"] == "done" for i in (1, 2, 3))
