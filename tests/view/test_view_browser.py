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
