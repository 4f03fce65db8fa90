"""The mcp env against real MCP servers (the official SDK's, started by the test): the contract, the notes example's
tasks and verifier, each bad-input outcome, the session pool, streamable HTTP, and batched steps."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_tune.envs import check_env, make_env
from agent_tune.envs.base import BaseToolEnv
from agent_tune.envs.mcp.connection import MCPConnection, ServerSpec
from agent_tune.envs.mcp.env import MCPToolEnv
from agent_tune.envs.tasks import catalogue_rows, row_task, select_tasks
from agent_tune.testing.server_process import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
TASKS = str(ROOT / "examples" / "mcp" / "tasks.jsonl")
NOTES = {"command": ["python", "-m", "examples.mcp.notes_server"], "cwd": str(ROOT)}
FAULTY = {"command": ["python", str(Path(__file__).with_name("mcp_faulty_server.py"))]}
VERIFIER = "examples.mcp.verify:verify"


@pytest.fixture(autouse=True)
def _no_server_left_behind():
    """Each test's pooled sessions (``reset_tool``) are stopped with it: no server process outlives its test."""
    yield
    MCPToolEnv.close_pool()
    import psutil

    servers = [p for p in psutil.Process().children(recursive=True) if "notes_server" in " ".join(p.cmdline())
               or "mcp_faulty_server" in " ".join(p.cmdline())]
    assert servers == [], servers


def call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def gold(task: dict) -> list[str]:
    """The responses that solve a notes task."""
    kind, title = task["kind"], task["title"]
    if kind == "add":
        return [call("add_note", title=title, text=task["text"]), "Done."]
    if kind == "delete":
        return [call("delete_note", title=title), "Done."]
    if kind == "append":
        before = next(c["arguments"]["text"] for c in task["setup"] if c["arguments"]["title"] == title)
        return [call("append_to_note", title=title, text=task["text"][len(before) + 1:]), "Done."]
    return [call("read_note", title=title), f"It says: {task['text']}."]


def play(env: BaseToolEnv, task: dict, responses: list[str]):
    env.reset(**task)
    for text in responses:
        result = env.step(text)
        if result.done:
            return result
    return env.finalize()


def test_contract() -> None:
    task = {"question": "Save a note titled 'a' with the text 'b'.", "kind": "add", "title": "a", "text": "b"}
    check_env(lambda: make_env("mcp", server=NOTES, verifier=VERIFIER), task, call("add_note", title="a", text="b"),
              "<tool_call>\n{not json\n</tool_call>")


def test_every_example_task_scores_1_played_right_and_0_with_a_wrong_value() -> None:
    """All 50 tasks on one reused server (reset_tool): the verifier agrees with the gold plays and refuses a
    perturbed one (another text, another title, an answer without the note's text)."""
    tasks = [t.kwargs for split in ("train", "test") for t in select_tasks("mcp", split, {"path": TASKS})]
    assert len(tasks) == 50 and {t["kind"] for t in tasks} == {"add", "delete", "append", "read"}
    env = make_env("mcp", server=NOTES, verifier=VERIFIER, reset_tool="reset_notes")
    try:
        for task in tasks:
            right = play(env, task, gold(task))
            assert (right.reward, right.info["accuracy"]) == (1.0, 1.0), (task, right.info)
            wrong = gold({**task, "text": "something else", "title": task["title"]}) if task["kind"] != "delete" \
                else [call("delete_note", title="nope"), "Done."]
            if task["kind"] == "append":
                wrong = [call("append_to_note", title=task["title"], text="something else"), "Done."]
            assert play(env, task, wrong).reward == 0.0, task
    finally:
        env.close()


def test_catalogue_rows_and_strict_reset(tmp_path) -> None:
    tasks = select_tasks("mcp", "test", {"path": TASKS})
    assert len(tasks) == 10 and all(t.id.startswith("notes-") for t in tasks)
    [row] = catalogue_rows("mcp", "test", {"path": TASKS}, {"server": NOTES}, tasks[:1])
    assert row["prompt"][-1] == {"role": "user", "content": tasks[0].kwargs["question"]}
    assert row["data_source"] == f"mcp/{tasks[0].category}" and row_task(row["extra_info"]) == tasks[0].kwargs
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match="line 1: a task needs a `question`"):
        select_tasks("mcp", "train", {"path": str(bad)})
    with pytest.raises(TypeError, match="question"):
        make_env("mcp", server=NOTES).reset(title="a")


def test_solutions_are_the_gold_plays_with_the_servers_own_results() -> None:
    """Every task's ``solution`` (what its shots show) is its gold play, and replaying it returns the results the
    file records and scores 1: a worked example never shows a result the server would not give."""
    env = make_env("mcp", server=NOTES, verifier=VERIFIER, reset_tool="reset_notes")
    try:
        for line in Path(TASKS).read_text().splitlines():
            record = json.loads(line)
            sol = record["solution"]
            responses = [call(c["name"], **c["arguments"]) for c in sol["calls"]] + [sol["answer"]]
            task = {k: v for k, v in record.items() if k not in ("id", "split", "category", "solution")}
            assert responses[:-1] == gold(task)[:-1], record["id"]
            env.reset(**task)
            first = env.step(responses[0])
            assert [m["content"] for m in first.observation.messages] == sol["results"], record["id"]
            assert env.step(responses[1]).reward == 1.0, record["id"]
    finally:
        env.close()


def test_shots_are_other_training_tasks_played_right_and_the_row_prompt_is_the_reset_prompt() -> None:
    train = select_tasks("mcp", "train", {"path": TASKS, "shots": 3, "seed": 1})
    test = select_tasks("mcp", "test", {"path": TASKS, "shots": 3, "seed": 1})
    train_questions = {t.kwargs["question"]: t.id for t in select_tasks("mcp", "train", {"path": TASKS})}
    for task in train + test:
        shots = task.kwargs["shots"]
        assert len(shots) == 3 and task.kwargs["solution"]["calls"]  # the reference, a task field reset keeps apart
        assert all(s["question"] in train_questions for s in shots)  # never a test task's answer
        assert task.kwargs["question"] not in [s["question"] for s in shots] or task in test
        assert all(len(s["results"]) == len(s["calls"]) for s in shots)
    again = select_tasks("mcp", "train", {"path": TASKS, "shots": 3, "seed": 1})
    assert [t.kwargs for t in again] == [t.kwargs for t in train]
    assert [t.kwargs["shots"] for t in select_tasks("mcp", "train", {"path": TASKS, "shots": 3, "seed": 2})] != \
        [t.kwargs["shots"] for t in train]
    [row] = catalogue_rows("mcp", "test", {"path": TASKS, "shots": 3, "seed": 1}, {"server": NOTES}, test[:1])
    env = make_env("mcp", server=NOTES, verifier=VERIFIER)
    try:
        obs = env.reset(**row_task(row["extra_info"]))
        assert [dict(m) for m in row["prompt"]] == obs.messages
        roles = [m["role"] for m in obs.messages]
        assert roles == ["system"] + ["user", "assistant", "tool", "assistant"] * 3 + ["user"]
        assert obs.messages[2]["content"] == call(test[0].kwargs["shots"][0]["calls"][0]["name"],
                                                 **test[0].kwargs["shots"][0]["calls"][0]["arguments"])
        assert env.transcript[-1] == {"role": "user", "content": test[0].kwargs["question"]}
    finally:
        env.close()


def test_a_malformed_shot_fails_at_reset_naming_it() -> None:
    env = make_env("mcp", server=NOTES)
    with pytest.raises(ValueError, match="shot 0 is not"):
        env.reset(question="q", shots=[{"question": "x", "calls": [{"arguments": {}}]}])
    with pytest.raises(ValueError, match="1 call\\(s\\) but 2 result\\(s\\)"):
        env.reset(question="q", shots=[{"question": "x", "calls": [{"name": "list_notes"}], "results": ["a", "b"]}])
    assert env.connection is None  # refused before a server started


def test_bad_calls_are_counted_observations() -> None:
    env = make_env("mcp", server=NOTES, verifier=VERIFIER)
    try:
        env.reset(question="Read my note.", kind="read", title="a", text="b")
        step = env.step(call("no_such_tool") + call("read_note", title=3) + "<tool_call>\n{oops\n</tool_call>")
        texts = [m["content"] for m in step.observation.messages]
        assert step.info["format_errors"] == 3 and not step.done
        assert "unknown tool 'no_such_tool'" in texts[0] and "rejected by its schema at title" in texts[1]
        failed = env.step(call("read_note", title="missing"))  # a tool's own failure: not a format error
        assert failed.info["format_errors"] == 0 and "There is no note titled 'missing'" in \
            failed.observation.messages[0]["content"]
        end = env.step("I could not find it.")
        assert end.done and end.reward == 0.0 and end.info["tool_errors"] == 1 and end.episode.format_errors == 3
    finally:
        env.close()


def test_a_server_that_crashes_or_hangs_ends_the_episode_with_its_reason() -> None:
    env = make_env("mcp", server=FAULTY, call_timeout=2.0)
    try:
        env.reset(question="Echo, then crash.")
        assert env.step(call("echo", text="hi")).observation.messages[0]["content"] == "hi"
        t0 = time.monotonic()
        crashed = env.step(call("crash"))
        assert crashed.done and crashed.reward == 0.0 and crashed.info["stop_reason"] == "server_error"
        assert "the environment server stopped" in crashed.observation.messages[0]["content"]  # the tier's words
        env.reset(question="Hang.")
        hung = env.step(call("hang"))
        assert hung.done and hung.info["error"] == "no answer in 2 s (mcp tool hang)"
        assert hung.info["stop_reason"] == "timeout" and hung.episode.format_errors == 0
        assert time.monotonic() - t0 < 2 * 2.0 + 8.0  # bounded by the call timeout, not the tool's 600 s
    finally:
        env.close()


def test_a_server_that_never_starts_fails_at_start_up_naming_command_and_stderr() -> None:
    cls = type(make_env("mcp", server=NOTES))
    server = {"command": [*FAULTY["command"], "--no-start"]}
    with pytest.raises(ValueError, match=r"(?s)mcp_faulty_server.py --no-start` did not start.*missing API key"):
        cls.check_kwargs({"server": server})
    with pytest.raises(ValueError, match="reset_tool 'nope' is not a tool"):
        cls.check_kwargs({"server": NOTES, "reset_tool": "nope"})
    with pytest.raises(ValueError, match="exactly one of `command`"):
        cls.check_kwargs({"server": {"command": ["x"], "url": "http://127.0.0.1:1/mcp"}})
    with pytest.raises(ValueError, match="verifier 'examples.mcp.verify:nope' cannot be imported"):
        cls.check_kwargs({"server": NOTES, "verifier": "examples.mcp.verify:nope"})


def test_a_verifier_that_fails_is_recorded_and_scores_0(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken_verifier.py").write_text("def verify(task, transcript, session):\n    raise KeyError('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_env("mcp", server=NOTES, verifier="broken_verifier:verify")
    try:
        end = play(env, {"question": "Say hi."}, ["Hi."])
        assert end.reward == 0.0 and end.info["verifier_error"] == "KeyError: 'x'"
    finally:
        env.close()


def test_the_pool_reuses_a_reset_session_and_a_fresh_env_shares_nothing() -> None:
    pooled = make_env("mcp", server=NOTES, reset_tool="reset_notes")
    try:
        pooled.reset(question="q")
        first = pooled.connection
        pooled.step(call("add_note", title="kept", text="x"))
        pooled.close()
        pooled.reset(question="q")
        assert pooled.connection is first  # the same server process, reset
        assert "kept" not in pooled.step(call("list_notes")).observation.messages[0]["content"]
    finally:
        pooled.close()


def test_batched_steps_run_each_envs_calls_on_its_own_server() -> None:
    envs = [make_env("mcp", server=NOTES, verifier=VERIFIER) for _ in range(3)]
    try:
        for i, env in enumerate(envs):
            env.reset(question=f"Save note n{i}.", kind="add", title=f"n{i}", text=str(i))
        steps = type(envs[0]).batch_step(envs, [call("add_note", title=f"n{i}", text=str(i)) for i in range(3)])
        assert all(not s.done and s.info["format_errors"] == 0 for s in steps)
        ends = type(envs[0]).batch_step(envs, ["Done."] * 3)
        assert [e.reward for e in ends] == [1.0, 1.0, 1.0]
        listed = [env.connection.call("list_notes", {}).structured for env in envs]  # type: ignore[union-attr]
        assert listed == [{"result": [f"n{i}"]} for i in range(3)]  # nothing shared between the servers
    finally:
        for env in envs:
            env.close()


def test_streamable_http_server(tmp_path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    def ready() -> bool:
        try:
            MCPConnection(ServerSpec.parse({"url": url}), start_timeout=5).open().close()
        except Exception:  # noqa: BLE001 - not serving yet, whatever the client raises
            return False
        return True

    cmd = [sys.executable, "-m", "examples.mcp.notes_server", "--http", str(port)]
    with ServerProcess("the notes MCP server", cmd, tmp_path / "notes_server.log", cwd=ROOT, grace_s=10) as server:
        server.wait_ready(ready, timeout_s=30, poll_s=0.3)
        env = make_env("mcp", server={"url": url}, verifier=VERIFIER)
        try:
            task = {"question": "Save a note titled 'web' with the text 'ok'.", "kind": "add", "title": "web",
                    "text": "ok"}
            assert play(env, task, gold(task)).reward == 1.0
        finally:
            env.close()


async def test_an_episode_is_token_exact_through_the_runner(qwen_tok) -> None:
    """The runner's drift check (the whole conversation re-rendered against the trajectory) finds no drift, and
    tokens, mask and log-probs stay aligned (the runner asserts that on every append)."""
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")  # (qwen3's adds an empty think block on re-render)
    setup = [{"name": "add_note", "arguments": {"title": "gym", "text": "run 5 km"}}]
    task = {"question": "Add 'today' to the end of my note 'gym'.", "kind": "append", "title": "gym",
            "text": "run 5 km today", "setup": setup}
    replies = [call("read_note", title="gym"), call("append_to_note", title="gym", text="today"), "Done."]
    policy = ScriptedPolicy(renderer, replies)
    env = make_env("mcp", server=NOTES, verifier=VERIFIER)
    try:
        result = await run_episode(env, policy, renderer, RolloutLimits(8192, 2048), task=task, debug_drift=True)
    finally:
        env.close()
    traj = result.trajectory
    assert result.reward == 1.0 and result.stop_reason == "done" and result.drift.ok, str(result.drift)
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs)
    assert sum(traj.response_mask) == traj.num_policy_tokens and 0 < traj.num_policy_tokens < len(traj)


def test_a_raising_tool_is_a_tool_error_and_tool_error_keeps_its_message() -> None:
    """A tool that raises is answered with is_error (counted in tool_errors, not a format error): a ToolError's
    message reaches the policy, any other exception's is hidden by the MCP SDK."""
    env = make_env("mcp", server=FAULTY)
    try:
        env.reset(question="Fail twice.")
        told = env.step(call("fail")).observation.messages[0]["content"]
        hidden = env.step(call("broken"))
        assert "this tool always fails" in told
        content = hidden.observation.messages[0]["content"]
        assert "Error executing tool broken" in content and "internal detail" not in content
        end = env.step("Both failed.")
        assert end.info["tool_errors"] == 2 and end.episode.format_errors == 0 and end.info["stop_reason"] == "done"
    finally:
        env.close()


def test_a_server_that_does_not_start_in_time_is_a_start_timeout() -> None:
    """The time-limit rule: a start with no answer within start_timeout raises StartTimeoutError (the runner counts
    it as an episode not played); a verifier that does not return within call_timeout ends the episode timed out."""
    from agent_tune.envs.time_limits import StartTimeoutError

    slow = {"command": [*FAULTY["command"], "--slow-start"]}
    t0 = time.monotonic()
    with pytest.raises(StartTimeoutError, match=r"no answer in 1 s \(MCP server `.*--slow-start` start\)"):
        make_env("mcp", server=slow, start_timeout=1.0).reset(question="Anything.")
    assert time.monotonic() - t0 < 1.0 + 5.0 + 5.0
    env = make_env("mcp", server=FAULTY, verifier=f"{__name__}:slow_verifier", call_timeout=1.0)
    try:
        env.reset(question="Echo.")
        end = env.step("Done.")
        assert end.info["stop_reason"] == "timeout" and end.info["error"] == "no answer in 1 s (mcp verifier)"
        assert end.reward == 0.0
    finally:
        env.close()


def slow_verifier(task: dict, transcript: list, session: Any) -> float:
    """A verifier that takes longer than the test's call_timeout."""
    time.sleep(3)
    return 1.0
