"""The tinker env against environments written with tinker-cookbook's own classes (tests/envs/tinker_envs.py: an
``Env`` + ``EnvGroupBuilder``, a ``ProblemEnv`` in tinker's ``ProblemGroupBuilder``, an ``RLDatasetBuilder``), rendered
by tinker's ``qwen3_instruct`` renderer over Qwen3's vocabulary: the contract, scripted episodes through the runner
token-for-token what the env rendered, the rewards and format errors the env reported, every call bounded by the
time-limit rule (a step: stop reason ``timeout``; the start: ``StartTimeoutError``, an episode the runner records as not
played)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("tinker_cookbook.rl.types", reason="tinker-cookbook is not installed (docs/envs.md)")

from agent_tune.envs import check_env, make_env  # noqa: E402
from agent_tune.envs.time_limits import (  # noqa: E402
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    StartTimeoutError,
)
from agent_tune.envs.tinker.env import TinkerEnv, TinkerEnvError, tinker_tasks  # noqa: E402
from agent_tune.utils.typed_config import OptionError  # noqa: E402

GUESS = "tests.envs.tinker_envs:GuessGroupBuilder"
ADD = "tests.envs.tinker_envs:add_builder"
DATASET = "tests.envs.tinker_envs:AddDatasetBuilder"
END = "<|im_end|>"  # qwen3_instruct's stop token, as text (encoded to its id)


@pytest.fixture(scope="module")
def tok_dir(qwen_tok_dir) -> str:
    return str(qwen_tok_dir)


def guess_env(tok_dir: str, **options) -> TinkerEnv:
    return TinkerEnv(builder=GUESS, builder_kwargs={"tokenizer_dir": tok_dir}, **options)


def runner_renderer(qwen_tok):
    from agent_tune.rollout import ChatRenderer

    return ChatRenderer(qwen_tok, template="qwen3_instruct")


def test_the_contract(tok_dir) -> None:
    check_env(lambda: make_env("tinker", builder=GUESS, builder_kwargs={"tokenizer_dir": tok_dir}), {"secret": 7},
              valid_response=f"3{END}", malformed_response=f"no idea{END}")
    check_env(lambda: make_env("tinker", builder=ADD, builder_kwargs={"tokenizer_dir": tok_dir}), {"a": 2, "b": 3},
              valid_response=f"The answer is 5{END}", malformed_response="5")  # no stop token: format 0


async def test_an_episode_is_token_for_token_what_the_env_rendered(tok_dir, qwen_tok) -> None:
    from agent_tune.rollout import RolloutLimits, ScriptedPolicy, run_episode

    renderer = runner_renderer(qwen_tok)
    env = guess_env(tok_dir)
    replies = ["5", "I think 8", "hmm", "7"]
    result = await run_episode(env, ScriptedPolicy(renderer, replies), renderer,
                               RolloutLimits(4096, 1024), task={"secret": 7})
    played = env._env  # the tinker Env the episode played (the adapter drops it at close)
    traj = result.trajectory
    first = played.renderer.build_generation_prompt(played.convo[:2]).to_ints()
    assert traj.prompt_ids == first
    # the whole sequence is the env's own rendering of its final conversation, plus the last action as sampled
    final_action = renderer.encode("7") + [renderer.end_of_turn_id]
    assert traj.all_ids == played.renderer.build_generation_prompt(played.convo).to_ints() + final_action
    assert result.stop_reason == "done" and result.reward == 1.0 and result.info["accuracy"] == 1.0
    assert result.episode.format_errors == 1 and result.num_generations == 4  # "hmm" has no number
    assert [i.get("tinker_metrics", {}).get("format") for i in result.step_infos] == [1.0, 1.0, 0.0, 1.0]
    # the policy's tokens are masked in, the env's out, and the env's replies are its own rendering
    assert sum(traj.response_mask) == traj.num_policy_tokens == sum(len(renderer.encode(r)) + 1 for r in replies)
    assert "Higher." in result.messages[-1]["content"] and "Lower." in result.messages[-1]["content"]
    env.close()


async def test_the_stop_token_of_the_env_reaches_the_sampler(tok_dir, qwen_tok) -> None:
    from agent_tune.rollout import RolloutLimits, run_episode
    from agent_tune.rollout.policy import GenerationOutput

    seen: list[dict] = []

    class Recording:
        async def generate(self, prompt_ids, sampling_params):
            seen.append(dict(sampling_params))
            return GenerationOutput(qwen_tok.encode("7", add_special_tokens=False) + [151645], [0.0, 0.0], "stop")

    env = guess_env(tok_dir)
    result = await run_episode(env, Recording(), runner_renderer(qwen_tok), RolloutLimits(4096, 256),
                               task={"secret": 7})
    assert result.reward == 1.0 and seen[0]["stop_token_ids"] == [151645]


def test_a_problem_env_scores_as_tinker_does(tok_dir) -> None:
    env = TinkerEnv(builder=ADD, builder_kwargs={"tokenizer_dir": tok_dir})
    env.reset(a=2, b=3)
    right = env.step(f"It is 5.{END}")
    env.reset(a=2, b=3)
    wrong = env.step(f"It is 6.{END}")
    env.reset(a=2, b=3)
    unstopped = env.step("It is 5.")  # right, but without the stop sequence: ProblemEnv's format penalty
    assert right.done and right.reward == 1.0 and right.info["accuracy"] == 1.0 and right.info["format_errors"] == 0
    assert wrong.reward == 0.0 and wrong.info["accuracy"] == 0.0 and wrong.info["format_errors"] == 0
    assert unstopped.reward == pytest.approx(0.9) and unstopped.info["format_errors"] == 1
    assert unstopped.info["accuracy"] == 1.0 and unstopped.info["tinker_metrics"] == {"format": 0.0, "correct": 1.0}


def test_the_dataset_catalogue(tok_dir) -> None:
    train = tinker_tasks("train", dataset=DATASET, dataset_kwargs={"tokenizer_dir": tok_dir})
    test = tinker_tasks("test", dataset=DATASET, dataset_kwargs={"tokenizer_dir": tok_dir})
    assert [t.id for t in train] == ["0:0", "0:1", "1:0", "1:1"] and [t.id for t in test] == ["0:0", "0:1"]
    assert {t.category for t in train} == {"add"} and test[1].kwargs == {"batch": 0, "slot": 1}
    prompt = TinkerEnv.catalogue.row_prompt(TinkerEnv, test[1], test[1].env_kwargs)
    assert prompt[0]["role"] == "user" and "What is 30 + 40?<|im_end|>" in prompt[0]["content"]
    env = TinkerEnv(**test[1].env_kwargs)  # 30 + 40
    env.reset(**test[1].kwargs)
    end = env.step(f"70{END}")
    assert end.done and end.reward == 1.0


def test_an_env_that_raises_is_a_format_error(tok_dir) -> None:
    env = guess_env(tok_dir)
    env.reset(secret=4)
    end = env.step(f"crash{END}")
    assert end.done and end.info["stop_reason"] == "env_error" and end.episode.format_errors == 1
    assert "RuntimeError: the guess machine broke" in end.info["error"]


def test_a_step_that_hangs_ends_the_episode_within_call_timeout(tok_dir) -> None:
    env = guess_env(tok_dir, call_timeout=1.0)
    env.reset(secret=4)
    t0 = time.monotonic()
    end = env.step(f"hang{END}")
    assert time.monotonic() - t0 < 5.0
    assert end.done and end.info["stop_reason"] == "timeout" and end.reward == 0.0
    assert end.info["error"] == "no answer in 1 s (tinker env step)" and end.episode.format_errors == 0
    env.close()


def test_a_start_that_hangs_fails_within_start_timeout(tok_dir) -> None:
    env = TinkerEnv(builder=GUESS, builder_kwargs={"tokenizer_dir": tok_dir, "start_delay": 30.0},
                    start_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(StartTimeoutError, match=rf"^no answer in 1 s \(tinker env {GUESS} start\)$"):
        env.reset(secret=4)
    assert time.monotonic() - t0 < 5.0
    env.builder_kwargs["start_delay"] = 0.0  # the env starts the next episode as usual
    env.reset(secret=4)
    assert env.step(f"4{END}").info["stop_reason"] == "done"
    env.close()


async def test_the_runner_counts_a_start_and_a_step_that_time_out(tok_dir, qwen_tok) -> None:
    """Through the episode runner: a start out of time is an episode not played, a step out of time ends its
    episode (stop reason ``timeout`` both), and the episodes played beside them go on."""
    import asyncio

    from agent_tune.rollout import RolloutLimits, ScriptedPolicy, run_episode

    renderer = runner_renderer(qwen_tok)
    slow_start = TinkerEnv(builder=GUESS, builder_kwargs={"tokenizer_dir": tok_dir, "start_delay": 30.0},
                           start_timeout=1.0)
    hanging, fine = guess_env(tok_dir, call_timeout=1.0), guess_env(tok_dir, call_timeout=1.0)
    limits = RolloutLimits(4096, 1024)
    not_played, timed_out, done = await asyncio.gather(
        run_episode(slow_start, ScriptedPolicy(renderer, ["4"]), renderer, limits, task={"secret": 4}),
        run_episode(hanging, ScriptedPolicy(renderer, ["2", "hang"]), renderer, limits, task={"secret": 4}),
        run_episode(fine, ScriptedPolicy(renderer, ["2", "4"]), renderer, limits, task={"secret": 4}))
    for env in (slow_start, hanging, fine):
        env.close()
    assert not_played.stop_reason == "timeout" and not_played.num_generations == 0 and not_played.reward == 0.0
    assert not_played.info["error"] == f"no answer in 1 s (tinker env {GUESS} start)"
    assert timed_out.stop_reason == "timeout" and timed_out.num_generations == 2 and timed_out.reward == 0.0
    assert timed_out.info["error"] == "no answer in 1 s (tinker env step)" and timed_out.episode.format_errors == 0
    assert done.stop_reason == "done" and done.reward == 1.0


def test_a_renderer_that_rerenders_history_ends_the_episode_clearly(tok_dir) -> None:
    env = guess_env(tok_dir)
    env.builder_kwargs["renderer_name"] = "role_colon"  # cuts its stop string from the history it re-renders
    env.reset(secret=4)
    end = env.step("2\n\nUser:")
    assert end.done and end.info["stop_reason"] == "env_error"
    assert "does not extend the episode's tokens" in end.info["error"]


def test_options_are_checked_naming_the_key(tok_dir) -> None:
    with pytest.raises(OptionError, match="builder"):
        TinkerEnv.check_kwargs({"builder": "tests.envs.tinker_envs:Nothing"})
    with pytest.raises(OptionError, match="builder"):
        TinkerEnv.check_kwargs({})
    for key, value in (("call_timeout", 0.0), ("start_timeout", -1)):
        with pytest.raises(OptionError, match=key):
            TinkerEnv.check_kwargs({"builder": GUESS, key: value})
    default = TinkerEnv(builder=GUESS)
    assert (default.call_timeout, default.start_timeout) == (DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT)
    TinkerEnv.check_kwargs({"builder": GUESS, "builder_kwargs": {"tokenizer_dir": tok_dir}})
    env = guess_env(tok_dir)
    with pytest.raises(TypeError, match="does not take the task's keys"):
        env.reset(secrett=3)
    with pytest.raises(TinkerEnvError, match="cannot start the episode .*member 5 is not one of them"):
        guess_env(tok_dir, member=5).reset(secret=3)  # a start that fails (not a timeout) stays the env's error


async def test_eval_in_chat_mode_refuses_a_token_env(tok_dir, tmp_path) -> None:
    from agent_tune.eval.evaluate import EvalSettings, Evaluator
    from agent_tune.eval.task_rows import catalogue_task_rows

    tasks = tinker_tasks("test", dataset=DATASET, dataset_kwargs={"tokenizer_dir": tok_dir})
    settings = EvalSettings(base_url="http://127.0.0.1:1/v1", model="m", env="tinker", mode="chat", progress=False)
    evaluator = Evaluator(settings, None, task_rows=catalogue_task_rows("tinker", tasks))
    with pytest.raises(ValueError, match="speaks token ids .* use --mode tokens"):
        await evaluator.run([tasks[0].id], tmp_path / "r.jsonl")


async def test_agent_tune_eval_plays_a_tinker_env_token_exact(tok_dir, qwen_tok, tmp_path) -> None:
    """`agent-tune eval`'s evaluator in token mode against an OpenAI-compatible server written here: it sees the
    env's own prompt tokens and answers each question's sum (the second one wrong)."""
    import re

    from aiohttp import web

    from agent_tune.eval.evaluate import EvalSettings, Evaluator
    from agent_tune.eval.task_rows import catalogue_task_rows

    prompts: list[list[int]] = []

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]})

    async def completions(request):
        body = await request.json()
        prompts.append(body["prompt"])
        a, b = map(int, re.findall(r"What is (\d+) \+ (\d+)\?", qwen_tok.decode(body["prompt"]))[-1])
        answer = str(a + b if a != 30 else a + b + 1)
        ids = qwen_tok.encode(answer, add_special_tokens=False) + [151645]
        return web.json_response({"choices": [{"index": 0, "text": answer, "token_ids": ids, "finish_reason": "stop",
                                               "logprobs": {"token_logprobs": [-0.5] * len(ids)}}],
                                  "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids)}})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        tasks = tinker_tasks("test", dataset=DATASET, dataset_kwargs={"tokenizer_dir": tok_dir})
        settings = EvalSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", env="tinker", template="qwen3",
                                progress=False)
        out = await Evaluator(settings, qwen_tok, task_rows=catalogue_task_rows("tinker", tasks)).run(
            [t.id for t in tasks], tmp_path / "r.jsonl")
    finally:
        await runner.cleanup()
    by_id = {r["test_id"]: r for r in out.records}
    assert by_id["0:0"]["accuracy"] == 1.0 and by_id["0:1"]["accuracy"] == 0.0  # 10 + 20 right, 30 + 40 wrong
    env = TinkerEnv(**tasks[0].env_kwargs)
    expected = env.reset(**tasks[0].kwargs).token_ids
    env.close()
    assert expected in prompts  # the server was sent exactly the env's own prompt tokens
