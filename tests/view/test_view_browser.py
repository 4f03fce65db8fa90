"""The viewer page in a real browser: the system's chromium, headless, driven by Playwright (nothing downloaded).

On a training run and an eval output written by the real code (``conftest.py``): the page runs without a console
error, shows as many episodes as were recorded, filters by reward and by step, colours a policy token and an env
token by the trajectory's own mask, shows groups without signal, and a served page picks up what a run appends.
Skipped, with the reason, where no chromium or no Playwright is installed (``scripts/install.sh`` installs both).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_tune.rollout.records import append_gzip_record, read_folder, record_files
from agent_tune.testing.browser import chromium, missing_browser
from agent_tune.view.cli import write_page

pytestmark = pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))


def _open(page, path: Path) -> None:
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#app[data-ready='1']", timeout=20_000)


def _count(page) -> int:
    return int(page.get_attribute("#app", "data-episodes"))


def _shown(page, attribute: str) -> list[str]:
    return page.eval_on_selector_all(".ep-row", f"rows => rows.map(r => r.dataset.{attribute})")


def test_training_run_page(tmp_path, synthetic_run):
    out, _ = write_page(synthetic_run.folder, tmp_path / "run.html")
    records = read_folder(synthetic_run.folder / "episodes")
    with chromium() as (page, log):
        _open(page, out)
        assert _count(page) == len(records) == 36
        assert page.locator("#charts .chart").count() >= 3  # reward, acc, groups_with_signal, ...
        page.click("#tabbtn-episodes")
        assert page.inner_text("#ep-count") == "36 episodes"
        # by step: only that step's episodes, as many as were recorded for it
        page.select_option("#f-step", "2")
        assert _count(page) == sum(r["global_steps"] == 2 for r in records)
        assert set(_shown(page, "step")) == {"2"}
        page.select_option("#f-step", "")
        # by reward: only episodes at or above it
        page.fill("#f-rmin", "0.5")
        assert _count(page) == sum(r["reward"] >= 0.5 for r in records) < len(records)
        assert all(float(x) >= 0.5 for x in _shown(page, "reward"))
        page.fill("#f-rmin", "")
        assert _count(page) == 36
        # one episode's tokens: each span's class is the trajectory's mask at that position
        index = next(i for i, r in enumerate(records) if 0 in r["response_mask"] and 1 in r["response_mask"])
        page.click(f".ep-row[data-index='{index}']")
        page.click("#dt-tok")
        page.wait_for_selector("#tokens .tok")
        mask = records[index]["response_mask"]
        first_policy, first_env = mask.index(1), mask.index(0)
        policy = page.locator(f"#tokens [data-i='{first_policy}']")
        env = page.locator(f"#tokens [data-i='{first_env}']")
        assert "tok-policy" in policy.get_attribute("class") and "tok-env" not in policy.get_attribute("class")
        assert "tok-env" in env.get_attribute("class") and "tok-policy" not in env.get_attribute("class")
        classes = page.eval_on_selector_all("#tokens [data-i]",
                                            "s => s.map(x => x.classList.contains('tok-policy') ? 1 : 0)")
        assert classes == mask
        assert page.get_attribute(f"#tokens [data-i='{first_policy}']", "title").startswith(f"#{first_policy} · id ")
        # the conversation: the prompt marked, the policy's messages after it
        page.click("#dt-conv")
        assert page.locator(".msg.policy").count() >= 1 and page.locator("details.prompt-block").count() == 1
        # groups: those without signal are flagged
        page.click("#tabbtn-groups")
        page.select_option("#g-signal", "no")
        flagged = page.eval_on_selector_all(".grp-row", "rows => rows.map(r => r.dataset.signal)")
        assert flagged and set(flagged) == {"0"}
        page.click(".grp-row >> nth=0")
        page.wait_for_selector("#group-title")
        assert page.locator(".card").count() == 4
        page.screenshot(path=str(tmp_path / "training.png"))
    assert (tmp_path / "training.png").stat().st_size > 10_000
    assert log.errors == []


def test_eval_output_page(tmp_path, eval_output):
    out, view = write_page(eval_output, tmp_path / "eval.html")
    with chromium() as (page, log):
        _open(page, out)
        assert _count(page) == len(view.table) == 12
        assert page.locator("#category-bars [data-category='arithmetic']").count() == 1
        assert "pass@2" in page.inner_text("#passk") and "arithmetic" in page.inner_text("#report-text")
        page.click("#tabbtn-episodes")
        page.fill("#f-rmin", "1")
        assert _count(page) == 6 and set(_shown(page, "reward")) == {"1"}
        page.fill("#f-rmin", "")
        page.fill("#f-rmax", "0")
        assert _count(page) == 6 and set(_shown(page, "reward")) == {"0"}
        page.click(".ep-row >> nth=0")
        page.wait_for_selector("#ep-title")
        # the worked examples are in the prompt block, the policy's two generations after it
        assert page.locator("#ep-body > .conversation > .msg.policy").count() == 2
        page.click("#dt-tok")
        segments = page.eval_on_selector_all(".segments .seg", "s => s.map(x => x.className)")
        assert ["tok-policy" in c for c in segments] == [True, False, True]  # no token lists: spans by mask
        page.screenshot(path=str(tmp_path / "eval.png"))
    assert log.errors == []


def test_the_list_at_1400_px_shows_the_columns_that_matter(tmp_path, synthetic_run):
    """At a 1400 px window every column of the list is inside the list pane (advantage, stop reason and format errors
    included), headed; a group id reads the same in Episodes and Groups; the curves' axes are named."""
    import json
    import uuid

    out, _ = write_page(synthetic_run.folder, tmp_path / "run.html")
    ends = """rows => rows.map(r => { const list = r.closest('.vlist').getBoundingClientRect();
        const inner = list.left + r.closest('.vlist').clientWidth;
        return [...r.children].map(c => [c.className, c.getBoundingClientRect().right <= inner + 0.5,
                                        c.getBoundingClientRect().width]); })"""
    with chromium(1400, 900) as (page, log):
        _open(page, out)
        for chart in page.locator("#charts .chart").all():  # the trainer step across, the metric up
            assert chart.locator("svg text.x-label").text_content() == "step"
            assert chart.locator("svg text.y-label").text_content() == chart.get_attribute("data-key")
        page.click("#tabbtn-episodes")
        head = page.eval_on_selector_all("#ep-head span", "s => s.map(x => x.textContent)")
        assert head == ["step", "group/sample", "category", "task", "reward", "acc", "adv", "stop", "fmt"]  # one env
        samples = page.eval_on_selector_all(".ep-row .c-grp", "s => s.map(x => x.lastChild.textContent)")
        assert samples[:4] == ["/0", "/1", "/2", "/3"]  # the sample number shows, whatever the id's length
        for row in page.eval_on_selector_all(".ep-row", ends):
            assert [cls for cls, inside, _ in row] == ["c-step", "c-grp", "c-env", "c-task", "c-rew", "c-acc", "c-adv",
                                                       "c-stop", "c-fmt"]
            assert all(inside for _, inside, _ in row), row  # none clipped by the pane
            assert all(width >= 20 for _, _, width in row), row
        stops = page.eval_on_selector_all(".ep-row .c-stop",
                                          "s => s.map(x => [x.textContent, x.scrollWidth <= x.clientWidth])")
        assert ("token_budget", True) in {tuple(x) for x in stops}  # the longest stop reason reads whole
        first = page.locator(".ep-row >> nth=0")
        label = first.locator(".c-grp .gid").text_content()
        page.click("#tabbtn-groups")
        assert label in page.eval_on_selector_all(".grp-row .c-grp", "s => s.map(x => x.textContent)")
        for row in page.eval_on_selector_all(".grp-row", ends):
            assert all(inside for _, inside, _ in row), row
        page.click(".grp-row >> nth=0")
        page.screenshot(path=str(tmp_path / "groups-1400.png"))
        page.click("#tabbtn-episodes")
        page.click(".ep-row >> nth=1")
        page.screenshot(path=str(tmp_path / "episodes-1400.png"))
        page.click("#tabbtn-curves")
        page.screenshot(path=str(tmp_path / "curves-1400.png"))
    assert log.errors == [] and (tmp_path / "episodes-1400.png").stat().st_size > 10_000
    # verl's uid (32 hex digits): cut to its first 8, the same in both lists and in the titles
    uid = uuid.uuid4().hex
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "episodes-1.jsonl").write_text("".join(
        json.dumps({"reward": float(k), "global_steps": 1, "group": uid, "sample": k, "stop_reason": "done",
                    "segments": [{"who": "policy", "tokens": 1, "text": "x"}]}) + "\n" for k in range(2)))
    out, _ = write_page(tmp_path / "rec", tmp_path / "rec.html")
    with chromium(1400, 900) as (page, log):
        _open(page, out)
        page.click("#tabbtn-episodes")
        assert page.eval_on_selector_all(".ep-row .c-grp", "s => s.map(x => x.textContent)") == [uid[:8] + "/0",
                                                                                                    uid[:8] + "/1"]
        assert page.get_attribute(".ep-row .c-grp >> nth=0", "title") == uid
        page.click(".ep-row >> nth=0")
        assert f"group {uid[:8]} " in page.inner_text("#ep-title") + " "
        page.click("#tabbtn-groups")
        assert page.text_content(".grp-row .c-grp") == uid[:8]
        page.click(".grp-row >> nth=0")
        assert page.inner_text("#group-title").startswith(f"group {uid[:8]} · step 1")
    assert log.errors == []


@pytest.mark.slow
def test_a_served_page_follows_the_run(served_run):
    server, run = served_run
    with chromium() as (page, log):
        page.goto(server.url)
        page.wait_for_selector("#app[data-ready='1']")
        assert _count(page) == 36
        new = {**read_folder(run / "episodes")[0], "global_steps": 4, "group": "later", "reward": 0.25}
        append_gzip_record(record_files(run / "episodes")[0], new)
        page.wait_for_function("document.querySelector('#app').dataset.episodes === '37'", timeout=15_000)
        page.click("#tabbtn-episodes")
        page.select_option("#f-step", "4")
        assert _count(page) == 1 and _shown(page, "reward") == ["0.25"]
    assert log.errors == []
