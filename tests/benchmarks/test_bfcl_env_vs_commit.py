"""``benchmarks/bfcl_env_vs_commit.py``: ``bfcl_env.py``'s table read back, a revision git does not know refused by
name, a commit without the benchmark refused, the median's interval, and a whole (short) comparison of this tree with
``HEAD``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bfcl_env_vs_commit as vs

REPO = Path(__file__).resolve().parents[2]

TABLE = """ground-truth replay, 50 entries per category, best of 20 (episodes/s)
category                     bfcl-eval  agent-tune  speed-up
multi_turn_base                 1686.3      9259.2     5.49x
multi_turn_long_context         1236.7      5731.3     4.63x
all                             1515.4      7769.2     5.13x
(both paths score every episode correct; bfcl-eval's path starts from decoded call strings,
"""


def test_speed_ups_reads_every_row_of_the_table() -> None:
    assert vs.speed_ups(TABLE) == {"multi_turn_base": 5.49, "multi_turn_long_context": 4.63, "all": 5.13}


def test_speed_ups_without_the_table_says_so() -> None:
    with pytest.raises(ValueError, match="no 'benchmarks/bfcl_env.py' table"):
        vs.speed_ups("Traceback (most recent call last):\n  ...")


def test_the_medians_interval_is_the_widest_order_statistics_pair_covering_95_percent() -> None:
    assert vs.median_interval([5.0, 1.0, 4.0, 2.0, 3.0]) is None  # 5 values: at most 93.75%
    assert vs.median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)  # 96.9%
    assert vs.median_interval([float(x) for x in range(15)]) == (3.0, 11.0)  # x(4), x(12): 96.5%; x(5), x(11) 88%


def test_an_unknown_revision_is_refused_by_name() -> None:
    with pytest.raises(SystemExit, match="'no-such-rev-41' is not a commit"):
        vs.resolve("no-such-rev-41")


def test_a_commit_without_the_benchmark_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head = vs.resolve("HEAD")
    tree = vs.check_out(head, tmp_path)  # HEAD has it: the tree is written, git's state untouched
    assert (tree / vs.BENCHMARK).is_file() and (tree / "agent_tune" / "envs" / "base.py").is_file()
    monkeypatch.setattr(vs, "BENCHMARK", "benchmarks/no_such_benchmark.py")
    with pytest.raises(SystemExit, match="has no benchmarks/no_such_benchmark.py"):
        vs.check_out(head, tmp_path / "again")


def test_a_folder_holding_a_tree_is_compared_under_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy without git's history (another machine) compares with a tree extracted beside it, named after its
    commit; the path this process was given stays on the runs' path, after the tree's own."""
    head = vs.resolve("HEAD")
    tree = vs.check_out(head, tmp_path / "x").rename(tmp_path / head)
    assert vs.other_tree(str(tree), tmp_path / "unused") == (head, tree.resolve())
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="has no benchmarks/bfcl_env.py"):
        vs.other_tree(str(tmp_path / "empty"), tmp_path / "unused")
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    assert vs._env(tree)["PYTHONPATH"].split(":") == [str(tree), "/opt/site"]
    monkeypatch.delenv("PYTHONPATH")
    assert vs._env(tree)["PYTHONPATH"] == str(tree)


def test_this_tree_is_dirty_only_for_a_change_to_what_the_benchmark_runs(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True, timeout=60)

    for path in ("agent_tune/envs.py", "benchmarks/bfcl_env.py", "docs/bfcl.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("v1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "one")
    monkeypatch.setattr(vs, "REPO", tmp_path)
    head = vs.resolve("HEAD")
    (tmp_path / "docs/bfcl.md").write_text("v2\n")
    assert vs.this_commit() == head  # the docs are not measured
    (tmp_path / "agent_tune/envs.py").write_text("v2\n")
    assert vs.this_commit() == head + "+dirty"


def test_this_tree_against_head_prints_the_quotients(tmp_path: Path) -> None:
    out = tmp_path / "vs.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bfcl_env_vs_commit.py", "HEAD", "--rounds", "1", "--repeats", "1",
         "--per-category", "2", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "round 1/1" in proc.stdout and "quotient" in proc.stdout
    record = json.loads(out.read_text())
    head = vs.resolve("HEAD")
    assert record["commit"] == head and set(record["medians"]) == {"this_tree", head}
    assert record["this_tree"].startswith(head) and record["machine"]["python"] == sys.version.split()[0]
    assert record["quotients"]["all"]["interval_95"] is None  # one round: no interval
    assert record["quotients"]["all"]["per_round"] == [
        record["runs"]["this_tree"][0]["all"] / record["runs"][head][0]["all"]]
    for medians in record["medians"].values():  # both trees' benchmarks ran and scored every category
        assert set(medians) == {"multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                "multi_turn_long_context", "all"}
        assert all(v > 0 for v in medians.values())
