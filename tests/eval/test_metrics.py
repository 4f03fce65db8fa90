"""pass@k and the report's aggregation rules."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from agent_tune.eval.metrics import first_and_any_of_k, k_values_for, pass_at_k, summarize, wilson_interval


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of k-subsets of n samples (c correct) holding at least one correct sample."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_known_values():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    # stable for large n where the binomials would overflow floats
    assert 0.0 < pass_at_k(2000, 1, 10) < 1.0
    assert pass_at_k(2000, 1, 10) == pytest.approx(10 / 2000)


def test_pass_at_k_rejects_bad_input():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(0, 0, 1)


def rec(test_id, acc, sample=0, **kw):
    cat = test_id.rsplit("_", 1)[0]
    base = {"test_id": test_id, "category": cat, "sample": sample, "accuracy": acc, "progress": acc,
            "format_errors": 0, "num_steps": 2, "turns_completed": 1, "tokens_generated": 10}
    base.update(kw)
    return base


def test_overall_is_unweighted_mean_of_categories():
    records = [rec("multi_turn_base_0", 1.0), rec("multi_turn_base_1", 1.0), rec("multi_turn_base_2", 0.0),
               rec("multi_turn_miss_func_0", 0.0),
               rec("multi_turn_miss_param_0", 1.0),
               rec("multi_turn_long_context_0", 0.0), rec("multi_turn_long_context_1", 1.0)]
    s = summarize(records, env="bfcl")
    cats = s["categories"]
    assert cats["multi_turn_base"]["accuracy"] == pytest.approx(2 / 3)
    assert s["overall"]["multi_turn_accuracy"] == pytest.approx((2 / 3 + 0 + 1 + 0.5) / 4)
    assert s["overall"]["accuracy"] == pytest.approx(4 / 7)  # entry-weighted, reported separately
    assert s["overall"]["complete_leaderboard"] is True
    assert list(cats) == sorted(cats)  # name order, whatever order the episodes finished in


def test_samples_give_pass_at_k_and_format_rates():
    records = [
        rec("multi_turn_base_0", a, sample=i, format_errors=f)
        for i, (a, f) in enumerate([(1.0, 0), (0.0, 2), (0.0, 0), (0.0, 0)])
    ]
    records += [rec("multi_turn_base_1", 0.0, sample=i) for i in range(4)]
    s = summarize(records, env="bfcl")
    base = s["categories"]["multi_turn_base"]
    assert s["k"] == [1, 2, 4] == k_values_for(4)
    assert base["pass@1"] == pytest.approx((0.25 + 0) / 2)
    assert base["pass@2"] == pytest.approx((pass_at_k(4, 1, 2) + 0) / 2)
    assert base["pass@4"] == pytest.approx(0.5)
    assert base["format_error_rate"] == pytest.approx(2 / 16)
    assert base["episodes_with_format_errors"] == pytest.approx(1 / 8)
    assert s["overall"]["complete_leaderboard"] is False


def test_leaderboard_summaries_follow_bfcl_aggregation():
    """bfcl-eval's generate_leaderboard_csv: simple = mean of the simple_* categories; non-live = unweighted
    mean of simple, multiple, parallel, parallel_multiple; live = entry-weighted; irrelevance = mean of the
    two irrelevance categories; overall = 10/10/10/30 (/40 agentic) weighted."""
    records = [rec("simple_python_0", 1.0), rec("simple_python_1", 0.0),  # 0.5
               rec("simple_java_0", 1.0),  # 1.0
               rec("multiple_0", 1.0),
               rec("parallel_0", 0.0),
               rec("parallel_multiple_0", 1.0), rec("parallel_multiple_1", 1.0),
               rec("irrelevance_0", 1.0),
               rec("live_simple_0-0-0", 1.0), rec("live_simple_1-1-0", 1.0), rec("live_simple_2-2-0", 0.0),
               rec("live_multiple_0-0-0", 0.0),
               rec("live_irrelevance_0-0-0", 0.0),
               rec("live_relevance_0-0-0", 1.0),
               rec("multi_turn_base_0", 1.0), rec("multi_turn_miss_func_0", 0.0)]
    s = summarize(records, env="bfcl")["summaries"]
    assert s["simple"]["accuracy"] == pytest.approx(0.75) and not s["simple"]["complete"]  # no javascript
    assert s["non_live"]["accuracy"] == pytest.approx((0.75 + 1.0 + 0.0 + 1.0) / 4)
    assert s["live"]["accuracy"] == pytest.approx(2 / 4)  # weighted: (2/3 * 3 + 0 * 1) / 4, not (2/3 + 0) / 2
    assert s["irrelevance"]["accuracy"] == pytest.approx(0.5) and s["irrelevance"]["complete"]
    assert s["relevance"]["accuracy"] == 1.0
    assert s["multi_turn"]["accuracy"] == pytest.approx(0.5) and not s["multi_turn"]["complete"]
    expected = (10 * s["non_live"]["accuracy"] + 10 * 0.5 + 10 * 0.5 + 30 * 0.5) / 60
    assert s["overall"]["accuracy"] == pytest.approx(expected)
    assert s["overall"]["categories"] == ["non_live", "live", "irrelevance", "multi_turn"]
    assert not s["overall"]["complete"]  # agentic is never run


def test_multi_turn_only_report_has_no_single_turn_summaries():
    s = summarize([rec("multi_turn_base_0", 1.0)], env="bfcl")["summaries"]
    assert set(s) == {"multi_turn", "overall"}


def test_first_sample_and_any_of_k_in_the_pipelines_shape(tmp_path):
    """pass@1 is the first sample's success (not the mean over samples), pass@k any success among the k."""
    from agent_tune.eval.report import format_table, write_first_and_any

    def tau2(task, domain, accs):
        return [{**rec(task, a, sample=i), "category": domain} for i, a in enumerate(accs)]

    records = (tau2("tau2/airline/0", "airline", [0.0, 1.0, 0.0, 0.0]) + tau2("tau2/airline/1", "airline", [1.0] * 4)
               + tau2("tau2/retail/0", "retail", [1.0, 0.0, 0.0, 0.0]) + tau2("tau2/retail/1", "retail", [0.0] * 4))
    report = first_and_any_of_k(reversed(records))  # in whatever order the episodes finished
    assert report["k"] == 4 and "not pass^k" in report["metric_note"]
    drop = {"ci95"}
    assert {k: v for k, v in report["summary"].items() if k not in drop} == {"total": 4, "pass_at_1": 0.5,
                                                                            "pass_at_4": 0.75}
    assert {d: {k: v for k, v in r.items() if k not in drop} for d, r in report["by_domain"].items()} == {
        "airline": {"total": 2, "pass_at_1": 0.5, "pass_at_4": 1.0},
        "retail": {"total": 2, "pass_at_1": 0.5, "pass_at_4": 0.5}}
    # Wilson, N = 4 entries: 2/4 -> 0.5 +- 0.35 (hand-computed: center 0.5, half-width 0.3500)
    assert report["summary"]["ci95"]["pass_at_1"] == pytest.approx([0.1500, 0.8500], abs=1e-4)
    s = summarize(records)
    assert s["first_and_any_of_k"] == report
    assert s["categories"]["airline"]["pass@1"] == pytest.approx((0.25 + 1.0) / 2)  # the estimator differs
    table = format_table(s)
    assert "pass@1 (first sample) / pass@4 (any of 4)" in table and "airline: 50.0 [" in table
    assert "all entries: 50.0 [15.0, 85.0] / 75.0 [30.1, 95.4] (4 entries)" in table
    doc = json.loads(write_first_and_any({**s, "source": "x.jsonl", "settings": {"n": 4}}, tmp_path / "p.json")
                     .read_text())
    assert doc["summary"]["pass_at_4"] == 0.75 and doc["by_domain"]["retail"]["pass_at_1"] == 0.5
    assert doc["settings"] == {"n": 4}
    assert doc["summary"]["ci95"]["pass_at_4"] == pytest.approx([0.3006, 0.9544], abs=1e-4)


def test_wilson_interval_hand_computed_values():
    """(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z = 1.96: values worked by hand."""
    assert wilson_interval(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # 0 of 10 still has a width
    assert wilson_interval(1.0, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0.5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0.2, 40) == pytest.approx((0.1050, 0.3476), abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(0.5, 0)
    with pytest.raises(ValueError):
        wilson_interval(1.5, 10)


def test_summary_gives_every_pass_at_k_an_interval_per_category_and_overall():
    records = [rec(f"a_{i}", 1.0 if i < 2 else 0.0, sample=k) for i in range(10) for k in range(4)]
    records += [rec(f"b_{i}", float(k == 0), sample=k) for i in range(5) for k in range(4)]
    s = summarize(records)
    assert s["k"] == [1, 2, 4]
    a = s["categories"]["a"]
    assert a["pass@1"] == pytest.approx(0.2) and a["ci95"]["pass@1"] == pytest.approx([0.0567, 0.5098], abs=1e-4)
    assert set(a["ci95"]) == {"accuracy", "pass@1", "pass@2", "pass@4"}
    b = s["categories"]["b"]  # 1 of 4 samples right in every entry: pass@4 = 1, its interval still open below
    assert b["pass@4"] == pytest.approx(1.0) and b["ci95"]["pass@4"] == pytest.approx([0.5655, 1.0], abs=1e-4)
    overall = s["overall"]  # N = 15 entries, mean of the per-entry values (0.2*10 + 0.25*5)/15
    assert overall["ci95"]["pass@1"] == pytest.approx(list(wilson_interval(3.25 / 15, 15)))


def test_stage_table_rows_are_stages_with_pass_at_1_and_k_and_intervals_per_category():
    from agent_tune.eval.report import stage_table

    def stage(right):  # 4 samples of entries a_0..a_4 and b_0..b_4; `right` entries of each right in every sample
        return summarize([rec(f"{c}_{i}", float(i < right), sample=k) for c in "ab" for i in range(5)
                          for k in range(4)])

    table = stage_table([stage(0), stage(5)], ["base", "SFT"]).splitlines()
    assert table[0] == ("| stage | all pass@1 (N=10) | all pass@4 (N=10) | a pass@1 (N=5) | a pass@4 (N=5) "
                        "| b pass@1 (N=5) | b pass@4 (N=5) |")
    assert table[2].startswith("| base | 0.0 [0.0, 27.8] | 0.0 [0.0, 27.8] | 0.0 [0.0, 43.4] |")
    assert table[3].startswith("| SFT | 100.0 [72.2, 100.0] |")
    with pytest.raises(ValueError):
        stage_table([stage(0)], ["a", "b"])


def test_mixed_ids_keep_the_entries_a_grpo_group_learns_from(tmp_path):
    from agent_tune.eval.cli import main
    from agent_tune.eval.metrics import mixed_ids

    records = [{"test_id": t, "accuracy": a} for t, a in
               [("all", 1.0), ("all", 1.0), ("none", 0.0), ("none", 0.5), ("mixed", 0.0), ("mixed", 1.0),
                ("late", 0.0), ("late", 1.0)]]
    assert mixed_ids(records) == ["mixed", "late"]  # partial credit (0.5) is not right, as pass@k counts
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps({**r, "sample": i, "category": "c"}) + "\n" for i, r in enumerate(records)))
    assert main(["report", str(results), "--mixed-ids", str(tmp_path / "ids.txt")]) == 0
    assert (tmp_path / "ids.txt").read_text() == "mixed\nlate\n"
