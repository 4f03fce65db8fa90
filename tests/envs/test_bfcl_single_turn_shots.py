"""Worked examples (shots) for BFCL single-turn rows of the toolcall env: other entries only, train entries
only, never the row's answer, the reference calls in the parser's format, and prompts that fit the CPU config."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.single_turn.ast_check import ast_verdict
from agent_tune.envs.bfcl.single_turn.entries import load_single_turn
from agent_tune.envs.bfcl.single_turn.shots import (
    DEFAULT_MAX_SHOT_CHARS,
    choose_single_turn_shots,
    eligible_single_turn_shots,
    shot_size,
    single_turn_shot_messages,
    single_turn_shot_tools,
)
from agent_tune.envs.bfcl.single_turn.splits import single_turn_split_ids
from agent_tune.envs.bfcl.single_turn.task import toolrl_ground_truth
from agent_tune.parsing import ToolCall, get_tool_parser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent_tune.envs.tasks import catalogue_rows, row_env, row_task  # noqa: E402
from data_preprocess.toolcall import main  # noqa: E402

SEED = 42
K = 2  # examples/cpu/learning_signal_bfcl_single.sh
CATS = ["simple_python"]
CONFIG = ROOT / "config" / "agent_tune_toolcall_bfcl_cpu.yaml"


@pytest.fixture(scope="module")
def splits() -> dict[str, list[dict]]:
    return {split: catalogue_rows("toolcall", split, {"categories": CATS, "seed": SEED, "shots": K})
            for split in ("train", "val", "test")}


def _shots(row: dict) -> list[str]:
    return list(row_env(row["extra_info"])[1]["shots"])


def test_every_row_gets_k_shots_from_other_train_entries(splits: dict[str, list[dict]]) -> None:
    train = set(single_turn_split_ids("train", CATS, SEED))
    for split, rows in splits.items():
        for row in rows:
            test_id, shots = row["extra_info"]["id"], _shots(row)
            assert len(shots) == K == len(set(shots)), (split, test_id)
            assert test_id not in shots
            assert set(shots) <= train, (split, test_id, shots)  # no val/test answer is shown anywhere
            assert all(0 < shot_size(s) <= DEFAULT_MAX_SHOT_CHARS for s in shots)


def test_shots_never_show_an_answer_the_row_accepts(splits: dict[str, list[dict]]) -> None:
    hermes = get_tool_parser("hermes")
    for row in (r for rows in splits.values() for r in rows):
        entry = load_single_turn(row["extra_info"]["id"])
        for message in single_turn_shot_messages(_shots(row)):
            if message["role"] == "assistant":
                calls = [{c.name: c.arguments} for c in hermes.parse(message["content"]).calls]
                assert calls
                assert not ast_verdict(entry.functions, calls, entry.possible_answer, entry.category).valid


def test_an_entry_whose_answer_the_row_accepts_is_not_eligible() -> None:
    pool = single_turn_split_ids("train", CATS, SEED) + single_turn_split_ids("test", CATS, SEED)
    row = load_single_turn(pool[0])
    clashes = [t for t in pool[1:] if ast_verdict(
        row.functions, [{c["name"]: c["arguments"]} for c in toolrl_ground_truth(load_single_turn(t))],
        row.possible_answer, row.category).valid]
    eligible = eligible_single_turn_shots(pool[0], pool, max_chars=10_000)
    assert pool[0] not in eligible and not set(clashes) & set(eligible)
    assert len(eligible) == len(pool) - 1 - len(clashes)
    # simple_python_11 asks simple_python_0's question again: the checker catches it
    assert "simple_python_11" not in eligible_single_turn_shots("simple_python_0", ["simple_python_11"], 10_000)


def test_shot_turns_are_the_question_and_its_reference_calls_in_the_parsers_format() -> None:
    entry = load_single_turn("simple_python_5")
    for name in ("hermes", "pythonic"):
        parser = get_tool_parser(name)
        user, assistant = single_turn_shot_messages(["simple_python_5"], name)
        assert user == {"role": "user", "content": entry.messages[0]["content"]}
        assert assistant["role"] == "assistant"
        parsed = parser.parse(assistant["content"])
        assert [(c.name, c.arguments) for c in parsed.calls] == [
            (c["name"], c["arguments"]) for c in toolrl_ground_truth(entry)]
        assert not parsed.errors


def test_irrelevance_entries_are_never_shots() -> None:
    pool = single_turn_split_ids("train", ["irrelevance", "simple_python"], SEED)
    eligible = eligible_single_turn_shots("simple_python_0", pool)
    assert eligible and all(t.startswith("simple_python_") for t in eligible)


def test_choice_is_reproducible_and_seeded() -> None:
    pool = single_turn_split_ids("train", CATS, SEED)
    a = [choose_single_turn_shots(t, pool, K, SEED) for t in pool[:20]]
    assert a == [choose_single_turn_shots(t, pool, K, SEED) for t in pool[:20]]
    assert a != [choose_single_turn_shots(t, pool, K, SEED + 1) for t in pool[:20]]
    assert choose_single_turn_shots(pool[0], pool, 0, SEED) == []
    with pytest.raises(ValueError, match=">= 0"):
        choose_single_turn_shots(pool[0], pool, -1, SEED)


def test_env_prepends_the_shots_and_the_row_prompt_matches(splits: dict[str, list[dict]]) -> None:
    for row in (splits["train"][0], splits["test"][3]):
        kwargs, task = dict(row_env(row["extra_info"])[1]), row_task(row["extra_info"])
        obs = make_env("toolcall", **kwargs).reset(**task)
        assert obs.messages == row["prompt"]
        entry = load_single_turn(task["test_id"])
        assert obs.messages[2 * K:] == entry.messages
        # the row's functions and the shots', in an order seeded by the row
        shown = {t["function"]["name"]: t for t in obs.tools}
        assert all(shown[t["function"]["name"]] == t for t in entry.tools)
        assert set(shown) == {t["function"]["name"] for t in entry.tools + single_turn_shot_tools(kwargs["shots"])}
        assert len(shown) == len(obs.tools)
        assert make_env("toolcall", **kwargs).reset(**task).tools == obs.tools
        assert [m["role"] for m in obs.messages[:2 * K]] == ["user", "assistant"] * K


def test_shots_follow_a_system_prompt_and_do_not_change_the_score() -> None:
    shots = ["simple_python_5"]
    env = make_env("toolcall", test_id="simple_python_0", shots=shots, system_prompt="Be brief.")
    obs = env.reset()
    assert obs.messages[0] == {"role": "system", "content": "Be brief."}
    assert obs.messages[1:3] == single_turn_shot_messages(shots)
    reference = toolrl_ground_truth(load_single_turn("simple_python_0"))
    answer = get_tool_parser("hermes").format_calls([ToolCall(c["name"], c["arguments"]) for c in reference])
    plain = make_env("toolcall", test_id="simple_python_0")
    plain.reset()
    right, again = env.step(answer), plain.step(answer)
    assert (right.reward, right.info["accuracy"]) == (again.reward, again.info["accuracy"])
    assert right.info["accuracy"] == 1.0
    # the shot's function is offered (no format error) but it is the wrong function for the row
    shot_answer = single_turn_shot_messages(shots)[1]["content"]
    env.reset()
    wrong = env.step(shot_answer)
    assert wrong.info["accuracy"] == 0.0 and wrong.info["format_errors"] == 0 and wrong.info["format_ok"] == 1.0
    assert wrong.info["ast_error_type"] and wrong.reward == pytest.approx(-2.0)


def test_bad_shots_are_refused() -> None:
    with pytest.raises(ValueError, match="shots"):
        make_env("toolcall", shots=["irrelevance_0"])  # no reference answer
    with pytest.raises(ValueError, match="shots"):
        make_env("toolcall", shots=["simple_python_99999"])
    with pytest.raises(ValueError, match="its own shots"):
        make_env("toolcall", test_id="simple_python_5", shots=["simple_python_5"]).reset()


def test_cli_writes_shots_for_bfcl_and_refuses_them_for_rlla(tmp_path: Path) -> None:
    import pandas as pd

    assert main(["--source", "bfcl", "--categories", *CATS, "--shots", "1", "--out", str(tmp_path / "a")]) == 0
    row = pd.read_parquet(tmp_path / "a" / "val.parquet").iloc[0]
    assert len(row_env(row["extra_info"])[1]["shots"]) == 1
    assert len(row["prompt"]) == 3
    assert main(["--source", "bfcl", "--categories", *CATS, "--out", str(tmp_path / "b")]) == 0
    plain = pd.read_parquet(tmp_path / "b" / "val.parquet").iloc[0]
    assert "shots" not in (row_env(plain["extra_info"])[1] or {}) and len(plain["prompt"]) == 1
    (tmp_path / "r.json").write_text("[]")
    with pytest.raises(SystemExit, match="error: toolcall: shots apply to sources 'bfcl' and 'arith'"):
        main(["--source", "rlla", str(tmp_path / "r.json"), "--shots", "2", "--out", str(tmp_path / "c")])
    with pytest.raises(SystemExit, match="error: toolcall: shots must be >= 0, got -1"):
        main(["--source", "bfcl", "--shots", "-1", "--out", str(tmp_path / "d")])
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()  # nothing written


def test_prompt_with_shots_fits_the_cpu_config(splits: dict[str, list[dict]]) -> None:
    from transformers import AutoTokenizer

    from agent_tune.models.smollm2 import ensure_smollm2
    from agent_tune.rollout import ChatRenderer

    renderer = ChatRenderer(AutoTokenizer.from_pretrained(str(ensure_smollm2())), template="smollm2_tools")
    limit = OmegaConf.load(CONFIG).data.max_prompt_length
    envs = [make_env("toolcall", **row_env(r["extra_info"])[1]) for r in splits["train"]]
    lengths = [len(renderer.render_prompt(r["prompt"], env.reset(**row_task(r["extra_info"])).tools))
               for r, env in zip(splits["train"], envs)]
    assert max(lengths) <= limit, (max(lengths), limit)
