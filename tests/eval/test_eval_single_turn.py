"""Single-turn BFCL evaluation end to end: the scripted server answers right or wrong, the toolcall env
scores through the shared runner, and the report, the resume and the BFCL result files follow."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from agent_tune.envs.bfcl.result_files import DEFAULT_REGISTRY_NAME, write_bfcl_results
from agent_tune.envs.bfcl.single_turn.entries import LIVE, NON_LIVE, SINGLE_TURN_CATEGORIES, load_single_turn
from agent_tune.envs.tasks import select_tasks
from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.metrics import summarize
from agent_tune.eval.report import format_table
from agent_tune.eval.store import read_results
from agent_tune.testing.bfcl_official_ast import official_modules
from agent_tune.testing.scripted_server import ScriptedServer, single_turn_script


def select_test_ids(**kw) -> list[str]:
    return [t.id for t in select_tasks("toolcall", **kw)]


IDS = select_test_ids(suite="single_turn_python", limit=2)
# Right on these: a different fraction per category, and live categories of different sizes.
RIGHT = {"simple_python_0", "multiple_0", "multiple_1", "irrelevance_1", "live_simple_0-0-0", "live_simple_1-1-0",
         "live_parallel_0-0-0", "live_relevance_0-0-0"}


def settings(srv: ScriptedServer, **kw) -> EvalSettings:
    base = dict(base_url=srv.base_url, model="scripted", env="toolcall", template="qwen3", concurrency=4,
                progress=False)
    base.update(kw)
    return EvalSettings(**base)


def test_suites_cover_the_categories():
    assert {i.rsplit("_", 1)[0] for i in IDS} == set(SINGLE_TURN_CATEGORIES) and len(IDS) == 2 * len(IDS) // 2
    assert {t.rsplit("_", 1)[0] for t in select_test_ids(suite="live", limit=1)} == set(LIVE)
    assert {t.rsplit("_", 1)[0] for t in select_test_ids(suite="non_live", limit=1)} == set(NON_LIVE)
    test = select_test_ids(split="test", categories=["simple_python"])
    train = select_test_ids(split="train", categories=["simple_python"])
    assert test and train and not set(test) & set(train)
    with pytest.raises(ValueError, match="no task 'multi_turn_base_0'"):  # a multi-turn entry is the bfcl env's
        select_test_ids(ids=["simple_python_0", "multi_turn_base_0"])


@pytest.mark.parametrize("mode", ["tokens", "chat"])
async def test_right_answers_score_100(qwen_tok, tmp_path, mode):
    async with ScriptedServer(qwen_tok, single_turn_script(), IDS) as srv:
        out = await Evaluator(settings(srv, mode=mode), qwen_tok).run(IDS, tmp_path / "r.jsonl")
    assert out.ran == len(IDS) and not out.failed
    for r in out.records:
        assert r["accuracy"] == 1.0, (r["test_id"], r["responses"])
        assert r["stop_reason"] == "done" and r["num_turns"] == 1
    s = summarize(out.records, env="toolcall")
    assert all(c["accuracy"] == 1.0 for c in s["categories"].values())
    for name in ("simple", "non_live", "live", "irrelevance", "relevance", "overall"):
        assert s["summaries"][name]["accuracy"] == 1.0, name
    assert s["summaries"]["overall"]["categories"] == ["non_live", "live", "irrelevance"]
    assert s["summaries"]["live"]["complete"] and not s["summaries"]["non_live"]["complete"]  # no java/js


async def test_wrong_and_mixed_answers(qwen_tok, tmp_path):
    async with ScriptedServer(qwen_tok, single_turn_script(right=()), IDS) as srv:
        wrong = await Evaluator(settings(srv), qwen_tok).run(IDS, tmp_path / "w.jsonl")
    assert all(r["accuracy"] == 0.0 for r in wrong.records)
    assert summarize(wrong.records, env="toolcall")["summaries"]["overall"]["accuracy"] == 0.0

    async with ScriptedServer(qwen_tok, single_turn_script(right=RIGHT), IDS) as srv:
        mixed = await Evaluator(settings(srv), qwen_tok).run(IDS, tmp_path / "m.jsonl")
    assert {r["test_id"] for r in mixed.records if r["accuracy"] == 1.0} == RIGHT
    s = summarize(mixed.records, env="toolcall")
    acc = {c: v["accuracy"] for c, v in s["categories"].items()}
    assert acc["simple_python"] == 0.5 and acc["multiple"] == 1.0 and acc["parallel"] == 0.0
    assert acc["live_simple"] == 1.0 and acc["live_parallel"] == 0.5 and acc["live_relevance"] == 0.5
    sm = s["summaries"]
    assert sm["non_live"]["accuracy"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.0) / 4)  # simple = simple_python
    assert sm["live"]["accuracy"] == pytest.approx((2 + 0 + 1 + 0) / 8)  # 2 entries each: weighted = mean here
    assert sm["irrelevance"]["accuracy"] == pytest.approx((0.5 + 0.0) / 2)
    assert sm["relevance"]["accuracy"] == 0.5
    assert sm["overall"]["accuracy"] == pytest.approx(
        (10 * sm["non_live"]["accuracy"] + 10 * sm["live"]["accuracy"] + 10 * sm["irrelevance"]["accuracy"]) / 30)
    table = format_table(s)
    assert "non_live*" in table and "relevance" in table and "weighted 10/10/10" in table


async def test_pass_at_k_and_resume(qwen_tok, tmp_path):
    ids = IDS[:4]
    seen: dict[str, int] = {}

    def first_right(test_id, turn, step):  # the first sample of an entry is right, later ones wrong
        seen[test_id] = seen.get(test_id, 0) + 1
        return single_turn_script(right=[test_id] if seen[test_id] == 1 else ())(test_id, turn, step)

    async with ScriptedServer(qwen_tok, first_right, ids) as srv:
        s = settings(srv, n=3, temperature=0.7, seed=0)
        first = await Evaluator(s, qwen_tok).run(ids[:2], tmp_path / "r.jsonl")
        assert first.ran == 6
        n_requests = len(srv.requests)
        out = await Evaluator(s, qwen_tok).run(ids, tmp_path / "r.jsonl")
        assert out.skipped == 6 and out.ran == 6
        assert len(srv.requests) - n_requests == 6  # nothing re-ran
    records = read_results(tmp_path / "r.jsonl")[1]
    assert sorted((r["test_id"], r["sample"]) for r in records) == sorted((t, k) for t in ids for k in range(3))
    summary = summarize(records, env="toolcall")
    cat = summary["categories"]["simple_python"]
    assert cat["pass@1"] == pytest.approx(1 / 3) and cat["pass@2"] == pytest.approx(2 / 3) and cat["pass@3"] == 1.0
    assert summary["summaries"]["non_live"]["pass@3"] == 1.0


# ---------------------------------------------------------------- result files, read as bfcl-eval reads them


@pytest.fixture(scope="module")
def official():
    """bfcl-eval's own per-entry runner steps and its Qwen FC handler (the default registry name's), imported
    with the scoped stand-ins of ``agent_tune/testing/bfcl_official_ast.py``."""
    off = official_modules()
    model_name = DEFAULT_REGISTRY_NAME.replace("/", "_")  # as bfcl evaluate names the model folder
    handler = off.QwenFCHandler("Qwen/Qwen3-4B-Instruct-2507", 0.0, DEFAULT_REGISTRY_NAME, True)

    def verdict(row: dict) -> bool:
        entry = load_single_turn(row["id"])
        prompt = {"id": entry.test_id, "function": entry.functions}
        if entry.possible_answer is None:
            out = off.eval_runner._evaluate_single_relevance_entry(
                handler, entry.test_id, row["result"], prompt, model_name, entry.category)
        else:
            out = off.eval_runner._evaluate_single_ast_entry(
                handler, entry.test_id, row["result"], entry.possible_answer, prompt, model_name, entry.category,
                language=off.Language.PYTHON, return_format=off.ReturnFormat.PYTHON)
        return bool(out["valid"])

    return types.SimpleNamespace(verdict=verdict, folder=off.utils.get_directory_structure_by_id,
                                 sort_key=off.utils.sort_key, registry_dir=handler.registry_dir_name)


@pytest.mark.parametrize("form", ["canonical", "raw"])
async def test_result_files_rescore_like_us(qwen_tok, tmp_path, official, form):
    async with ScriptedServer(qwen_tok, single_turn_script(right=RIGHT), IDS) as srv:
        out = await Evaluator(settings(srv), qwen_tok).run(IDS, tmp_path / "r.jsonl")
    ours = {r["test_id"]: r["accuracy"] == 1.0 for r in out.records}
    files = write_bfcl_results(out.records, tmp_path / "bfcl", form=form)
    assert len(files) == len(SINGLE_TURN_CATEGORIES)
    theirs = {}
    for path in files:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        category = path.name.removeprefix("BFCL_v4_").removesuffix("_result.json")
        assert {r["id"].rsplit("_", 1)[0] for r in rows} == {category}
        assert path.parent == tmp_path / "bfcl" / official.registry_dir / official.folder(rows[0]["id"])
        assert rows == sorted(rows, key=official.sort_key)
        for row in rows:
            assert set(row) == {"id", "result"} and isinstance(row["result"], str)
            theirs[row["id"]] = official.verdict(row)
    assert theirs == ours


def test_cli_single_turn_suite(qwen_tok, qwen_tok_dir, tmp_path, capsys):
    from tests.eval.test_resume import ServerThread

    ids = select_test_ids(suite="live", limit=1)
    out = tmp_path / "r.jsonl"
    with ServerThread(tokenizer=qwen_tok, script=single_turn_script(), test_ids=ids) as srv:
        cmd = ["--base-url", srv.base_url, "--model", "scripted", "--env", "toolcall", "--suite", "live",
               "--limit", "1", "--tokenizer", str(qwen_tok_dir), "--template", "qwen3", "--output", str(out),
               "--no-progress"]
        assert eval_main(cmd) == 0
        assert eval_main(cmd) == 0  # a rerun resumes: nothing left to run
    printed = capsys.readouterr().out
    assert f"ran 0 episodes, {len(ids)} already in" in printed
    assert f"episodes, conversations and tokens: agent-tune view {out}" in printed  # how to look at them
    meta, records = read_results(out)
    assert meta["env"] == "toolcall" and len(records) == len(ids)
    report = json.loads(Path(f"{out.with_suffix('')}.report.json").read_text())
    assert report["summaries"]["live"]["accuracy"] == 1.0 and report["summaries"]["relevance"]["accuracy"] == 1.0
    assert Path(f"{out.with_suffix('')}.png").stat().st_size > 0
    bfcl_dir = Path(f"{out.with_suffix('')}_results") / DEFAULT_REGISTRY_NAME.replace("/", "_") / "live"
    assert sorted(p.name for p in bfcl_dir.iterdir()) == sorted(f"BFCL_v4_{c}_result.json" for c in LIVE)
