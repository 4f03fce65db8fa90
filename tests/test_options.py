"""The typed ``agent_tune:`` block (agent_tune/options.py): the shipped configs parse, an unknown key or a bad
value fails naming the dotted key (and what was expected), environments' options are checked against their
constructors' annotations, and each choice Literal is tied to the one table that acts on it."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence, get_args, get_type_hints

import pytest
from omegaconf import OmegaConf

from agent_tune.errors import ConfigError
from agent_tune.launch.run_config import RunConfig
from agent_tune.options import AgentTuneOptions, TaskWeightingConfig, parse_options
from agent_tune.rollout.records import EpisodeRecording
from agent_tune.rollout.worker_gc import WorkerGC
from agent_tune.utils.typed_config import OptionError, check_arguments, check_value

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
SHIPPED = sorted(p.stem for p in CONFIG_DIR.glob("agent_tune_*.yaml"))


def _error(mapping: Any) -> OptionError:
    with pytest.raises(OptionError) as info:
        parse_options(mapping)
    assert isinstance(info.value, ConfigError)  # what the launchers report (exit status 2)
    return info.value


# ----------------------------------------------------------------------------------------- the block
def test_shipped_configs_are_found() -> None:
    assert {"agent_tune_grpo_cpu", "agent_tune_bfcl_cpu", "agent_tune_tau2_cpu", "agent_tune_sft"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_blocks_parse(name: str) -> None:
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    from agent_tune.launch.compose import compose_config

    config = compose_config(name)
    raw = OmegaConf.to_container(config.agent_tune, resolve=True)
    options = parse_options(config.agent_tune)  # an OmegaConf node is resolved first
    assert options == parse_options(raw)
    for key, value in raw.items():  # every key the config sets lands on its field
        parsed = getattr(options, key)
        if key == "worker_gc" and value is not None:
            assert parsed == WorkerGC(**value)
        elif key == "task_weighting" and value is not None:
            assert parsed == TaskWeightingConfig(**value)
        elif key == "episodes":
            assert parsed == EpisodeRecording(**value)
        elif value is not None:
            assert parsed == value, key


def test_shipped_values_reach_the_fields() -> None:
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    from agent_tune.launch.compose import compose_config

    tau2 = parse_options(compose_config("agent_tune_tau2_cpu").agent_tune)
    assert tau2.max_generations == 2 and tau2.template == "smollm2_tools"
    assert tau2.task_weighting.enable and tau2.task_weighting.min_attempts == 2
    assert tau2.worker_gc == WorkerGC(freeze=True, gen2_threshold=100)
    assert tau2.env_kwargs["tau2"]["max_steps"] == 12
    assert parse_options(compose_config("agent_tune_grpo_cpu").agent_tune).cpu_precision == "auto"


def test_defaults_are_what_a_missing_key_means() -> None:
    options = parse_options({})
    assert options == parse_options(None) == AgentTuneOptions()
    assert options.max_generations is None and options.template is None and options.tool_parser is None
    assert options.worker_gc == WorkerGC() and not options.task_weighting.enable
    assert options.env_kwargs == {} and options.chat_template_kwargs == {}
    nulls = parse_options({"worker_gc": None, "task_weighting": None, "env_kwargs": None,
                           "chat_template_kwargs": None})
    assert nulls == options


def test_unknown_key_is_named_with_the_known_ones() -> None:
    exc = _error({"template": "tokenizer", "max_generation": 3})
    assert exc.key == "agent_tune.max_generation"
    assert "config key 'agent_tune.max_generation': unknown key" in str(exc)
    assert "max_generations" in str(exc) and "worker_gc" in str(exc)  # the known keys are listed
    assert _error({"bogus": 1}).key == "agent_tune.bogus"


def test_custom_prefix() -> None:
    with pytest.raises(OptionError, match=r"config key 'stage\.agent_tune\.console'"):
        parse_options({"console": "loud"}, prefix="stage.agent_tune")


@pytest.mark.parametrize(("mapping", "key", "expected"), [
    ({"max_generations": "3"}, "agent_tune.max_generations", "expected int | null"),
    ({"max_generations": 2.5}, "agent_tune.max_generations", "expected int | null"),
    ({"max_generations": True}, "agent_tune.max_generations", "expected int | null"),
    ({"cleanup_shm": "yes"}, "agent_tune.cleanup_shm", "expected bool"),
    ({"cleanup_shm": None}, "agent_tune.cleanup_shm", "expected bool"),
    ({"debug_drift": 1}, "agent_tune.debug_drift", "expected bool"),
    ({"template": 3}, "agent_tune.template", "expected str | null"),
    ({"sample_metrics_dir": ["a"]}, "agent_tune.sample_metrics_dir", "expected str | null"),
    ({"chat_template_kwargs": "enable_thinking"}, "agent_tune.chat_template_kwargs", "expected dict[str, Any] | null"),
    ({"env_kwargs": ["bfcl"]}, "agent_tune.env_kwargs", "expected dict[str, dict[str, Any] | null] | null"),
    ({"env_kwargs": {"bfcl": "progress"}}, "agent_tune.env_kwargs.bfcl", "expected dict[str, Any] | null"),
    ({"worker_gc": "freeze"}, "agent_tune.worker_gc", "expected a mapping {freeze, gen2_threshold} | null"),
    ({"worker_gc": {"freeze": "yes"}}, "agent_tune.worker_gc.freeze", "expected bool"),
    ({"worker_gc": {"gen2_threshold": "100"}}, "agent_tune.worker_gc.gen2_threshold", "expected int | null"),
    ({"task_weighting": {"seed": 1.5}}, "agent_tune.task_weighting.seed", "expected int | null"),
    ({"task_weighting": {"enable": "true"}}, "agent_tune.task_weighting.enable", "expected bool"),
    ({"task_weighting": {"hard_weight": "half"}}, "agent_tune.task_weighting.hard_weight", "expected float"),
])
def test_wrong_type_is_named_with_value_and_expected_type(mapping: dict, key: str, expected: str) -> None:
    exc = _error(mapping)
    assert exc.key == key
    value = next(iter(mapping.values()))
    while isinstance(value, dict):
        value = next(iter(value.values()))
    assert str(exc) == f"config key '{key}': got {value!r} ({type(value).__name__}), {expected}"


def test_int_is_widened_where_a_float_is_expected() -> None:
    options = parse_options({"task_weighting": {"solved_weight": 1, "success_threshold": 1}})
    assert options.task_weighting.solved_weight == 1.0 and isinstance(options.task_weighting.solved_weight, float)


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("console", "loud", "'quiet', 'verbose'"),
    ("attention_fallback", "eager", "'error', 'sdpa'"),
])
def test_literal_refused_naming_the_allowed_values(key: str, value: str, allowed: str) -> None:
    exc = _error({key: value})
    assert str(exc) == f"config key 'agent_tune.{key}': {value!r} is not one of {allowed}"


def test_optional_literal_names_its_choices_and_null() -> None:
    exc = _error({"trainer": "async"})
    assert exc.key == "agent_tune.trainer"
    assert "'main_ppo' | 'one_step_off_policy' | 'fully_async_policy' | null" in str(exc)
    assert "'auto' | 'bf16' | 'fp32' | null" in str(_error({"cpu_precision": "fp16"}))
    assert parse_options({"trainer": None, "cpu_precision": "bf16"}).cpu_precision == "bf16"


@pytest.mark.parametrize(("mapping", "key", "problem"), [
    ({"max_generations": 0}, "agent_tune.max_generations", ">= 1"),
    ({"max_generations": -2}, "agent_tune.max_generations", ">= 1"),
    ({"worker_gc": {"gen2_threshold": 0}}, "agent_tune.worker_gc.gen2_threshold", "a positive integer"),
    ({"worker_gc": {"frozen": True}}, "agent_tune.worker_gc.frozen", "unknown key (known: freeze, gen2_threshold)"),
    ({"task_weighting": {"min_attempts": 0}}, "agent_tune.task_weighting.min_attempts", ">= 1"),
    ({"task_weighting": {"minattempts": 3}}, "agent_tune.task_weighting.minattempts", "unknown key"),
    ({"task_weighting": {"hard_weight": 2}}, "agent_tune.task_weighting.hard_weight", "(0, 1]"),
    ({"task_weighting": {"hard_threshold": 0.9}}, "agent_tune.task_weighting.hard_threshold", "solved_threshold"),
])
def test_out_of_range_and_nested_errors_name_the_full_key(mapping: dict, key: str, problem: str) -> None:
    exc = _error(mapping)
    assert exc.key == key and problem in exc.problem


def test_max_generations_accepts_null_and_positive() -> None:
    assert parse_options({"max_generations": None}).max_generations is None
    assert parse_options({"max_generations": 1}).max_generations == 1


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(OptionError, match="'freeze'"):
        WorkerGC(freeze="yes")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="'max_generations'"):
        AgentTuneOptions(max_generations=0)
    with pytest.raises(OptionError, match="'console'"):
        AgentTuneOptions(console="loud")  # type: ignore[arg-type]


def test_the_error_crosses_processes() -> None:  # Ray pickles what a worker raises
    exc = pickle.loads(pickle.dumps(OptionError("agent_tune.max_generations", "bad")))
    assert (exc.key, exc.problem, str(exc)) == ("agent_tune.max_generations", "bad",
                                                "config key 'agent_tune.max_generations': bad")


# ----------------------------------------------------------------------------------------- the checker
@pytest.mark.parametrize(("annotation", "good", "bad"), [
    (int, 3, 3.0), (float, 2, "2"), (bool, False, 0), (str, "a", None), (type(None), None, 0),
    (Literal["a", 1], 1, True), (int | None, None, "1"),
    (dict[str, int], {"a": 1}, {"a": "1"}), (Mapping[str, Any], {"a": object()}, ["a"]),
    (list[int], [1, 2], [1, "2"]), (Sequence[str], ("a",), "a"), (tuple[int, str], (1, "a"), (1, 2)),
    (tuple[int, ...], [1, 2, 3], [1, None]),
])
def test_check_value(annotation: Any, good: Any, bad: Any) -> None:
    def plain(value: Any) -> Any:  # a sequence comes back as a list (a fixed tuple as a tuple)
        return list(value) if isinstance(value, (list, tuple)) else value

    assert plain(check_value("k", good, annotation)) == plain(good)
    with pytest.raises(OptionError) as info:
        check_value("k", bad, annotation)
    assert info.value.key.startswith("k")


class _Opaque:
    pass


@pytest.mark.parametrize("annotation", [_Opaque, Callable[[int], int], _Opaque | None, "NotAType"])
def test_annotations_it_cannot_check_are_skipped(annotation: Any) -> None:
    value = object()
    assert check_value("k", value, annotation) is value


def test_a_union_with_an_uncheckable_arm_accepts_anything_but_checks_its_mapping_arm_first() -> None:
    assert check_value("k", "anything", _Opaque | Mapping[str, Any] | None) == "anything"
    assert check_value("k", {"freeze": "x"}, Mapping[str, Any] | WorkerGC | None) == {"freeze": "x"}
    with pytest.raises(OptionError) as info:  # a dataclass arm refusing a field names that field
        check_value("k", {"freeze": "x"}, WorkerGC | None)
    assert info.value.key == "k.freeze"


# ----------------------------------------------------------------------------------------- env options
def _init(a: int, choice: Literal["x", "y"] = "x", sandbox: _Opaque | Mapping[str, Any] | None = None,
          shots: Sequence[str] | None = None) -> None:
    pass


def test_check_arguments_keys_errors_by_parameter() -> None:
    check_arguments(_init, {"a": 1, "choice": "y", "sandbox": _Opaque(), "shots": ["s"], "unknown": 1})
    for kwargs, key in (({"a": "1"}, "a"), ({"choice": "z"}, "choice"), ({"shots": "s"}, "shots"),
                        ({"shots": [1]}, "shots[0]")):
        with pytest.raises(OptionError) as info:
            check_arguments(_init, kwargs)
        assert info.value.key == key


def test_base_check_kwargs_checks_values_against_the_constructor() -> None:
    from agent_tune.envs import get_env_class

    retool = get_env_class("retool")  # no check_kwargs of its own: BaseToolEnv's
    retool.check_kwargs({"max_tool_calls": 2, "correct_reward": 1, "sandbox": {"backend": "local"}})
    with pytest.raises(OptionError) as info:
        retool.check_kwargs({"max_tool_calls": "two"})
    assert info.value.key == "max_tool_calls" and "expected int" in str(info.value)
    with pytest.raises(ValueError, match="unexpected keyword"):
        retool.check_kwargs({"max_calls": 2})


def test_bfcl_reward_is_refused_naming_the_allowed_rewards() -> None:
    pytest.importorskip("bfcl_eval")
    from agent_tune.envs import get_env_class

    with pytest.raises(OptionError) as info:
        get_env_class("bfcl").check_kwargs({"reward": "progres"})
    assert info.value.key == "reward"
    assert "'progress', 'accuracy', 'progress_format', 'syntax'" in str(info.value)


@pytest.mark.parametrize(("config_name", "override", "key", "expected"), [
    ("agent_tune_bfcl_cpu", "agent_tune.env_kwargs.bfcl.reward=progres", "agent_tune.env_kwargs.bfcl.reward",
     "is not one of 'progress'"),
    ("agent_tune_bfcl_cpu", "agent_tune.env_kwargs.bfcl.max_steps_per_turn=many",
     "agent_tune.env_kwargs.bfcl.max_steps_per_turn", "expected int"),
    ("agent_tune_bfcl_cpu", "agent_tune.env_kwargs.bfcl.max_turns=two", "agent_tune.env_kwargs.bfcl.max_turns",
     "expected int"),
    ("agent_tune_toolcall_cpu", "agent_tune.env_kwargs.toolcall.reward_scale=percent",
     "agent_tune.env_kwargs.toolcall.reward_scale", "is not one of 'toolrl', 'unit'"),
    ("agent_tune_retool_cpu", "agent_tune.env_kwargs.retool.correct_reward=high",
     "agent_tune.env_kwargs.retool.correct_reward", "expected float"),
    ("agent_tune_tau2_cpu", "agent_tune.env_kwargs.tau2.max_steps=[1]", "agent_tune.env_kwargs.tau2.max_steps",
     "expected int"),  # before tau2's own check_kwargs (which would ask the user server)
])
def test_launch_names_the_env_option(config_name: str, override: str, key: str, expected: str) -> None:
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    if "bfcl" in config_name:
        pytest.importorskip("bfcl_eval")
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.train import check_env_kwargs

    with pytest.raises(ConfigError) as info:
        check_env_kwargs(RunConfig.parse(compose_config(config_name, [override])).options)
    assert str(info.value).startswith(f"config key '{key}': ") and expected in str(info.value)


def test_launch_fails_at_start_up_naming_the_key() -> None:
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.train import validate

    for override, key in (("+agent_tune.max_generation=3", "agent_tune.max_generation"),
                          ("agent_tune.max_generations=0", "agent_tune.max_generations"),
                          ("agent_tune.worker_gc.gen2_threshold=x", "agent_tune.worker_gc.gen2_threshold"),
                          ("agent_tune.task_weighting.hard_weight=2", "agent_tune.task_weighting.hard_weight")):
        config = compose_config("agent_tune_grpo_cpu", [override])
        with pytest.raises(ConfigError, match=rf"^config key '{key}'"):
            RunConfig.parse(config)
        with pytest.raises(ConfigError, match=rf"^config key '{key}'"):
            validate(RunConfig.parse(config))
    config = compose_config("agent_tune_grpo_cpu", ["agent_tune.task_weighting.enable=true"])
    assert RunConfig.parse(config).options.task_weighting.enable


def test_the_agent_loop_reads_typed_options() -> None:
    pytest.importorskip("verl")
    from verl_ext.agent_loop import env_kwargs_for

    raw = {"tool_parser": "hermes", "reasoning_parser": None, "env_kwargs": {"toolcall": {"reward_scale": "unit"}}}
    typed = parse_options(raw)
    assert env_kwargs_for("toolcall", {"test_id": "t"}, typed) == env_kwargs_for("toolcall", {"test_id": "t"}, raw) == {
        "tool_parser": "hermes", "reward_scale": "unit", "test_id": "t"}
    with pytest.raises(OptionError, match="agent_tune.env_kwargs"):
        env_kwargs_for("toolcall", {}, {"env_kwargs": ["toolcall"]})


# ----------------------------------------------------------------------------------------- one table each
def test_bfcl_reward_kind_is_the_table_of_reward_functions() -> None:
    from agent_tune.rewards import bfcl

    assert get_args(bfcl.RewardKind) == tuple(bfcl.EPISODE_REWARDS) == bfcl.REWARD_KINDS
    info = {"progress": 0.5, "accuracy": 0.0, "format_errors": 1, "syntax_grades": [1.0, 0.5]}
    assert [bfcl.episode_reward(kind, info) for kind in get_args(bfcl.RewardKind)] == [0.5, 0.0, 0.4, 0.75]


def test_bfcl_env_annotates_reward_with_the_table() -> None:
    pytest.importorskip("bfcl_eval")
    from agent_tune.envs import get_env_class
    from agent_tune.rewards import bfcl

    assert get_type_hints(get_env_class("bfcl").__init__)["reward"] == bfcl.RewardKind


def test_toolcall_choices_are_its_literals() -> None:
    from agent_tune.envs import get_env_class
    from agent_tune.envs.toolcall import env as toolcall

    hints = get_type_hints(get_env_class("toolcall").__init__)
    assert get_args(hints["reward_scale"]) == toolcall.REWARD_SCALES == ("toolrl", "unit")
    assert get_args(hints["answer_format"]) == toolcall.ANSWER_FORMATS == ("native", "toolrl")


def test_block_literals_are_the_tables_of_the_modules_that_act_on_them() -> None:
    from agent_tune.options import CpuPrecision, TrainerName

    pytest.importorskip("verl")
    from verl_ext.cpu.precision import SETTINGS
    from verl_ext.trainers import TRAINERS

    assert get_args(CpuPrecision) == SETTINGS
    assert get_args(TrainerName) == TRAINERS


def test_launch_starts_the_mcp_server_once_and_names_one_that_does_not_start() -> None:
    """The notes example's config passes the start-up check (its server starts and lists its tools); a server
    command that exits fails it, naming the key, the command and the server's stderr."""
    pytest.importorskip("hydra")
    pytest.importorskip("verl")
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.train import check_env_kwargs

    faulty = Path(__file__).resolve().parent / "envs" / "mcp_faulty_server.py"
    check_env_kwargs(RunConfig.parse(compose_config("agent_tune_mcp_notes_cpu", [])).options)
    with pytest.raises(ConfigError) as info:
        check_env_kwargs(RunConfig.parse(compose_config("agent_tune_mcp_notes_cpu",
                                        [f"agent_tune.env_kwargs.mcp.server.command=[python,{faulty},--no-start]"])).options)
    message = str(info.value)
    assert message.startswith("config key 'agent_tune.env_kwargs.mcp': ") and "--no-start` did not start" in message
    assert "refusing to start (missing API key)" in message
