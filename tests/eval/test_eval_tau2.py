"""`agent-tune eval --env tau2`: per-domain pass@k and tau2's pass^k, a resumable results file, tau2's results
format re-scored by tau2's own code, and the user's start-up health check.

The policy is a scripted OpenAI server (chat mode) that replays airline task 2's gold actions (on odd seeds
without its one write, so that sample fails); the user is a second scripted OpenAI server speaking once, then
``###STOP###``. Airline task 2 then succeeds on sample 0 only; task 8 (a booking: the same actions do not
solve it) never.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tune.envs.tau2 import loader
from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.store import read_results
from tests.envs.tau2_helpers import final_text, gold_actions
from tests.users.fake_openai import FakeOpenAI, completion, free_port_url

IDS = ["tau2/airline/2", "tau2/airline/8"]
TASK = loader.load_task("airline", "2")
ACTIONS = gold_actions(TASK)


def policy_reply(body: dict) -> dict:
    """Gold action i at the policy's i-th turn (the greeting is turn 0's predecessor), then a closing text."""
    played = sum(1 for m in body["messages"] if m["role"] == "assistant") - 1  # minus tau2's greeting
    actions = ACTIONS if body.get("seed", 0) % 2 == 0 else ACTIONS[:-1]  # odd seed: no send_certificate
    if played < len(actions):
        name, arguments = actions[played]
        return completion(tool_calls=[{"name": name, "arguments": arguments}])
    return completion(final_text(TASK))


def user_reply(body: dict) -> dict:
    """The user (roles flipped: the agent speaks as `user`): asks once, stops after the agent's next text."""
    said = sum(1 for m in body["messages"] if m["role"] == "user")
    return completion("Hi, I need help with my account." if said <= 1 else "Thanks. ###STOP###")


def _argv(policy: FakeOpenAI, user_url: str, out: Path, *extra: str) -> list[str]:
    return ["--base-url", policy.base_url, "--model", policy.model, "--mode", "chat", "--env", "tau2",
            "--ids", *IDS, "--n", "2", "--seed", "0", "--temperature", "1.0", "--user-base-url", user_url,
            "--user-model", "user-sim", "--output", str(out), "--no-progress", "--concurrency", "2", *extra]


@pytest.fixture
def servers(tmp_path):

    with FakeOpenAI("policy", default=policy_reply) as policy, FakeOpenAI("user-sim", default=user_reply) as user:
        yield policy, user


def test_eval_tau2_reports_pass_k_and_tau2s_pass_hat_k(servers, tmp_path, capsys, qwen_tok_dir) -> None:
    policy, user = servers
    out = tmp_path / "tau2.jsonl"
    assert eval_main(_argv(policy, user.base_url, out, "--tokenizer", str(qwen_tok_dir))) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    meta, records = read_results(out)
    assert meta["env"] == "tau2" and meta["env_kwargs"]["user"]["model"] == "user-sim"
    got = {(r["test_id"], r["sample"]): r["accuracy"] for r in records}
    assert got == {("tau2/airline/2", 0): 1.0, ("tau2/airline/2", 1): 0.0, ("tau2/airline/8", 0): 0.0,
                   ("tau2/airline/8", 1): 0.0}
    assert all(r["category"] == "airline" and r["termination_reason"] == "user_stop" for r in records)
    report = json.loads((tmp_path / "tau2.report.json").read_text())
    airline = report["categories"]["airline"]
    assert airline["accuracy"] == 0.25 and airline["pass@1"] == 0.25 and airline["pass@2"] == 0.5
    # tau2's own metric code: pass^1 = mean success, pass^2 = tasks solved by both trials
    assert report["tau2"]["airline"] == {"avg_reward": 0.25, "pass^1": 0.25, "pass^2": 0.0}
    assert "pass^2 0.0" in printed and "airline" in printed

    # tau2's results format, loaded and re-scored by tau2's own code
    from tau2.data_model.simulation import Results
    from tau2.scripts.evaluate_trajectories import compute_simulation_rewards

    results = Results.load(tmp_path / "tau2_results" / "airline.json")
    assert results.info.num_trials == 2 and results.info.user_info.llm == "user-sim"
    assert sorted(t.id for t in results.tasks) == ["2", "8"] and len(results.simulations) == 4
    rescored = compute_simulation_rewards(results)
    ours = {(r["tau2_simulation"]["task_id"], r["sample"]): r["accuracy"] for r in records}
    assert {(s.task_id, s.trial): s.reward_info.reward for s in rescored.simulations} == ours

    # resumable: a second run plays nothing; after a "kill" that lost the last two episodes (and left half a
    # line), a rerun plays only those
    assert eval_main(_argv(policy, user.base_url, out, "--tokenizer", str(qwen_tok_dir))) == 0
    assert "ran 0 episodes, 4 already" in capsys.readouterr().out
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-2]) + lines[-2][:40])
    asked = len(user.requests)
    assert eval_main(_argv(policy, user.base_url, out, "--tokenizer", str(qwen_tok_dir))) == 0
    assert "ran 2 episodes, 2 already" in capsys.readouterr().out and len(user.requests) > asked
    assert {(r["test_id"], r["sample"]): r["accuracy"] for r in read_results(out)[1]} == got

    # `agent-tune eval report` recomputes tau2's metrics from the file
    assert eval_main(["report", str(out), "--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["tau2"]["airline"] == report["tau2"]["airline"]


def test_eval_tau2_user_server_down_fails_at_start(servers, tmp_path, capsys, qwen_tok_dir) -> None:
    policy, _ = servers
    down = free_port_url()
    out = tmp_path / "down.jsonl"
    assert eval_main(_argv(policy, down, out, "--tokenizer", str(qwen_tok_dir))) == 1
    err = capsys.readouterr().err
    assert "user simulator at" in err and down in err
    assert not read_results(out)[1] if out.exists() else True
    assert not policy.requests  # no episode started


def test_eval_tau2_judge_down_fails_at_start(servers, tmp_path, capsys, qwen_tok_dir) -> None:
    policy, user = servers
    down = free_port_url()
    argv = _argv(policy, user.base_url, tmp_path / "j.jsonl", "--tokenizer", str(qwen_tok_dir),
                 "--judge-base-url", down, "--judge-model", "judge")
    assert eval_main(argv) == 1
    err = capsys.readouterr().err
    assert "NL-assertion judge at" in err and down in err
    assert not policy.requests
    assert eval_main([*argv[:-4], "--judge-model", "judge"]) == 1
    assert "needs both --judge-base-url and --judge-model" in capsys.readouterr().err


def test_eval_tau2_needs_a_user(tmp_path, capsys) -> None:
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--env", "tau2", "--categories", "airline",
            "--split", "test", "--output", str(tmp_path / "x.jsonl")]
    assert eval_main(argv) == 1
    assert "`user` is required" in capsys.readouterr().err


def test_tau2_ids_and_splits() -> None:
    from agent_tune.envs.tasks import select_tasks

    tasks = select_tasks("tau2", "test", categories=["airline", "retail"])
    assert len(tasks) == 60 and tasks[0].id == "tau2/airline/2" and tasks[0].category == "airline"
    assert len(select_tasks("tau2", "test", categories=["airline", "retail"], limit=3)) == 6
    assert [t.id for t in select_tasks("tau2")][:1] == ["tau2/airline/2"]  # the default: tau2's test split
    [retail] = select_tasks("tau2", ids=["tau2/retail/5"])
    assert retail.kwargs == {"domain": "retail", "task_id": "5"} and retail.category == "retail"
    with pytest.raises(ValueError, match="no task 'tau2/bank/1'"):
        select_tasks("tau2", ids=["tau2/bank/1"])
    with pytest.raises(ValueError, match="no split 'val'"):
        select_tasks("tau2", "val")
    with pytest.raises(ValueError, match="category 'bank' is not one"):
        select_tasks("tau2", "test", categories=["bank"])


def pipeline_reply(body: dict) -> dict:
    """The pipeline protocol's policy: one <tool_call> action per turn (no greeting in its conversation); on even
    seeds it first slips once (no action), so the eval's retry at temperature 0 plays the rest."""
    from tests.envs.test_tau2_pipeline import block, respond

    said = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
    even = body.get("seed", 0) % 2 == 0
    if even and not said:
        return completion("Let me check that for you.")
    actions = ACTIONS if even else ACTIONS[:-1]
    played = sum(1 for c in said if c.startswith("<tool_call>"))
    return completion(block(*actions[played]) if played < len(actions) else respond(final_text(TASK)))


def test_eval_tau2_pipeline_protocol_writes_first_and_any_of_k(tmp_path, capsys, qwen_tok_dir) -> None:
    """``--env-kwargs '{"protocol": "pipeline"}'``: the retry after the slip is sampled at temperature 0, the rest at
    the run's; ``--passk-json`` holds pass@1 (the first sample) and pass@2 (any of 2) per domain."""
    from agent_tune.envs.tau2.pipeline import FORMAT_ERROR

    with FakeOpenAI("policy", default=pipeline_reply) as policy, FakeOpenAI("user-sim", default=user_reply) as user:
        out = tmp_path / "pipe.jsonl"
        argv = _argv(policy, user.base_url, out, "--tokenizer", str(qwen_tok_dir), "--env-kwargs",
                     '{"protocol": "pipeline"}', "--passk-json", str(tmp_path / "pipe.passk.json"))
        assert eval_main(argv) == 0, capsys.readouterr().err
        retries = [r for r in policy.requests if r["messages"][-1]["content"] == FORMAT_ERROR]
        others = [r for r in policy.requests if r not in retries]
    assert len(retries) == 2 and all(r["temperature"] == 0.0 for r in retries)  # sample 0 of each task
    assert others and all(r["temperature"] == 1.0 for r in others)
    assert all(r["messages"][0]["content"].startswith("You are the ") for r in policy.requests)
    meta, records = read_results(out)
    assert meta["env_kwargs"]["protocol"] == "pipeline"
    got = {(r["test_id"], r["sample"]): (r["accuracy"], r["format_errors"]) for r in records}
    assert got == {("tau2/airline/2", 0): (1.0, 1), ("tau2/airline/2", 1): (0.0, 0),
                   ("tau2/airline/8", 0): (0.0, 1), ("tau2/airline/8", 1): (0.0, 0)}
    passk = json.loads((tmp_path / "pipe.passk.json").read_text())
    ci = passk["summary"].pop("ci95")
    assert passk["k"] == 2 and passk["summary"] == {"total": 2, "pass_at_1": 0.5, "pass_at_2": 0.5}
    assert ci["pass_at_1"] == pytest.approx([0.0945, 0.9055], abs=1e-4)  # Wilson, 1 of N = 2 entries
    passk["summary"]["ci95"] = ci
    assert passk["by_domain"] == {"airline": passk["summary"]} and passk["settings"]["n"] == 2
    # `agent-tune eval report` writes the same from the results file
    assert eval_main(["report", str(out), "--passk-json", str(tmp_path / "again.passk.json")]) == 0
    again = json.loads((tmp_path / "again.passk.json").read_text())
    assert again["summary"] == passk["summary"] and again["by_domain"] == passk["by_domain"]
