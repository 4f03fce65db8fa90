"""``agent-tune view`` without a browser: what each kind of path reads as, the episode table, the page's embedded
data, the command, and the server a page polls."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agent_tune.rollout.records import read_folder
from agent_tune.view.page import View, render_page
from agent_tune.view.sources import (
    CurriculumFolder,
    DumpFolder,
    EvalOutput,
    Origin,
    RunFolder,
    ViewSourceError,
    open_source,
)
from agent_tune.view.table import COLUMNS, EpisodeTable, summary_row, task_label

REPO = Path(__file__).resolve().parents[2]


def page_data(html: str) -> tuple[dict, list, list, list[dict]]:
    """(meta, summary rows, shared prompt messages, details) as the page embeds them."""
    def script(name: str) -> str:
        return re.search(rf'<script type="application/(?:json|octet-stream)" id="{name}">(.*?)</script>', html,
                         re.S).group(1)
    lines = gzip.decompress(base64.b64decode(script("details"))).decode("utf-8").split("\n")
    return (json.loads(script("meta")), json.loads(script("summary")), json.loads(lines[0]),
            [json.loads(line) for line in lines[1:]])


def col(row: list, name: str):
    return row[COLUMNS.index(name)]


def test_a_training_run_shows_its_curves_and_every_recorded_episode(synthetic_run):
    source = open_source(synthetic_run.folder)
    assert isinstance(source, RunFolder) and source.kind == "train"
    view = View(source)
    records = read_folder(synthetic_run.folder / "episodes")
    assert len(view.table) == len(records) == synthetic_run.episodes == 36
    meta, rows, shared, details = page_data(render_page(view))
    assert meta["kind"] == "train" and len(rows) == len(details) == 36
    assert [r["step"] for r in meta["curves"]["rows"]] == [1, 2, 3]
    assert {"reward", "acc", "groups_with_signal"} <= set(meta["curves"]["rows"][0])
    # rows follow the records; groups are the agent loop's (one uid per prompt and step), samples numbered
    for row, rec in zip(rows, records):
        assert col(row, "step") == rec["global_steps"] and col(row, "group") == rec["group"]
        assert col(row, "reward") == rec["reward"] and col(row, "sample") == rec["sample"]
        assert col(row, "tok") == 1 and col(row, "task").startswith("multi_turn_")
    # every episode of a task repeats its prompt: kept once
    assert len(shared) < sum(len(d["prompt"]) for d in details)
    first, rec = details[0], records[0]
    prompt = [shared[k] for k in first["prompt"]]
    assert [(m["role"], m["content"]) for m in prompt] == [
        (m["role"], m["content"]) for m in rec["messages"][:rec["prompt_messages"]]]
    assert [m["content"] for m in first["messages"]] == [m["content"] for m in rec["messages"][rec["prompt_messages"]:]]
    assert first["tokens"]["mask"] == rec["response_mask"] and first["tokens"]["ids"] == rec["response_ids"]
    assert first["tokens"]["prompt_len"] == rec["prompt_tokens"]


def test_assistant_calls_are_decoded_with_the_runs_parser(synthetic_run):
    view = View(open_source(synthetic_run.folder))
    _, rows, shared, details = page_data(render_page(view))
    generated = [m for d in details for m in d.get("messages", []) if m["role"] == "assistant"]
    decoded = [m for m in generated if m.get("calls")]
    assert decoded and all({"name", "arguments"} <= set(c) for m in decoded for c in m["calls"])
    malformed = [m for m in generated if m.get("call_errors")]
    assert malformed and all("calls" not in m for m in malformed)  # the synthetic run's malformed samples
    examples = [m for m in shared if m["role"] == "assistant"]
    assert any(m.get("calls") for m in examples)  # the worked example's calls are decoded too (shown as prompt)


def test_a_curriculum_puts_its_stages_on_one_step_axis(synthetic_curriculum):
    folder, runs = synthetic_curriculum
    source = open_source(folder)
    assert isinstance(source, CurriculumFolder)
    view = View(source)
    meta = view.meta()
    assert meta["curves"]["stages"] == [{"name": "syntax", "first": 1, "last": 2},
                                        {"name": "base", "first": 3, "last": 4}]
    assert [(r["stage"], r["step"]) for r in meta["curves"]["rows"]] == [("syntax", 1), ("syntax", 2), ("base", 3),
                                                                         ("base", 4)]
    steps = {(col(r, "stage"), col(r, "step")) for r in view.table.rows}
    assert steps == {("syntax", 1), ("syntax", 2), ("base", 3), ("base", 4)}
    assert all(col(r, "group").startswith(col(r, "stage") + "/") for r in view.table.rows)
    assert all(col(r, "tok") == 0 for r in view.table.rows)  # tokens_every=0: segments only
    # a stage's own folder is a training run
    assert isinstance(open_source(folder / "base"), RunFolder)


def test_an_eval_output_shows_its_records_and_report(eval_output):
    source = open_source(eval_output)
    assert isinstance(source, EvalOutput)
    view = View(source)
    assert len(view.table) == 12  # 6 tasks x 2 samples
    meta, rows, shared, details = page_data(render_page(view))
    assert meta["kind"] == "eval" and meta["report"]["summary"]["categories"]["arithmetic"]["accuracy"] == 0.5
    assert "pass@2" in meta["report"]["text"] and "arithmetic" in meta["report"]["text"]
    assert {col(r, "acc") for r in rows} == {0.0, 1.0} and all(col(r, "step") is None for r in rows)
    assert {col(r, "group") for r in rows} == {f"test-{i}" for i in range(6)}
    assert all(col(r, "env") == "examples.envs.calculator:CalculatorEnv" for r in rows)
    # the prompt's worked examples are prompt; the policy's two generations follow it
    for d in details:
        assert [m["role"] for m in d["messages"]] == ["assistant", "tool", "assistant"]
        assert sum(shared[k]["role"] == "assistant" for k in d["prompt"]) == 6
        assert [s[0] for s in d["segments"]] == [1, 0, 1]
        assert d["extras"]["accuracy"] in (0.0, 1.0) and d["extras"]["test_id"].startswith("test-")


def test_a_rollout_dump_and_an_old_record_without_the_conversation(tmp_path, synthetic_run):
    records = read_folder(synthetic_run.folder / "episodes")[:3]
    for k, rec in enumerate(records):  # the rollout-only mode's layout: step_<N>/rollouts-<pid>.jsonl
        path = tmp_path / "dump" / f"step_{rec['global_steps']}" / "rollouts-7.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps({**rec, "uid": rec["group"], "index": k, "sample_record": {"x": 1}}) + "\n")
    source = open_source(tmp_path / "dump")
    assert isinstance(source, DumpFolder)
    assert len(View(source).table) == 3
    old = {k: v for k, v in records[0].items() if k not in ("messages", "prompt_messages", "response_ids")}
    (tmp_path / "old.jsonl").write_text(json.dumps(old) + "\n")
    _, rows, _, [detail] = page_data(render_page(View(open_source(tmp_path / "old.jsonl"))))
    assert "messages" not in detail and detail["prompt_text"] == old["prompt"] and detail["segments"]
    assert col(rows[0], "tok") == 0


def test_nothing_to_show_is_named(tmp_path):
    with pytest.raises(ViewSourceError, match="no such file"):
        open_source(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewSourceError, match="not a training run folder"):
        open_source(tmp_path / "empty")


def test_no_text_in_the_data_can_break_out_of_the_page(tmp_path):
    hostile = "</script><script>window.pwned = 1</script> {{JS}} <!--"
    record = {"reward": 1.0, "global_steps": 1, "group": hostile, "task": hostile, "stop_reason": "done",
              "messages": [{"role": "user", "content": hostile}, {"role": "assistant", "content": hostile}],
              "prompt_messages": 1, "segments": [{"who": "policy", "tokens": 1, "text": hostile}], "info": {}}
    (tmp_path / "episodes-1.jsonl").write_text(json.dumps(record) + "\n")
    page = render_page(View(open_source(tmp_path)))
    assert "</script><script>window.pwned" not in page and "<!--" not in page  # only ever escaped
    assert page.count("<script") == 4 and page.count("</script>") == 4
    _, rows, shared, [detail] = page_data(page)
    assert col(rows[0], "group") == hostile and shared[0]["content"] == hostile


def test_summary_rows_read_every_format():
    train = {"global_steps": 3, "group": "u1", "sample": 2, "env": "bfcl", "task": 'bfcl:{"test_id": "t9"}',
             "reward": 0.5, "metrics": {"acc": 0.0, "format_errors": 2.0, "num_generations": 3.0},
             "stop_reason": "token_budget", "response_tokens": 40, "info": {"category": "base"}}
    row = dict(zip(COLUMNS, summary_row(train, Origin("train", "stage1", step_offset=10))))
    assert row == {"step": 13, "stage": "stage1", "group": "stage1/u1", "sample": 2, "env": "bfcl",
                   "category": "base", "task": "t9", "reward": 0.5, "acc": 0.0, "stop": "token_budget", "fmt": 2.0,
                   "gens": 3.0, "tokens": 40.0, "tok": 0, "adv": None}
    evaluated = {"test_id": "multi_turn_base_1", "sample": 1, "category": "multi_turn_base", "accuracy": 1.0,
                 "reward": 1.0, "stop_reason": "done", "format_errors": 0, "num_generations": 4, "tokens_generated": 9}
    row = dict(zip(COLUMNS, summary_row(evaluated, Origin("eval", env="bfcl"))))
    assert row["group"] == row["task"] == "multi_turn_base_1" and row["step"] is None and row["acc"] == 1.0
    assert row["env"] == "bfcl" and row["tokens"] == 9.0
    dump = {"global_steps": 2, "index": 5, "reward": 0.0, "info": {}}  # no group, no uid: step and row
    assert dict(zip(COLUMNS, summary_row(dump, Origin("dump"))))["group"] == "2:5"
    # the task's id first (what the list shows and the task filter matches), never the worked examples' JSON
    assert task_label('tau2:{"domain": "airline", "task_id": "3"}') == "3 · domain=airline"
    main_job = 'bfcl:{"shots": ["multi_turn_base_199", "multi_turn_base_198"], "test_id": "multi_turn_base_5"}'
    assert task_label(main_job) == "multi_turn_base_5"
    assert task_label('bfcl:{"seed": 0, "shots": 3}:{"test_id": "multi_turn_long_context_2"}') == \
        "multi_turn_long_context_2 · seed=0 · shots=3"  # a catalogue row: the env's kwargs, then the task's
    assert task_label('x:{"a": 1, "b": 2}') == 'x:{"a": 1, "b": 2}' and task_label("x:{bad") == "x:{bad"
    assert task_label("index:4") == "index:4"


def test_an_unknown_parser_shows_calls_as_text():
    table = EpisodeTable("no-such-parser")
    table.add({"reward": 0.0, "messages": [{"role": "assistant", "content": "<tool_call>x</tool_call>"}],
               "prompt_messages": 0}, Origin("dump"))
    assert json.loads(table.details[0])["messages"] == [{"role": "assistant", "content": "<tool_call>x</tool_call>"}]


def test_the_command_writes_one_self_contained_file(tmp_path, synthetic_run):
    run = tmp_path / "run"
    shutil.copytree(synthetic_run.folder, run)
    result = subprocess.run([sys.executable, "-m", "agent_tune.cli", "view", str(run)], capture_output=True,
                            text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    page = (run / "view.html").read_text()
    assert f"wrote {run / 'view.html'} (36 episodes" in result.stdout
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing loaded from elsewhere
    assert "<link" not in page and "import(" not in page
    bad = subprocess.run([sys.executable, "-m", "agent_tune.cli", "view", str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 1 and "no such file or folder" in bad.stderr


def test_the_server_hands_a_polling_page_what_the_run_added(served_run):
    from agent_tune.rollout.records import append_gzip_record, record_files

    server, run = served_run
    page = urllib.request.urlopen(server.url, timeout=10).read().decode()
    meta, rows, shared, _ = page_data(page)
    assert meta["live"] is True and len(rows) == 36
    url = f"{server.url}updates?rows={len(rows)}&shared={len(shared)}"
    assert json.loads(urllib.request.urlopen(url, timeout=10).read())["rows"] == []
    extra = {**read_folder(run / "episodes")[0], "global_steps": 4, "group": "new-group", "reward": 0.75}
    append_gzip_record(record_files(run / "episodes")[0], extra)
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 4, "reward": 0.75}) + "\n")
    update = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert [(col(r, "step"), col(r, "group"), col(r, "reward")) for r in update["rows"]] == [(4, "new-group", 0.75)]
    assert len(update["details"]) == 1 and update["shared"] == []  # its prompt was known already
    assert [r["step"] for r in update["curves"]["rows"] if not r.get("val")] == [1, 2, 3, 4]
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{server.url}nothing", timeout=10)


def _run_with_saved_config(folder: Path, synthetic_run, old_format: bool = False) -> Path:
    """A copy of the synthetic run with the config its training child ran saved beside it, as the launcher saves
    it (``old_format``: absolute paths, as launchers before paths were saved relative wrote it)."""
    from agent_tune.utils.run_paths import save_run_config

    shutil.copytree(synthetic_run.folder, folder)
    config = OmegaConf.create({"trainer": {"default_local_dir": str(folder)},
                               "agent_tune": {"tool_parser": "hermes", "episodes": {"dir": str(folder / "episodes")},
                                              "metrics_file": str(folder / "metrics.jsonl")}})
    if old_format:
        OmegaConf.save(config, folder / "train_config.yaml")
    else:
        save_run_config(config, folder / "train_config.yaml")
    return folder


@pytest.mark.parametrize("old_format", [False, True])
def test_a_copied_run_folder_shows_all_its_episodes(tmp_path, synthetic_run, old_format):
    original = _run_with_saved_config(tmp_path / "cluster" / "run", synthetic_run, old_format)
    copy = tmp_path / "laptop" / "run"
    shutil.copytree(original, copy)
    shutil.rmtree(original)  # the absolute path saved in the run is gone
    view = View(open_source(copy))
    assert len(view.table) == synthetic_run.episodes == 36
    assert view.source.episodes.resolve() == (copy / "episodes").resolve()
    assert len(view.meta()["curves"]["rows"]) == 3


def test_a_run_without_episodes_says_where_it_looked(tmp_path, synthetic_run):
    run = _run_with_saved_config(tmp_path / "run", synthetic_run)
    shutil.rmtree(run / "episodes")
    result = subprocess.run([sys.executable, "-m", "agent_tune.cli", "view", str(run)], capture_output=True,
                            text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0 and "(0 episodes" in result.stdout  # the curves are still worth a page
    [line] = result.stderr.strip().splitlines()
    assert line == f"agent-tune view: no episodes in {run.resolve() / 'episodes'} (no such folder)"
    (run / "episodes").mkdir()
    assert open_source(run).none_found().endswith("no episodes-*.jsonl.gz in it yet: the run has not finished "
                                                  "an episode)")
    config = OmegaConf.load(run / "train_config.yaml")
    config.agent_tune.episodes.enable = False
    OmegaConf.save(config, run / "train_config.yaml")
    assert open_source(run).none_found().endswith("(the run recorded none: agent_tune.episodes.enable=false in its "
                                                  "train_config.yaml)")


def test_a_file_that_is_not_episode_records_is_refused_naming_what_it_is(tmp_path):
    row = {"data_source": "bfcl", "agent_name": "agent_tune", "prompt": [{"role": "user", "content": "hi"}],
           "reward_model": {"ground_truth": ""}, "extra_info": {"index": 0, "env": {"name": "bfcl", "kwargs": {}}}}
    rows = tmp_path / "train.jsonl"
    rows.write_text("\n".join(json.dumps(row) for _ in range(400)) + "\n")
    with pytest.raises(ViewSourceError, match=r"train.jsonl: this is a training-data file \(rows with "
                       r"prompt/extra_info\), not episode records; view a run folder, an eval output or a dump"):
        open_source(rows)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{k: json.dumps(v) for k, v in row.items()}]), tmp_path / "train.parquet")
    with pytest.raises(ViewSourceError, match=r"train.parquet: this is a training-data file"):
        open_source(tmp_path / "train.parquet")
    (tmp_path / "other.jsonl").write_text(json.dumps({"input": "q", "output": "a", "score": 1.0}) + "\n")
    with pytest.raises(ViewSourceError, match=r"not a file of episode records \(its first row's keys: input, "
                       r"output, score\)"):
        open_source(tmp_path / "other.jsonl")
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(ViewSourceError, match=r"notes.txt: this is not a file of episode records \(not JSON lines\)"):
        open_source(tmp_path / "notes.txt")
    bad = subprocess.run([sys.executable, "-m", "agent_tune.cli", "view", str(rows)], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "training-data file" in bad.stderr
    assert not (tmp_path / "train.view.html").exists()
