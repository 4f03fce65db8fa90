"""``agent-tune eval --config FILE.yaml`` (flags from a YAML file, the command line over it) and ``--top-k``
(vLLM's ``top_k`` in every request body, in the results header)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_tune.eval.cli import ConfigFileError, config_values, parse_run_args, run_main, run_parser
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.store import read_results
from agent_tune.testing.scripted_server import ScriptedServer, oracle_script

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval"
IDS = ["multi_turn_base_0"]


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "eval.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", ["bfcl_vllm.yaml", "tau2_passk.yaml", "tau2_pipeline_pass4.yaml"])
def test_example_files_give_typed_flags(name: str) -> None:
    args = parse_run_args(["--config", str(EXAMPLES / name)])
    assert args.base_url == "http://127.0.0.1:8000/v1" and args.config.endswith(name)
    assert isinstance(args.temperature, float) and isinstance(args.n, int) and isinstance(args.concurrency, int)
    if name == "bfcl_vllm.yaml":
        assert args.options == {"seed": 42} and args.chat_template_kwargs == {} and args.top_k is None
        assert args.split == "test" and args.max_tokens == 2048
    else:
        assert args.categories == ["airline", "retail", "telecom"] and args.top_k == 20 and args.n == 4
        assert args.temperature == 0.8 and args.user_temperature == 0.7 and args.top_p == 1.0
    if name == "tau2_pipeline_pass4.yaml":  # eval_passk.py's settings, in the pipeline's protocol
        assert args.env_kwargs == {"protocol": "pipeline", "max_steps": 100} and args.max_tokens == 1200
        assert args.split == "test" and args.passk_json.endswith(".passk.json")


def test_command_line_overrides_the_file_and_both_spellings_are_keys(tmp_path: Path) -> None:
    cfg = _write(tmp_path, "base-url: http://h:1/v1\nmodel: from-file\ntop_k: 20\nno_progress: true\n"
                           "categories: airline\nenv-kwargs: {max_steps: 30}\n")
    args = parse_run_args(["--config", cfg, "--model", "from-cli", "--top-k", "5"])
    assert (args.base_url, args.model, args.top_k) == ("http://h:1/v1", "from-cli", 5)
    assert args.no_progress is True and args.categories == ["airline"] and args.env_kwargs == {"max_steps": 30}
    # without the file the required flags are still required
    with pytest.raises(SystemExit):
        parse_run_args(["--model", "m"])


@pytest.mark.parametrize(("text", "message"), [
    ("model: m\ntop_kk: 3\n", r"unknown key 'top_kk' \(not a flag of agent-tune eval\); did you mean 'top-k'\?"),
    ("model: m\nn: 2.5\n", r"key 'n': --n takes an integer, got 2.5"),
    ("model: m\nmode: text\n", r"key 'mode': --mode must be one of tokens, chat, got 'text'"),
    ("model: m\nno-progress: 'yes'\n", r"key 'no-progress': --no-progress is a switch"),
    ("model: m\ntop-k: 2\ntop_k: 3\n", r"key 'top_k': --top-k is given twice"),
    ("model: m\noptions: [1, 2]\n", r"key 'options': --options takes a mapping"),
    ("model: null\n", r"key 'model': --model needs a value, got null"),
    ("- model\n", r"expected a mapping of flag names to values, got list"),
])
def test_bad_files_fail_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        config_values(run_parser(), _write(tmp_path, text))


def test_cli_reports_a_bad_file_and_runs_nothing(tmp_path: Path, capsys) -> None:
    cfg = _write(tmp_path, "base-url: http://127.0.0.1:9/v1\nmodel: m\ntemprature: 0.5\n")
    assert run_main(["--config", cfg, "--output", str(tmp_path / "r.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'temprature'" in err and "did you mean 'temperature'?" in err
    assert not (tmp_path / "r.jsonl").exists()
    assert run_main(["--config", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_top_k_is_checked() -> None:
    with pytest.raises(ValueError, match="--top-k must be >= 1"):
        EvalSettings(base_url="http://h/v1", model="m", top_k=-2)


@pytest.mark.parametrize("mode", ["tokens", "chat"])
async def test_top_k_reaches_every_request_and_the_header(qwen_tok, tmp_path, mode) -> None:
    async with ScriptedServer(qwen_tok, oracle_script(IDS), IDS) as srv:
        cfg = _write(tmp_path, f"base-url: {srv.base_url}\nmodel: scripted\ntemplate: qwen3\nids: {IDS}\n"
                               f"mode: {mode}\ntop-k: 7\ntemperature: 0.5\nno-progress: true\n")
        argv = ["--config", cfg, "--top-k", "20", "--output", str(tmp_path / "r.jsonl")]
        assert await asyncio.to_thread(run_main, argv, qwen_tok) == 0
        generations = [b for b in srv.requests if "prompt" in b or "messages" in b]
    assert generations and all(b["top_k"] == 20 and b["temperature"] == 0.5 for b in generations)
    meta, records = read_results(tmp_path / "r.jsonl")
    assert meta["top_k"] == 20 and records[0]["accuracy"] == 1.0


async def test_no_top_k_sends_none(qwen_tok, tmp_path) -> None:
    async with ScriptedServer(qwen_tok, oracle_script(IDS), IDS) as srv:
        settings = EvalSettings(base_url=srv.base_url, model="scripted", template="qwen3", progress=False)
        await Evaluator(settings, qwen_tok).run(IDS, tmp_path / "r.jsonl")
        generations = [b for b in srv.requests if "prompt" in b]
    assert generations and not any("top_k" in b for b in generations)
    assert read_results(tmp_path / "r.jsonl")[0]["top_k"] is None
