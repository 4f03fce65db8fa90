"""The BFCL result files we write, re-scored by bfcl-eval's own code, agree with our verdicts.

bfcl-eval's CLI is not installed next to the trainer (it imports every provider SDK and tree-sitter at start-up,
and its full install pins numpy 1.26.4), so the test calls the functions
``bfcl evaluate`` runs per multi-turn entry: ``eval_runner._evaluate_single_multi_turn_entry`` with the
Qwen FC handler (``QwenFCHandler.decode_execute``), which runs ``multi_turn_checker``. Importing
``eval_runner`` pulls in every provider SDK through ``constants.model_config`` and tree-sitter through the
Java/JS parsers; those three modules (unused by multi-turn scoring) are replaced by empty stand-ins here.
"""

from __future__ import annotations

import itertools
import json
import sys
import types

import pytest

from agent_tune.envs.bfcl.multi_turn.data import ensure_bfcl_project_root, load_entry
from agent_tune.envs.bfcl.multi_turn.replay import TURN_END_TEXT, ground_truth_calls
from agent_tune.envs.bfcl.result_files import DEFAULT_REGISTRY_NAME, write_bfcl_results
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.parsing import get_tool_parser
from agent_tune.testing.scripted_server import ScriptedServer, garbage_script, oracle_script

IDS = ["multi_turn_base_0", "multi_turn_base_7", "multi_turn_miss_func_1", "multi_turn_miss_func_9",
       "multi_turn_miss_param_2", "multi_turn_miss_param_11", "multi_turn_long_context_3",
       "multi_turn_long_context_13"]
HERMES = get_tool_parser("hermes")
_names = itertools.count()


def _stub(name: str, **attrs) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module


@pytest.fixture(scope="module")
def official():
    ensure_bfcl_project_root()
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING={})
    _stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=None)
    _stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=None)
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    handler = QwenFCHandler("Qwen/Qwen3-4B-Instruct-2507", 0.0, DEFAULT_REGISTRY_NAME, True)

    def verdict(row: dict) -> bool:
        entry = load_entry(row["id"])
        prompt = {"id": entry.id, "initial_config": entry.initial_config, "involved_classes": entry.involved_classes}
        model_name = f"agent_tune_agree_{next(_names)}"
        try:
            out = eval_runner._evaluate_single_multi_turn_entry(
                handler, entry.id, row["result"], entry.ground_truth, prompt, model_name, entry.category)
        finally:  # bfcl-eval keeps backend instances in module globals keyed by model name
            g = vars(multi_turn_utils)
            for key in [k for k in g if k.startswith(model_name)]:
                del g[key]
        return bool(out["valid"])

    return verdict


def mutated_script(test_ids):
    """Ground truth, except that in every other entry the turns after the first lose their last call."""
    table = {t: ground_truth_calls(load_entry(t)) for t in test_ids}
    broken = set(test_ids[::2])

    def script(test_id, turn, step):
        calls = table[test_id][turn]
        if test_id in broken and turn > 0 and calls:
            calls = calls[:-1]
        return HERMES.format_calls(calls) if calls and step == 0 else TURN_END_TEXT

    return script


def looping_script(test_ids):
    """Repeats the entry's first ground-truth call forever: force termination after 20 steps."""
    first = {t: next(c for turn in ground_truth_calls(load_entry(t)) for c in turn) for t in test_ids}
    return lambda test_id, turn, step: HERMES.format_calls([first[test_id]])


def compact_script(test_ids):
    """Ground truth written without the newlines inside the block: neither BFCL's Qwen handler's regex nor
    our Hermes parser reads it as a call (ours reports a format error), so no call runs on either side."""
    oracle = oracle_script(test_ids)

    def script(test_id, turn, step):
        return (
            oracle(test_id, turn, step)
            .replace("<tool_call>\n", "<tool_call>")
            .replace("\n</tool_call>", "</tool_call>")
        )

    return script


async def _run(tok, script, ids, out):
    async with ScriptedServer(tok, script, ids) as srv:
        s = EvalSettings(base_url=srv.base_url, model="scripted", template="qwen3", concurrency=4, progress=False)
        return (await Evaluator(s, tok).run(ids, out)).records


def _rows(records, tmp_path, form):
    files = write_bfcl_results(records, tmp_path / form, form=form)
    return {row["id"]: row for f in files for row in map(json.loads, f.read_text().splitlines())}


@pytest.mark.parametrize("name", ["oracle", "garbage", "mutated", "looping"])
async def test_official_checker_agrees(qwen_tok, tmp_path, official, name):
    ids = IDS[:2] if name == "looping" else IDS
    script = {"oracle": oracle_script(ids), "garbage": garbage_script, "mutated": mutated_script(ids),
              "looping": looping_script(ids)}[name]
    records = await _run(qwen_tok, script, ids, tmp_path / "r.jsonl")
    ours = {r["test_id"]: r["accuracy"] == 1.0 for r in records}
    for form in ("canonical", "raw"):
        rows = _rows(records, tmp_path, form)
        theirs = {t: official(rows[t]) for t in ids}
        assert theirs == ours, form
    expected = {"oracle": True, "garbage": False, "looping": False}.get(name)
    if expected is not None:
        assert set(ours.values()) == {expected}
    else:
        assert set(ours.values()) == {True, False}
    if name == "looping":
        assert all(r["force_terminated"] for r in records)


async def test_compact_blocks_fail_as_on_the_leaderboard(qwen_tok, tmp_path, official):
    """Blocks without the newlines BFCL's handler needs: our parser rejects them too, so we score the
    entries as the official checker does, in both written forms."""
    ids = IDS[:3]
    records = await _run(qwen_tok, compact_script(ids), ids, tmp_path / "r.jsonl")
    assert all(r["accuracy"] == 0.0 and r["num_calls"] == 0 for r in records)
    for form in ("canonical", "raw"):
        rows = _rows(records, tmp_path, form)
        assert not any(official(rows[t]) for t in ids), form
