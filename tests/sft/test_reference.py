"""SFT rows from reference answers: the runner's tokens, the env's verdict, the drops counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_tune.envs import make_env
from agent_tune.envs.tasks import catalogue_rows, select_tasks
from agent_tune.eval.task_rows import TaskRow, load_task_rows
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.rollout.scripted_policy import ScriptedPolicy
from agent_tune.sft.convert import main as sft_data_main
from agent_tune.sft.reference import NO_REFERENCE, NOT_A_SUCCESS, REFERENCE_TOO_SHORT, reference_rows
from agent_tune.sft.rows import render_conversation
from agent_tune.utils.rows import write_rows
from examples.envs.calculator import CalculatorEnv

ROOT = Path(__file__).resolve().parents[2]
CALC = "examples.envs.calculator:CalculatorEnv"
LIMITS = RolloutLimits(4096, 1024)


@pytest.fixture(scope="module")
def renderer(smol_tok):
    return ChatRenderer(smol_tok, "smollm2_tools")


def calc_rows(n: int = 3) -> dict[str, TaskRow]:
    return {t.id: TaskRow(CALC, {}, dict(t.kwargs), t.category) for t in select_tasks(CALC, "train", {"size": n})}


def test_a_reference_row_is_the_runners_trajectory_token_for_token(renderer):
    rows = calc_rows(3)
    out, report = reference_rows(rows, renderer, LIMITS)
    assert report.kept == 3 and not report.dropped
    row = out[0]
    task = rows[row["test_id"]].task
    expression = task["question"][len("What is "):-1]
    value = str(task["answer"])
    replies = ['<tool_call>\n{"name": "calculator", "arguments": {"expression": "' + expression + '"}}\n</tool_call>',
               f"{expression} = {value}. The answer is {value}."]
    env = make_env(CALC)  # the same episode played by hand with the replies written out here
    result = asyncio.run(run_episode(env, ScriptedPolicy(renderer, replies), renderer, LIMITS, {}, task=task))
    traj = result.trajectory
    assert row["input_ids"] == list(traj.prompt_ids) + list(traj.response_ids)
    assert row["loss_mask"] == [0] * len(traj.prompt_ids) + list(traj.response_mask)
    assert row["accuracy"] == 1.0 and row["reward"] == 1.0 and row["source"] == "reference"
    assert sum(row["loss_mask"]) == len(renderer.encode(replies[0])) + len(renderer.encode(replies[1])) + 2
    # the tokens a render of the episode's messages gives too; only the mask differs, on the prompt's worked
    # examples (assistant turns the policy never wrote): why the row keeps its own tokens and mask
    ids, mask = render_conversation(renderer, row["messages"], row["tools"])
    assert ids == row["input_ids"] and mask != row["loss_mask"]
    assert mask[len(traj.prompt_ids):] == row["loss_mask"][len(traj.prompt_ids):]


def test_failing_references_are_dropped_and_counted(renderer):
    rows = calc_rows(1)
    rows["odd"] = TaskRow(CALC, {}, {"question": "Add up my receipts.", "answer": 3}, "arithmetic")  # no reference
    rows["irrelevance_0"] = TaskRow("toolcall", {}, {"test_id": "irrelevance_0"}, "irrelevance")  # no call to write
    rows["simple_python_0"] = TaskRow("toolcall", {}, {"test_id": "simple_python_0"}, "simple_python")
    out, report = reference_rows(rows, renderer, LIMITS)
    assert [r["test_id"] for r in out] == [next(iter(rows)), "simple_python_0"]
    assert report.dropped == {"odd": NO_REFERENCE, "irrelevance_0": NO_REFERENCE}
    # a reference longer than the run's response budget is cut there, and the env scores the cut answer 0
    long_call = {"simple_python_123": TaskRow("toolcall", {}, {"test_id": "simple_python_123"}, "simple_python")}
    out, report = reference_rows(long_call, renderer, RolloutLimits(4096, 40))
    assert not out and report.dropped == {"simple_python_123": NOT_A_SUCCESS}
    out, report = reference_rows(long_call, renderer, LIMITS)
    assert report.kept == 1 and out[0]["accuracy"] == 1.0  # BFCL's AST verdict on the first accepted values
    report.dropped.update({"a": NOT_A_SUCCESS, "b": NO_REFERENCE, "c": NO_REFERENCE})
    assert report.counts() == {NOT_A_SUCCESS: 1, NO_REFERENCE: 2}
    assert report.summary() == "1 reference rows kept, 3 dropped (2 no reference, 1 not a success)"


class CallOnlyCalculator(CalculatorEnv):
    """The calculator whose reference stops after the call (no answer)."""

    def reference_replies(self):
        return super().reference_replies()[:1]


def test_an_episode_longer_than_its_reference_is_dropped(renderer):
    """A reference of one call and no answer: the env asks for a second generation the reference lacks."""
    task = dict(next(iter(calc_rows(1).values())).task)
    rows = {"a": TaskRow("tests.sft.test_reference:CallOnlyCalculator", {}, task, "arithmetic")}
    out, report = reference_rows(rows, renderer, LIMITS)
    assert not out and report.dropped == {"a": REFERENCE_TOO_SHORT}


def test_toolcall_reference_is_the_ground_truth_call_and_scores_right(renderer, tmp_path):
    """The toolcall env's arith tasks from a rows file through the CLI: one generation with the ground-truth call."""
    rows = catalogue_rows("toolcall", "train", {"source": "arith", "n": 4, "val_size": 1})
    write_rows(tmp_path / "data", "train", rows)
    tok = tmp_path / "tok"
    renderer.tokenizer.save_pretrained(tok)
    out = tmp_path / "ref.jsonl"
    assert sft_data_main(["--format", "reference", str(tmp_path / "data" / "train.parquet"), str(out), "--tokenizer",
                          str(tok), "--template", "smollm2_tools", "--env-kwargs", '{"reward_scale": "unit"}']) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 4 and all(r["accuracy"] == 1.0 and r["reward"] == 1.0 for r in written)
    task = load_task_rows(tmp_path / "data" / "train.parquet")[written[0]["test_id"]].task
    [truth] = json.loads(task["ground_truth"])
    assistant = [m["content"] for m in written[0]["messages"] if m["role"] == "assistant"][-1]
    assert json.loads(assistant.split("\n")[1]) == {"name": truth["name"], "arguments": truth["arguments"]}


def test_mcp_reference_is_the_tasks_solution_played_on_the_server(renderer):
    """The mcp catalogue's ``solution`` task field: its call, then its answer, scored 1 by the verifier."""
    tasks = select_tasks("mcp", "train", {"path": str(ROOT / "examples" / "mcp" / "tasks.jsonl"), "shots": 1},
                         limit=1, categories=["read"])
    assert tasks[0].kwargs["solution"]["answer"].startswith("It says:")
    server = {"command": ["python", "-m", "examples.mcp.notes_server"], "cwd": str(ROOT)}
    rows = {t.id: TaskRow("mcp", {"server": server, "verifier": "examples.mcp.verify:verify"}, dict(t.kwargs),
                          t.category) for t in tasks}
    out, report = reference_rows(rows, renderer, LIMITS)
    assert report.kept == 1, report.dropped
    texts = [m["content"] for m in out[0]["messages"] if m["role"] == "assistant"][-2:]
    solution = tasks[0].kwargs["solution"]
    assert texts[1] == solution["answer"] and f'"name": "{solution["calls"][0]["name"]}"' in texts[0]
    # the solution is the reference, never shown: the prompt is the row's own (shots and question only)
    prompt = out[0]["messages"][: out[0]["messages"].index(next(m for m in out[0]["messages"]
                                                                if m["content"] == texts[0]))]
    assert solution["answer"] not in json.dumps(prompt[-1])
