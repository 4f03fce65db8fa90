"""examples/eval/bfcl_official.sh: BFCL's official ``bfcl evaluate`` on the result files of an ``agent-tune eval``
run, its accuracy per category beside ours.

The run is real (the evaluator against a scripted server playing ground truth, every other entry with a call
dropped from its later turns). The fast test gives the script a stand-in ``bfcl`` that records how it is called
and writes score files; the slow one runs bfcl-eval's own CLI from ``.venv-bfcl-cli`` (its CLI imports every provider
SDK at start-up, so it lives in a venv of its own: scripts/install_bfcl_cli.sh, docs/eval.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.eval.test_bfcl_agreement import _run, mutated_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "eval" / "bfcl_official.sh"
IDS = ["multi_turn_base_0", "multi_turn_base_7", "multi_turn_miss_param_2", "multi_turn_miss_param_11"]
MODEL_DIR = "Qwen_Qwen3-4B-Instruct-2507-FC"

# a stand-in for bfcl: logs its arguments and BFCL_PROJECT_ROOT, then writes a score file per category (1 of 2)
FAKE_BFCL = r'''#!/usr/bin/env bash
printf "%s\n" "$BFCL_PROJECT_ROOT" "$@" > "LOG"
while [[ $# -gt 0 ]]; do
  case "$1" in --test-category) cats="$2"; shift ;; --score-dir) score="$2"; shift ;; esac
  shift
done
IFS=, read -r -a list <<< "$cats"
for c in "${list[@]}"; do
  mkdir -p "$score/MODEL/multi_turn"
  echo '{"accuracy": 0.5, "correct_count": 1, "total_count": 2}' > "$score/MODEL/multi_turn/BFCL_v4_${c}_score.json"
done
'''


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


async def _results(qwen_tok, tmp_path: Path) -> tuple[Path, dict[str, float]]:
    out = tmp_path / "run.jsonl"
    records = await _run(qwen_tok, mutated_script(IDS), IDS, out)
    return out, {r["test_id"]: r["accuracy"] for r in records}


def _script(results: Path, bfcl: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL", "FORMAT", "OUT_DIR", "BFCL")}
    env.update(PYTHON=sys.executable, BFCL=bfcl, PYTHONPATH=str(REPO))
    return subprocess.run(["bash", str(SCRIPT), str(results)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def _table(stdout: str) -> dict[str, list[str]]:
    rows = [line.split() for line in stdout.splitlines() if line.startswith("multi_turn_")]
    return {row[0]: row[1:] for row in rows}


async def test_the_script_writes_the_files_runs_bfcl_on_their_categories_and_compares(qwen_tok, tmp_path):
    results, ours = await _results(qwen_tok, tmp_path)
    assert sorted(ours.values()) == [0.0, 0.0, 1.0, 1.0]  # one right, one wrong entry per category
    log = tmp_path / "bfcl_args.txt"
    fake = tmp_path / "fake_bfcl"
    fake.write_text(FAKE_BFCL.replace("LOG", str(log)).replace("MODEL", MODEL_DIR))
    fake.chmod(0o755)
    done = _script(results, str(fake), tmp_path)
    assert done.returncode == 0, done.stderr
    official = tmp_path / "run_official"
    root, *args = log.read_text().splitlines()
    assert root == str(official / "bfcl_root")
    assert args == ["evaluate", "--model", "Qwen/Qwen3-4B-Instruct-2507-FC", "--test-category",
                    "multi_turn_base,multi_turn_miss_param", "--result-dir", str(official / "result"),
                    "--score-dir", str(official / "score"), "--partial-eval"]
    files = sorted(p.name for p in (official / "result" / MODEL_DIR / "multi_turn").iterdir())
    assert files == ["BFCL_v4_multi_turn_base_result.json", "BFCL_v4_multi_turn_miss_param_result.json"]
    rows = [json.loads(line) for line in (official / "result" / MODEL_DIR / "multi_turn" / files[0]).open()]
    assert [r["id"] for r in rows] == ["multi_turn_base_0", "multi_turn_base_7"]
    table = _table(done.stdout)
    assert table == {"multi_turn_base": ["1/2", "(0.500)", "1/2", "(0.500)", "yes"],
                     "multi_turn_miss_param": ["1/2", "(0.500)", "1/2", "(0.500)", "yes"]}


def test_the_script_needs_a_results_file(tmp_path):
    done = _script(tmp_path / "missing.jsonl", "false", tmp_path)
    assert done.returncode == 2 and "usage:" in done.stderr


# bfcl-eval's CLI in the venv of its own that scripts/install_bfcl_cli.sh builds (it runs as a subprocess)
CLI_PYTHON = REPO / ".venv-bfcl-cli" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not CLI_PYTHON.exists(),
                    reason=f"no {CLI_PYTHON} (bfcl-eval's CLI in a venv of its own): bash scripts/install_bfcl_cli.sh")
async def test_bfcl_evaluate_itself_agrees_with_our_verdicts(qwen_tok, tmp_path):
    results, ours = await _results(qwen_tok, tmp_path)
    done = _script(results, f"{CLI_PYTHON} -m bfcl_eval", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    score = tmp_path / "run_official" / "score"
    assert (score / "data_overall.csv").is_file()  # bfcl evaluate's own summary
    assert _table(done.stdout) == {"multi_turn_base": ["1/2", "(0.500)", "1/2", "(0.500)", "yes"],
                                   "multi_turn_miss_param": ["1/2", "(0.500)", "1/2", "(0.500)", "yes"]}


def test_the_table_says_where_the_two_scorers_differ():
    from agent_tune.envs.bfcl.official_scores import comparison, our_scores

    ours = our_scores([{"category": "simple_python", "test_id": "simple_python_0", "sample": 0, "accuracy": 1.0},
                       {"category": "simple_python", "test_id": "simple_python_0", "sample": 1, "accuracy": 0.0},
                       {"category": "multiple", "test_id": "multiple_0", "sample": 0, "accuracy": 0.0}])
    official = {"simple_python": {"accuracy": 1.0, "correct_count": 1, "total_count": 1},
                "multiple": {"accuracy": 1.0, "correct_count": 1, "total_count": 1},
                "parallel": {"accuracy": 0.0, "correct_count": 0, "total_count": 1}}
    rows = {line.split()[0]: line.split()[1:] for line in comparison(official, ours)[1:]}
    assert rows == {"multiple": ["1/1", "(1.000)", "0/1", "(0.000)", "NO"],
                    "parallel": ["0/1", "(0.000)", "-", "NO"],
                    "simple_python": ["1/1", "(1.000)", "1/1", "(1.000)", "yes"]}  # sample 1 is not in the files
