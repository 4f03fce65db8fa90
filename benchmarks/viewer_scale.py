"""``agent-tune view`` at scale: a 10,000-episode run against a 1,000-episode one, opened in headless chromium.

Both runs are written like the viewer tests' (``agent_tune/testing/synthetic_run.py``): BFCL multi-turn episodes (1
worked example per prompt, ``progress`` reward) played by the one runner with scripted samples, recorded by the
agent loop's own recording functions with the default token sample (``tokens_every=8``), the launcher's
``metrics.jsonl``; SmolLM2's tokenizer and template. Sizes: ``--small`` episodes (steps x 10 groups x 4 samples)
and ``--large`` (x 20 groups x 4 samples).

Printed per run, and the ratio large / small: the page's build time (``agent_tune.view.cli.write_page``) and HTML
size; in chromium (the system's, through Playwright: ``agent_tune.testing.browser``), the time from navigation to
the first painted list (``data-render-ms``) and to the episode details being decompressed
(``data-details-ms``), the time to filter (a reward threshold, a step; median of ``--repeats``, the handler and a
forced layout) and to open one episode (click to its conversation shown).

    python benchmarks/viewer_scale.py [--small 1000] [--large 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tune.envs.bfcl.multi_turn.data import ensure_bfcl_project_root  # noqa: E402
from agent_tune.launch.step_metrics import StepMetricsWriter  # noqa: E402
from agent_tune.testing.browser import chromium, missing_browser  # noqa: E402
from agent_tune.testing.renderers import smollm2_renderer  # noqa: E402
from agent_tune.testing.synthetic_run import RunWriters, write_synthetic_run  # noqa: E402
from agent_tune.view.cli import write_page  # noqa: E402
from verl_ext.agent_loop import sample_record, training_episode_record  # noqa: E402

GROUPS_SMALL, GROUPS_LARGE, SAMPLES = 10, 20, 4

FILTER_JS = """([id, value]) => {
  const input = document.getElementById(id);
  const t0 = performance.now();
  input.value = value;
  input.dispatchEvent(new Event(input.tagName === "SELECT" ? "change" : "input"));
  document.getElementById("ep-list").offsetHeight;  // the layout the new rows need
  return [performance.now() - t0, Number(document.getElementById("app").dataset.episodes)];
}"""


def measure(run: Path, out: Path, repeats: int) -> dict[str, float]:
    """Build the page of ``run`` and time it in chromium."""
    started = time.perf_counter()
    page_file, view = write_page(run, out)
    numbers: dict[str, float] = {"episodes": len(view.table), "build_s": time.perf_counter() - started,
                                 "html_mb": page_file.stat().st_size / 1e6}
    with chromium() as (page, log):
        page.goto(page_file.resolve().as_uri())
        page.wait_for_selector("#app[data-ready='1']", timeout=300_000)
        numbers["first_render_ms"] = float(page.get_attribute("#app", "data-render-ms"))
        page.wait_for_selector("#app[data-details-ms]", timeout=300_000)
        numbers["details_ms"] = float(page.get_attribute("#app", "data-details-ms"))
        page.click("#tabbtn-episodes")
        filters = {"filter_reward_ms": ("f-rmin", "0.5"), "filter_step_ms": ("f-step", "3")}
        for name, (element, value) in filters.items():
            times = []
            for _ in range(repeats):
                ms, shown = page.evaluate(FILTER_JS, [element, value])
                times.append(ms)
                page.evaluate(FILTER_JS, [element, ""])
            numbers[name] = statistics.median(times)
            numbers[name.replace("_ms", "_shown")] = shown
        t0 = time.perf_counter()
        page.click(".ep-row >> nth=3")
        page.wait_for_selector("#ep-body .conversation")
        numbers["open_episode_ms"] = 1000 * (time.perf_counter() - t0)
        if log.errors:
            raise RuntimeError(f"the page reported errors: {log.errors[:3]}")
    return numbers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None, help="write the runs and pages here (default: a temp folder)")
    args = ap.parse_args()
    reason = missing_browser()
    if reason:
        raise SystemExit(f"viewer_scale: {reason}")
    ensure_bfcl_project_root()
    renderer = smollm2_renderer()
    writers = RunWriters(training_episode_record, sample_record, StepMetricsWriter)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        results = {}
        for label, episodes, groups in (("small", args.small, GROUPS_SMALL), ("large", args.large, GROUPS_LARGE)):
            steps = max(1, episodes // (groups * SAMPLES))
            t0 = time.perf_counter()
            run = write_synthetic_run(base / label, renderer, writers, steps=steps, groups=groups, samples=SAMPLES,
                                      tokens_every=8)
            print(f"{label}: wrote {run.episodes} episodes in {run.steps} steps ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
            results[label] = measure(run.folder, base / f"{label}.html", args.repeats)
    small, large = results["small"], results["large"]
    print(f"\n{'':<22} {int(small['episodes']):>10,} {int(large['episodes']):>10,}   ratio")
    for key, label in (("html_mb", "HTML size (MB)"), ("build_s", "build (s)"),
                       ("first_render_ms", "first render (ms)"), ("details_ms", "details ready (ms)"),
                       ("filter_reward_ms", "filter reward (ms)"), ("filter_step_ms", "filter step (ms)"),
                       ("open_episode_ms", "open episode (ms)")):
        print(f"{label:<22} {small[key]:>10.2f} {large[key]:>10.2f}   {large[key] / small[key]:.2f}x")
    print(f"episodes shown after the filters (small / large): reward >= 0.5: {int(small['filter_reward_shown'])} / "
          f"{int(large['filter_reward_shown'])}; step 3: {int(small['filter_step_shown'])} / "
          f"{int(large['filter_step_shown'])}")


if __name__ == "__main__":
    main()
