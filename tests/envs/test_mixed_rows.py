"""Several envs in one run: the rows ``agent-tune data`` writes for bfcl (with worked examples), tau2, retool and
the mcp notes example, read together by verl's own ``RLHFDataset`` (``data.train_files`` = the four files).

verl concatenates the files into one table, so their ``prompt`` columns need one Arrow type: BFCL's and the mcp
env's worked examples put a ``name`` on tool messages, tau2's and retool's prompts have none. ``write_rows`` writes
every prompt message with the same keys (``agent_tune/utils/rows.py``); these tests check that verl reads the four
files as one dataset, that each row keeps its env, kwargs and task, and that each prompt renders to the same token
ids as the messages the env wrote, with the tokenizer's template (what verl's length filter measures) and agent-tune's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent_tune.data_cli import main as data_main
from agent_tune.envs.tasks import catalogue_rows, row_env, row_task, select_tasks
from agent_tune.utils.rows import ROW_MESSAGE_KEYS, write_rows

ROOT = Path(__file__).resolve().parents[2]
NOTES = str(ROOT / "examples" / "mcp" / "tasks.jsonl")
RETOOL = str(ROOT / "tests" / "fixtures" / "retool" / "math_small.jsonl")
# `agent-tune data` arguments per env: the split, its options and a selection (1 task per category)
DATA = {
    "bfcl": ["--split", "train", "--options", '{"shots": 2}', "--limit", "1"],
    "tau2": ["--split", "train", "--categories", "airline", "--limit", "1"],
    "retool": ["--split", "train", "--options", f'{{"input": "{RETOOL}"}}', "--limit", "2"],
    "mcp": ["--split", "train", "--options", f'{{"path": "{NOTES}", "shots": 2}}', "--limit", "1"],
}
TEMPLATES = ("tokenizer", "smollm2_tools", "qwen3_instruct", "qwen3")


def _written(env: str) -> list[dict]:
    """The rows ``agent-tune data`` writes for ``env`` (:data:`DATA`), as the catalogue builds them in memory."""
    args = dict(zip(DATA[env][::2], DATA[env][1::2]))
    options = json.loads(args.get("--options", "{}"))
    categories = [args["--categories"]] if "--categories" in args else None
    tasks = select_tasks(env, args["--split"], options, categories, limit=int(args["--limit"]))
    return catalogue_rows(env, args["--split"], options, tasks=tasks)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[dict[str, Path], dict[str, list[dict]]]:
    """The four envs' files written by ``agent-tune data``, and their rows as the envs built them."""
    out = tmp_path_factory.mktemp("mixed")
    files = {}
    for env, args in DATA.items():
        assert data_main(["--env", env, "--out", str(out / env), *args]) == 0
        files[env] = out / env / "train.parquet"
    return files, {env: _written(env) for env in DATA}


def _verl_dataset(files: list[Path], tokenizer, cache: Path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"max_prompt_length": 16384, "filter_overlong_prompts": True,
                               "filter_overlong_prompts_workers": 1, "cache_dir": str(cache)})
    return RLHFDataset([str(f) for f in files], tokenizer, config)


def test_the_envs_prompts_differ_in_shape(mixed) -> None:
    """The case itself: tool messages with a name in bfcl's and mcp's prompts, none in tau2's and retool's; written
    as pandas infers them (before one row schema), bfcl's and tau2's files could not be read as one table."""
    _, written = mixed
    named = {env: any("name" in m for r in rows for m in r["prompt"]) for env, rows in written.items()}
    assert named == {"bfcl": True, "tau2": False, "retool": False, "mcp": True}
    assert any(m["role"] == "tool" for r in written["bfcl"] for m in r["prompt"])


def test_inferred_schemas_do_not_concatenate(mixed, tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    _, written = mixed
    parts = []
    for env in ("bfcl", "tau2"):
        pd.DataFrame(written[env]).to_parquet(tmp_path / f"{env}.parquet", index=False)
        parts.append(datasets.load_dataset("parquet", data_files=str(tmp_path / f"{env}.parquet"))["train"])
    with pytest.raises(ValueError, match="features can't be aligned because the key prompt"):
        datasets.concatenate_datasets(parts)


def test_verl_reads_the_four_envs_files_as_one_dataset(mixed, smol_tok, tmp_path) -> None:
    pytest.importorskip("verl")
    files, written = mixed
    dataset = _verl_dataset(list(files.values()), smol_tok, tmp_path / "cache")
    expected = [r for env in DATA for r in written[env]]
    assert len(dataset) == len(expected) and len(expected) >= 8
    seen = set()
    for i, original in enumerate(expected):
        row = dataset[i]
        extra = row["extra_info"]
        name, kwargs = row_env(extra)
        seen.add(name)
        assert (name, kwargs) == row_env(original["extra_info"])  # the env and its kwargs (bfcl: its shots)
        assert row_task(extra) == row_task(original["extra_info"])
        assert row["agent_name"] == "agent_tune" and row["data_source"] == original["data_source"]
        assert [list(m) for m in row["raw_prompt"]] == [list(ROW_MESSAGE_KEYS)] * len(original["prompt"])
        assert [{k: v for k, v in m.items() if v is not None} for m in row["raw_prompt"]] == original["prompt"]
    assert seen == set(DATA)
    assert any(row_env(r["extra_info"])[1].get("shots") for r in written["bfcl"])


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_prompt_renders_to_the_same_tokens_as_the_env_wrote_it(mixed, smol_tok, template, tmp_path) -> None:
    """What verl hands over (``raw_prompt`` of the mixed table, every message with a ``name``, null where the env
    gave none) renders token for token as the env's own messages: with the tokenizer's template (``apply_chat_template``
    as verl's length filter calls it) and with agent-tune's templates."""
    pytest.importorskip("verl")
    from agent_tune.rollout import ChatRenderer

    files, written = mixed
    dataset = _verl_dataset(list(files.values()), smol_tok, tmp_path / "cache")
    renderer = ChatRenderer(smol_tok, template=template)
    for i, original in enumerate(r for env in DATA for r in written[env]):
        read = dataset[i]["raw_prompt"]
        assert renderer.render_prompt(read) == renderer.render_prompt(original["prompt"]), (i, template)
        if template == "tokenizer":
            as_verl = smol_tok.apply_chat_template(read, add_generation_prompt=True, tokenize=True)
            assert list(as_verl["input_ids"] if hasattr(as_verl, "keys") else as_verl) == \
                renderer.render_prompt(original["prompt"])


def test_qwen3s_own_template_renders_the_read_prompts_as_the_envs_wrote_them(mixed, qwen_tok, tmp_path) -> None:
    """The same with Qwen3's own chat template and vocabulary (the GPU recipes' ``template: tokenizer``)."""
    pytest.importorskip("verl")
    files, written = mixed
    dataset = _verl_dataset(list(files.values()), qwen_tok, tmp_path / "cache")
    for i, original in enumerate(r for env in DATA for r in written[env]):
        read, ids = dataset[i]["raw_prompt"], []
        for messages in (read, original["prompt"]):
            out = qwen_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            ids.append(list(out["input_ids"] if hasattr(out, "keys") else out))
        assert ids[0] == ids[1], i


def test_the_other_envs_rows_read_together_and_render_as_written(smol_tok, tmp_path) -> None:
    """Rows of the other built-in catalogues (toolcall: BFCL single-turn with worked examples, the synthetic
    arithmetic rows with worked examples; the one-file calculator env) with bfcl's, through verl's reader."""
    pytest.importorskip("verl")
    from agent_tune.rollout import ChatRenderer

    parts = {
        "single": catalogue_rows("toolcall", "train", tasks=select_tasks(
            "toolcall", "train", {"categories": ["simple_python"], "shots": 2}, limit=2)),
        "arith": catalogue_rows("toolcall", "train", {"source": "arith", "n": 3, "val_size": 1, "shots": 2}),
        "calc": catalogue_rows("examples.envs.calculator:CalculatorEnv", "train", {"size": 2}),
        "bfcl": _written("bfcl"),
    }
    for name, rows in parts.items():
        write_rows(tmp_path / name, "train", rows)
    dataset = _verl_dataset([tmp_path / n / "train.parquet" for n in parts], smol_tok, tmp_path / "cache")
    written = [r for rows in parts.values() for r in rows]
    assert len(dataset) == len(written)
    renderers = [ChatRenderer(smol_tok, template=t) for t in TEMPLATES]
    for i, original in enumerate(written):
        read = dataset[i]["raw_prompt"]
        assert row_task(dataset[i]["extra_info"]) == row_task(original["extra_info"])
        for renderer in renderers:
            assert renderer.render_prompt(read) == renderer.render_prompt(original["prompt"]), (i, renderer)


@pytest.mark.parametrize("message, field", [
    ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}, "tool_calls"),
    ({"role": "assistant", "content": "x", "reasoning_content": "because"}, "reasoning_content"),
    ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, "content"),
    ({"role": "tool", "content": "1", "name": 3}, "name"),
])
def test_a_prompt_field_outside_the_row_schema_is_refused_naming_it(message, field, tmp_path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "q"}, message], "extra_info": {"id": "t1", "index": 0}}]
    with pytest.raises(ValueError, match=rf"row 't1': prompt message 1 \(role '{message['role']}'\): field '{field}'"):
        write_rows(tmp_path / "out", "train", rows)
    assert not (tmp_path / "out").exists()
