"""What the viewer's tests look at, written once per session by the real code: a small training run (BFCL
episodes recorded by the agent loop's recording functions, metrics by the launcher's writer), a curriculum of two
such stages, and an eval output (the calculator example against the scripted server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_tune.rollout import ChatRenderer

CALCULATOR = "examples.envs.calculator:CalculatorEnv"


@pytest.fixture(scope="session")
def qwen_renderer(qwen_tok) -> ChatRenderer:
    return ChatRenderer(qwen_tok, "qwen3_instruct")


def real_writers():
    """The agent loop's recording functions and the launcher's metrics writer (verl needed)."""
    pytest.importorskip("verl")
    from agent_tune.launch.step_metrics import StepMetricsWriter
    from agent_tune.testing.synthetic_run import RunWriters
    from verl_ext.agent_loop import sample_record, training_episode_record

    return RunWriters(training_episode_record, sample_record, StepMetricsWriter)


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory, qwen_renderer):
    """3 steps x 3 groups x 4 samples; token lists for every group."""
    from agent_tune.testing.synthetic_run import write_synthetic_run

    return write_synthetic_run(tmp_path_factory.mktemp("run") / "checkpoints", qwen_renderer, real_writers(),
                               steps=3, groups=3, samples=4, tokens_every=1)


@pytest.fixture(scope="session")
def synthetic_curriculum(tmp_path_factory, qwen_renderer):
    from agent_tune.testing.synthetic_run import write_synthetic_curriculum

    folder = tmp_path_factory.mktemp("curriculum")
    return folder, write_synthetic_curriculum(folder, qwen_renderer, real_writers(), steps=2, groups=2, samples=2,
                                              tokens_every=0)


@pytest.fixture(scope="session")
def eval_output(tmp_path_factory, qwen_tok) -> Path:
    """``agent-tune eval --env calculator --split test --n 2`` of 6 tasks against the scripted server."""
    from agent_tune.eval.cli import run_main
    from agent_tune.testing.scripted_server import ScriptedServer
    from examples.envs.calculator import CalculatorEnv
    from tests.eval.test_eval_catalogue import calculator_script, last_question

    tasks = CalculatorEnv.catalogue.tasks("test", size=6)
    # right for even task numbers, off by one for odd ones (both samples alike)
    wrong = {t.id for t in tasks if int(t.id.rsplit("-", 1)[1]) % 2}
    out = tmp_path_factory.mktemp("eval") / "calc.jsonl"

    async def run() -> int:
        async with ScriptedServer(qwen_tok, calculator_script(wrong, tasks), [], questions={t.kwargs["question"]: t.id
                                  for t in tasks}, locate=last_question) as srv:
            argv = ["--base-url", srv.base_url, "--model", "scripted", "--template", "qwen3", "--no-progress",
                    "--env", CALCULATOR, "--split", "test", "--options", '{"size": 6}', "--n", "2",
                    "--temperature", "1.0", "--output", str(out)]
            return await asyncio.to_thread(run_main, argv, qwen_tok)

    assert asyncio.run(run()) == 0
    return out


@pytest.fixture
def served_run(tmp_path, synthetic_run):
    """A copy of the synthetic run that a test may append to, served on loopback: ``(server, run folder)``."""
    import shutil
    import threading

    from agent_tune.view.page import View
    from agent_tune.view.serve import ViewServer
    from agent_tune.view.sources import open_source

    run = tmp_path / "run"
    shutil.copytree(synthetic_run.folder, run)
    server = ViewServer(View(open_source(run)), port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, run
    finally:
        server.shutdown()
        server.server_close()
