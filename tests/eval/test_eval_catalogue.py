"""``agent-tune eval --env NAME``: any env with a task catalogue is evaluated from its tasks, with nothing but its
one file (the calculator example), against the scripted server."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.cli import run_main
from agent_tune.eval.store import read_results
from agent_tune.testing.scripted_server import ScriptedServer
from examples.envs.calculator import CalculatorEnv, format_number, safe_eval

ENV = "examples.envs.calculator:CalculatorEnv"
TASKS = CalculatorEnv.catalogue.tasks("test", size=4)
_QUESTION = re.compile(r"<\|im_start\|>user\n(What is [^<]*\?)<\|im_end\|>")


def last_question(text: str) -> tuple[str, int, int]:
    """(the episode's question: the last user question of the prompt, turn 0, assistant segments after it)."""
    matches = list(_QUESTION.finditer(text))
    return matches[-1].group(1), 0, text[matches[-1].end():].count("<|im_start|>assistant\n") - 1


def calculator_script(wrong: set[str], tasks=TASKS):
    """Step 0: a calculator call with the question's expression; step 1: the answer (off by one for ``wrong``);
    ``tasks``: the calculator tasks the test ids name."""
    def script(test_id: str, turn: int, step: int) -> str:
        question = next(t.kwargs["question"] for t in tasks if t.id == test_id)
        expression = question[len("What is "):-1]
        if step == 0:
            call = {"name": "calculator", "arguments": {"expression": expression}}
            return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        value = safe_eval(expression) + (1 if test_id in wrong else 0)
        return f"The answer is {format_number(value)}."
    return script


@pytest.fixture()
def server_questions() -> dict[str, str]:
    return {t.kwargs["question"]: t.id for t in TASKS}


async def test_eval_env_plays_the_catalogue(qwen_tok, tmp_path, server_questions) -> None:
    wrong = {TASKS[1].id}
    async with ScriptedServer(qwen_tok, calculator_script(wrong), [], questions=server_questions,
                              locate=last_question) as srv:
        argv = ["--base-url", srv.base_url, "--model", "scripted", "--template", "qwen3", "--no-progress",
                "--env", ENV, "--split", "test", "--options", '{"size": 4}', "--output", str(tmp_path / "r.jsonl")]
        assert await asyncio.to_thread(run_main, argv, qwen_tok) == 0
    meta, records = read_results(tmp_path / "r.jsonl")
    assert meta["env"] == ENV
    by_id = {r["test_id"]: r for r in records}
    assert set(by_id) == {t.id for t in TASKS}
    for task in TASKS:
        r = by_id[task.id]
        assert r["accuracy"] == (0.0 if task.id in wrong else 1.0), r
        assert r["num_calls"] == 1 and r["format_errors"] == 0 and r["num_steps"] == 2
        assert r["category"] == "arithmetic"
    report = json.loads((tmp_path / "r.report.json").read_text())
    assert report  # the report was written
    assert not (tmp_path / "r_bfcl").exists()  # not BFCL entries: no BFCL result files


async def test_record_holds_only_what_the_policy_generated(qwen_tok, tmp_path, server_questions) -> None:
    """The calculator's prompt carries worked examples (assistant and tool turns before the question): the
    record's ``responses`` are the policy's two generations only, none of the example turns."""
    from examples.envs.calculator import EXAMPLE

    async with ScriptedServer(qwen_tok, calculator_script(set()), [], questions=server_questions,
                              locate=last_question) as srv:
        argv = ["--base-url", srv.base_url, "--model", "scripted", "--template", "qwen3", "--no-progress",
                "--env", ENV, "--split", "test", "--options", '{"size": 4}', "--limit", "1",
                "--output", str(tmp_path / "r.jsonl")]
        assert await asyncio.to_thread(run_main, argv, qwen_tok) == 0
    (record,) = read_results(tmp_path / "r.jsonl")[1]
    task = next(t for t in TASKS if t.id == record["test_id"])
    script = calculator_script(set())
    assert record["responses"] == [[script(task.id, 0, 0), script(task.id, 0, 1)]]
    examples = {m["content"] for m in EXAMPLE if m["role"] == "assistant"}
    assert not examples & {text for turn in record["responses"] for text in turn}
    # the record is also the episode record training keeps: the conversation, its prompt (examples included) marked
    prompt, after = record["messages"][:record["prompt_messages"]], record["messages"][record["prompt_messages"]:]
    assert examples <= {m["content"] for m in prompt if m["role"] == "assistant"}
    assert [m["content"] for m in after if m["role"] == "assistant"] == record["responses"][0]
    assert [s["who"] for s in record["segments"]] == ["policy", "env", "policy"]
    assert record["tools"] == ["calculator"] and record["metrics"]["acc"] == record["accuracy"] == 1.0


@pytest.mark.parametrize("argv, message", [
    (["--split", "val"], "has no split 'val'"),
    (["--options", '{"sise": 4}'], "sise"),
])
def test_eval_env_bad_selection_fails_naming_it(argv, message, capsys) -> None:
    base = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--env", ENV]
    assert eval_main([*base, *argv]) == 1
    assert message in capsys.readouterr().err


def test_options_are_the_catalogues_own(capsys) -> None:
    assert eval_main(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--env", "bfcl",
                      "--options", '{"size": 4}']) == 1
    assert "tasks() options" in capsys.readouterr().err  # bfcl's catalogue takes seed and shots, not size


def test_an_mcp_server_that_never_starts_fails_the_eval_at_start_up(tmp_path, capsys) -> None:
    """Before any request to the model server (here: none listening), the env's start-up check starts the MCP
    server and fails naming its command and stderr."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    faulty = repo / "tests" / "envs" / "mcp_faulty_server.py"
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--env", "mcp", "--split", "test",
            "--options", json.dumps({"path": str(repo / "examples" / "mcp" / "tasks.jsonl")}), "--limit", "1",
            "--env-kwargs", json.dumps({"server": {"command": ["python", str(faulty), "--no-start"]}}),
            "--output", str(tmp_path / "x.jsonl"), "--no-progress"]
    assert eval_main(argv) == 1
    err = capsys.readouterr().err
    assert "--no-start` did not start" in err and "refusing to start (missing API key)" in err
