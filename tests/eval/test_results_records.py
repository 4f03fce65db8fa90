"""docs/results/*.json: records from eval reports, validation, upsert, the generated tables and curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tune.errors import ConfigError
from agent_tune.eval import results_cli
from agent_tune.eval import results_records as rr
from agent_tune.eval.metrics import summarize

REPO = Path(__file__).resolve().parents[2]


def _report(successes: list[list[float]], categories: list[str] | None = None) -> dict:
    """A real eval summary: entry i's samples scored ``successes[i]``."""
    records = [{"test_id": f"e{i}", "sample": j, "category": (categories or ["all"] * len(successes))[i], "accuracy": s,
                "success": s}
               for i, row in enumerate(successes) for j, s in enumerate(row)]
    return summarize(records)


def _record(**kw) -> rr.ResultRecord:
    base = dict(env="calc", stage="base", from_=None, split="test", ood=False, n=4, pass1=0.25, pass1_ci=(0.05, 0.7),
                pass4=0.5, pass4_ci=(0.15, 0.85), steps=0, command="bash x.sh")
    return rr.ResultRecord(**{**base, **kw})


def test_records_from_a_report_carry_its_pass_at_k_and_intervals():
    report = _report([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0]], ["a", "a", "b", "b"])
    (overall, a, b) = rr.records_from_report(report, env="calc", stage="GRPO step 8", from_="base", split="test",
                                             ood=False, steps=8, command="bash x.sh", categories=True)
    assert overall.n == 4 and overall.pass1 == pytest.approx(report["overall"]["pass@1"]) == pytest.approx(6 / 16)
    assert overall.pass1_ci == tuple(report["overall"]["ci95"]["pass@1"])
    assert overall.pass4 == pytest.approx(0.75) and overall.category is None
    assert (a.category, a.n, a.pass1) == ("a", 2, pytest.approx(1 / 8))
    assert (b.category, b.pass4) == ("b", pytest.approx(1.0))


def test_a_report_with_fewer_than_four_samples_has_no_pass4():
    (r,) = rr.records_from_report(_report([[1], [0]]), env="e", stage="s", from_=None, split="test", ood=True,
                                  steps=0, command="c")
    assert r.pass4 is None and r.pass4_ci is None and r.ood


def test_round_trip_and_upsert(tmp_path):
    path = tmp_path / "r.json"
    first = [_record(), _record(stage="GRPO", from_="base", steps=8, pass1=0.9, pass1_ci=(0.7, 0.97), train_s=300.0)]
    rr.write_records(path, first)
    assert rr.read_records(path) == first
    assert json.loads(path.read_text())[1]["from"] == "base"
    newer = _record(stage="GRPO", from_="base", steps=16, pass1=0.95, pass1_ci=(0.8, 0.99))
    merged = rr.upsert(rr.read_records(path), [newer, _record(split="multiple", ood=True)])
    assert [(r.stage, r.split, r.steps) for r in merged] == [("base", "test", 0), ("GRPO", "test", 16),
                                                             ("base", "multiple", 0)]


@pytest.mark.parametrize("change, message", [
    ({"pass1": 1.2}, "'pass1' must be a fraction"),
    ({"pass1_ci": [0.5, 0.6]}, "'pass1_ci' must be an interval"),
    ({"n": 0}, "'n' must be a positive integer"),
    ({"ood": "no"}, "'ood' must be true or false"),
    ({"steps": -1}, "'steps' must be an integer >= 0"),
])
def test_a_bad_record_is_refused_naming_the_file_and_key(tmp_path, change, message):
    raw = {**_record().to_json(), **change}
    path = tmp_path / "r.json"
    path.write_text(json.dumps([raw]))
    with pytest.raises(ConfigError, match=message) as exc:
        rr.read_records(path)
    assert f"{path} record 0" in str(exc.value)


def test_missing_and_unknown_keys_are_named(tmp_path):
    raw = _record().to_json()
    del raw["steps"]
    raw["pass_1"] = 0.3
    path = tmp_path / "r.json"
    path.write_text(json.dumps([raw]))
    with pytest.raises(ConfigError, match=r"missing key 'steps'; unknown key 'pass_1'"):
        rr.read_records(path)


def test_tables_are_generated_and_checked(tmp_path):
    rr.write_records(tmp_path / "results" / "calc.json",
                     [_record(), _record(stage="GRPO", from_="base", steps=8, pass1=0.9, pass1_ci=(0.7, 0.97)),
                      _record(split="multiple", ood=True, pass1=0.1, pass1_ci=(0.02, 0.4))])
    md = tmp_path / "results.md"
    md.write_text("# R\n<!-- results: calc split=test -->\nold\n<!-- /results -->\ntext\n"
                  "<!-- results: calc ood=true -->\n<!-- /results -->\n")
    assert rr.update_tables(md, check=True) == ["calc split=test", "calc ood=true"]
    assert "old" in md.read_text()  # --check changes nothing
    assert rr.update_tables(md) == ["calc split=test", "calc ood=true"]
    text = md.read_text()
    assert "| GRPO | base | 8 | test | 4 | 90.0 [70.0, 97.0] | 50.0 [15.0, 85.0] |" in text
    assert "| base | - | 0 | multiple (OOD) | 4 | 10.0 [2.0, 40.0] |" in text
    assert sum(line.startswith("| base |") for line in text.splitlines()) == 2
    assert "old" not in text and "text\n" in text
    assert rr.update_tables(md, check=True) == []


def test_a_filter_value_with_spaces_is_quoted(tmp_path):
    rr.write_records(tmp_path / "results" / "calc.json",
                     [_record(), _record(split="trained entries", pass1=0.6, pass1_ci=(0.4, 0.8))])
    md = tmp_path / "results.md"
    md.write_text('<!-- results: calc split="trained entries" -->\n<!-- /results -->\n')
    rr.update_tables(md)
    rows = [line for line in md.read_text().splitlines() if line.startswith("| base")]
    assert rows == ["| base | - | 0 | trained entries | 4 | 60.0 [40.0, 80.0] | 50.0 [15.0, 85.0] |"]


def test_a_block_naming_an_unknown_filter_or_nothing_fails(tmp_path):
    rr.write_records(tmp_path / "results" / "calc.json", [_record()])
    md = tmp_path / "results.md"
    md.write_text("<!-- results: calc splitt=test -->\n<!-- /results -->\n")
    with pytest.raises(ConfigError, match="unknown filter 'splitt'"):
        rr.update_tables(md)
    md.write_text("<!-- results: calc split=val -->\n<!-- /results -->\n")
    with pytest.raises(ConfigError, match="no record"):
        rr.update_tables(md)


def test_training_seconds_sum_the_steps_a_resumed_step_once(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "step_time_s": 10.0}, {"step": 2, "step_time_s": 5.0}, {"step": 2, "step_time_s": 7.0},
            {"step": 3, "step_time_s": 1.0}]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rr.training_seconds(metrics, 2) == 17.0
    with pytest.raises(ConfigError, match=r"step\(s\) \[4\]"):
        rr.training_seconds(metrics, 4)


def test_the_cli_records_a_report_then_draws_its_curve(tmp_path, capsys):
    report = tmp_path / "grpo.report.json"
    report.write_text(json.dumps(_report([[1, 1, 1, 0], [1, 1, 1, 1]])))
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": k, "step_time_s": 30.0}) + "\n" for k in range(1, 9)))
    results = tmp_path / "out" / "calc.json"
    args = [str(report), "--results", str(results), "--env", "calc", "--stage", "GRPO step 8", "--from", "base",
            "--split", "test", "--steps", "8", "--command", "bash x.sh", "--train-metrics", str(metrics)]
    assert results_cli.main("record", args) == 0
    (r,) = rr.read_records(results)
    assert (r.stage, r.from_, r.steps, r.train_s, r.pass1) == ("GRPO step 8", "base", 8, 240.0, 0.875)
    assert results_cli.main("curve", [str(results), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert results_cli.main("curve", [str(results), "--out", str(tmp_path / "d.png"), "--env", "nope"]) == 2
    assert "no record matches" in capsys.readouterr().err


def test_the_repositorys_results_tables_match_their_json():
    """docs/results.md's generated tables are what docs/results/*.json say (agent-tune eval tables)."""
    assert rr.update_tables(REPO / "docs" / "results.md", check=True) == []

