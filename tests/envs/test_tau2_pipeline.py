"""The tau2 env with ``protocol="pipeline"`` (Tau2-RL-Pipeline's protocol): the fidelity harness of the native
protocol run on it (gold replays, perturbed replays: the trajectory and the reward tau2's own orchestrator and
evaluator give for the same actions), what the policy reads, the FORMAT ERROR retry at temperature 0 and the
parse error after it, the runner's stop string, and the SFT rows of ``agent-tune sft-data --format tau2_seed
--form pipeline`` token for token against an episode played in the protocol."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence

import pytest

from agent_tune.envs import check_env, make_env
from agent_tune.envs.base import StopReason
from agent_tune.envs.tau2 import catalogue, loader, pipeline
from agent_tune.rollout import ChatRenderer, GenerationOutput, RolloutLimits, run_episode
from tests.envs.tau2_helpers import (
    FIRST_USER_TURN,
    comparable,
    every_gold_replay_scores_as_tau2,
    final_text,
    gold_actions,
    is_write,
    reference_run,
    tasks_with_actions,
)

FAST = {"airline": ["7"], "retail": ["0", "20"]}
MOCK = {"domain": "mock", "task_id": "create_task_1"}
USER = {"kind": "scripted", "turns": ["Create a task please."]}


def block(name: str, arguments: dict[str, Any]) -> str:
    """One action as the pipeline's policy writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def respond(text: str) -> str:
    return block("respond", {"content": text})


def replay(domain: str, task_id: str, actions: Sequence[tuple[str, dict[str, Any]] | str], closing: str,
           user_turns: Sequence[Any] = (FIRST_USER_TURN,), **kwargs: Any):
    """Play ``actions`` (a call, or a str: ``respond`` with it) then ``respond(closing)`` in the pipeline protocol
    with a scripted user (who stops after its turns); returns (env, the last StepResult)."""
    env = make_env("tau2", domain=domain, task_id=task_id, protocol="pipeline",
                   user={"kind": "scripted", "turns": list(user_turns)}, **kwargs)
    env.reset()
    result = None
    for text in [respond(a) if isinstance(a, str) else block(*a) for a in actions] + [respond(closing)]:
        result = env.step(text)
        assert result.info["format_errors"] == 0, result.info
        if result.done:
            break
    assert result is not None and result.done
    return env, result


# --------------------------------------------------------------------------- fidelity
@pytest.mark.parametrize("domain,task_id", [(d, t) for d, ids in FAST.items() for t in ids])
def test_gold_replay_scores_as_tau2(domain: str, task_id: str) -> None:
    task = loader.load_task(domain, task_id)
    actions, closing = gold_actions(task), final_text(task)
    env, result = replay(domain, task_id, actions, closing)
    ref = reference_run(domain, task_id, actions, closing)
    assert comparable(env.simulation.messages) == comparable(ref.messages)
    assert result.reward == result.info["accuracy"] == ref.reward_info.reward == 1.0
    assert result.info["termination_reason"] == "user_stop" and result.episode.format_errors == 0


@pytest.mark.slow
@pytest.mark.parametrize("domain,expected", [("airline", 43), ("retail", 112)])
def test_every_gold_replay_scores_as_tau2(domain: str, expected: int) -> None:
    """All tasks with gold actions: every call goes through the pipeline's action string and tau2's
    ``parse_action_string`` and still gives tau2's own trajectory, hence tau2's reward (1.0)."""
    ids = tasks_with_actions(domain)
    assert len(ids) == expected
    every_gold_replay_scores_as_tau2(replay, domain, ids)


@pytest.mark.parametrize("domain,task_id", [("airline", "2"), ("retail", "0")])
def test_perturbed_replays_fail_as_tau2_says(domain: str, task_id: str) -> None:
    task = loader.load_task(domain, task_id)
    actions, closing = gold_actions(task), final_text(task)
    i = next(j for j, (name, _) in enumerate(actions) if is_write(name))
    name, args = actions[i]
    key = next(k for k, v in args.items() if isinstance(v, str))
    for perturbed in (actions[:i] + actions[i + 1:], actions[:i] + [(name, {**args, key: args[key] + "X"})]
                      + actions[i + 1:]):
        env, result = replay(domain, task_id, perturbed, closing)
        ref = reference_run(domain, task_id, perturbed, closing)
        assert comparable(env.simulation.messages) == comparable(ref.messages)
        assert result.reward == ref.reward_info.reward == 0.0


def test_done_is_tau2s_stop_and_scores_as_tau2() -> None:
    task = loader.load_task("retail", "0")
    actions = gold_actions(task)
    env = make_env("tau2", domain="retail", task_id="0", protocol="pipeline",
                   user={"kind": "scripted", "turns": [FIRST_USER_TURN, "Thanks."]})
    env.reset()
    for name, args in actions:
        assert not env.step(block(name, args)).done
    assert not env.step(respond(final_text(task))).done  # the user says "Thanks."
    result = env.step(block("done", {}))
    ref = reference_run("retail", "0", [*actions, final_text(task)], "###STOP###",
                        user_turns=[FIRST_USER_TURN, "Thanks."])
    assert result.done and result.info["termination_reason"] == "agent_stop" == ref.termination_reason.value
    assert env.simulation.messages[-1].content == "###STOP###" and env.simulation.messages[-1].tool_calls is None
    assert comparable(env.simulation.messages) == comparable(ref.messages)
    assert result.reward == ref.reward_info.reward


# --------------------------------------------------------------------------- the prompt's words
def test_prompt_template_file_gives_other_words(tmp_path) -> None:
    """``prompt_template``: a file with $domain, $policy and $tools replaces agent-tune's words everywhere the
    prompt is built (the env's first observation and a training row's prompt); a bad one fails at
    construction, naming the option."""
    from agent_tune.envs.tau2 import catalogue

    template = tmp_path / "prompt.txt"
    template.write_text("Agent for $domain.\nPOLICY:\n$policy\nTOOLS:\n$tools\n")
    env = make_env("tau2", domain="airline", task_id="7", protocol="pipeline", prompt_template=str(template),
                   user={"kind": "scripted", "turns": [FIRST_USER_TURN]})
    system = env.reset().messages[0]["content"]
    assert system.startswith("Agent for airline.\nPOLICY:\n# Airline Agent Policy")
    assert json.loads(system.split("TOOLS:\n", 1)[1])[-1]["name"] == "done"
    assert catalogue.pipeline_first_messages("airline", str(template))[0]["content"] == system

    bad = tmp_path / "bad.txt"
    bad.write_text("Agent for $domain with $policy only, and $unknown")
    with pytest.raises(ValueError, match=r"prompt_template .*unknown: unknown; missing: tools"):
        make_env("tau2", domain="airline", protocol="pipeline", prompt_template=str(bad))
    with pytest.raises(ValueError, match="prompt_template: cannot read"):
        make_env("tau2", domain="airline", protocol="pipeline", prompt_template=str(tmp_path / "none.txt"))
    with pytest.raises(ValueError, match="prompt_template is the pipeline protocol's"):
        make_env("tau2", domain="airline", prompt_template=str(template))


# --------------------------------------------------------------------------- what the policy reads
def test_prompt_observations_and_hints() -> None:
    env = make_env("tau2", domain="airline", task_id="7", protocol="pipeline",
                   user={"kind": "scripted", "turns": [FIRST_USER_TURN, "Sure.\nMy id: mia_li_3668\nbye"]})
    obs = env.reset()
    assert env.sampler_hints.stop == ("</tool_call>",) and env.sampler_hints.include_stop_str_in_output
    assert obs.tools is None and [m["role"] for m in obs.messages] == ["system", "user"]
    system = obs.messages[0]["content"]
    assert system.startswith("You are the airline agent of a customer service.")
    assert "\n# How to act\nEach of your turns is one action and nothing else" in system
    assert "# Airline Agent Policy" in system
    tools = json.loads(system.split("\n# Tools\n", 1)[1].split("\n\n# Reminders", 1)[0])
    names = [t["name"] for t in tools]
    assert names[-1] == "done" and "get_user_details" in names and set(tools[0]) == {"name", "description",
                                                                                     "parameters"}
    assert system.endswith("- Call done as soon as the request is complete.\n")
    assert obs.messages[1] == {"role": "user", "content": FIRST_USER_TURN}  # no greeting: the gym shows none
    assert catalogue.row_prompt(None, catalogue.tau2_tasks("test")[0], {"protocol": "pipeline"})[0]["role"] == "system"

    r = env.step(block("get_user_details", {"user_id": "mia_li_3668"}))
    [msg] = r.observation.messages
    head, result = msg["content"].split("\n", 1)
    assert msg["role"] == "user" and head == "Tool result for get_user_details(user_id='mia_li_3668'):"
    assert json.loads(result)["membership"] == "gold" and r.observation.tools is None and r.sampling is None
    r = env.step(respond("What can I do for you?"))
    # the pipeline reads the gym's text line by line: a reply's lines after its first carry no "user: " prefix
    assert r.observation.messages == [{"role": "user", "content": "Sure."}]
    assert r.info["calls"] == [] and env.status.turns_completed == 1


def test_python_call_round_trips_through_tau2() -> None:
    from tau2.utils.tools import parse_action_string

    args = {"s": "it's \"q\"", "n": 3, "x": 1.5, "b": True, "z": None, "l": [1, "a"], "d": {"k": [False]}}
    action = pipeline.parse_action(block("f", args))
    assert action.call == ("f(s='it\\'s \"q\"', n=3, x=1.5, b=True, z=None, l=[1, 'a'], d={'k': [False]})")
    [call] = parse_action_string(action.call).tool_calls
    assert call.name == "f" and call.arguments == args


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [
    "I will look it up.",  # no block
    'Sure. <tool_call>{"name": "create_task", "arguments": {}}</tool_call>',  # text before the block
    '<tool_call>{"name": "create_task", "arguments": {}}</tool_call> Done.',  # text after the block
    block("get_user", {}) + block("create_task", {}),  # two actions
    '<tool_call>{"name": "create_task", "arguments": </tool_call>',  # not JSON
    '<tool_call>{"name": "create_task"',  # no closing tag
    '<tool_call>["create_task"]</tool_call>',  # not an object
    '<tool_call>{"name": "", "arguments": {}}</tool_call>',  # no name
    '<tool_call>{"name": "create_task", "arguments": [1]}</tool_call>',  # arguments not an object
    block("respond", {"content": "  "}),  # respond without text
])
def test_malformed_action_gets_format_error_then_retry_then_parse_error(bad: str) -> None:
    env = make_env("tau2", **MOCK, user=USER, protocol="pipeline")
    env.reset()
    r = env.step(bad)
    assert not r.done and r.info["format_errors"] == 1 and r.info["action_error"]
    assert r.observation.messages == [{"role": "user", "content": pipeline.FORMAT_ERROR}]
    assert r.sampling == {"temperature": 0.0}
    assert [m.role for m in env.episode.trajectory] == ["assistant", "user"]  # nothing reached tau2
    r = env.step(bad)  # the retry is malformed too: the attempt ends as a parse error
    assert r.done and r.reward == 0.0 and r.episode.format_errors == 2
    assert r.episode.stop_reason is StopReason.ENV_ERROR and r.info["termination_reason"] == "agent_error"
    assert r.info["error"].startswith("parse error: ") and r.info["format_retries"] == 1


def test_a_good_retry_goes_on_and_resets_the_retry() -> None:
    env = make_env("tau2", **MOCK, user=USER, protocol="pipeline")
    env.reset()
    assert env.step("no action").sampling == {"temperature": 0.0}
    r = env.step(block("create_task", {"user_id": "user_1", "title": "Meeting"}))
    assert not r.done and r.sampling is None and r.info["format_errors"] == 0
    assert r.observation.messages[0]["content"].startswith("Tool result for create_task(user_id='user_1', "
                                                           "title='Meeting'):\n")
    assert env.step("again no action").sampling == {"temperature": 0.0}  # a later slip gets its own retry
    r = env.step(block("done", {}))
    assert r.done and r.info["termination_reason"] == "agent_stop" and r.episode.format_errors == 2
    assert r.info["format_retries"] == 2


def test_unknown_tool_runs_on_tau2_as_the_pipeline_does_and_counts() -> None:
    """The pipeline's parser checks the form, not the name: tau2 answers an unknown tool with its error (no retry);
    it counts as a format error, as in the native protocol."""
    env = make_env("tau2", **MOCK, user=USER, protocol="pipeline")
    env.reset()
    r = env.step(block("launch_rocket", {"when": "now"}))
    assert not r.done and r.sampling is None and r.info["format_errors"] == 1
    assert "launch_rocket" in r.info["call_problems"][0] and env.episode.num_errors == 1
    head, text = r.observation.messages[0]["content"].split("\n", 1)
    assert head == "Tool result for launch_rocket(when='now'):" and text.startswith("Error")


def test_protocol_is_checked() -> None:
    with pytest.raises(ValueError, match="protocol must be one of native, pipeline"):
        make_env("tau2", **MOCK, user=USER, protocol="slime")
    assert make_env("tau2", **MOCK, user=USER).max_steps == 200
    env = make_env("tau2", **MOCK, user=USER, protocol="pipeline")
    assert env.tau2_max_steps == 100 and env.max_steps is None  # the pipeline's limit, tau2's count


def test_check_env_passes() -> None:
    check_env(lambda: make_env("tau2", domain="mock", user=USER, protocol="pipeline"), {"task_id": "create_task_1"},
              block("create_task", {"user_id": "user_1", "title": "Meeting"}), "no tool call here")


# --------------------------------------------------------------------------- the runner, SFT rows
class StopStringPolicy:
    """Scripted replies generated as a server does with stop strings: a reply ending in one of the request's
    ``stop`` strings comes back without the end-of-turn token; every request's sampling is kept."""

    def __init__(self, renderer: ChatRenderer, replies: Sequence[str]) -> None:
        self.renderer, self.replies, self.params = renderer, list(replies), []

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        self.params.append(dict(sampling_params))
        text = self.replies[len(self.params) - 1]
        ids = self.renderer.encode(text)
        if not any(text.endswith(s) for s in sampling_params.get("stop") or ()):
            ids.append(self.renderer.end_of_turn_id)
        return GenerationOutput(ids, [0.0] * len(ids), "stop")


def _episode(renderer: ChatRenderer, replies: Sequence[str]):
    env = make_env("tau2", **MOCK, user=USER, protocol="pipeline")
    policy = StopStringPolicy(renderer, replies)
    result = asyncio.run(run_episode(env, policy, renderer, RolloutLimits(16384, 4096),
                                     {"temperature": 0.8, "top_k": 20}))
    return result, policy


def test_runner_stops_at_tool_call_and_retries_at_temperature_zero(qwen_tok) -> None:
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    replies = ["Let me think.", block("create_task", {"user_id": "user_1", "title": "Meeting"}), block("done", {})]
    result, policy = _episode(renderer, replies)
    assert [p["temperature"] for p in policy.params] == [0.8, 0.0, 0.8]  # the retry alone is greedy
    assert all(p["stop"] == ["</tool_call>"] and p["top_k"] == 20 for p in policy.params)
    assert result.stop_reason is StopReason.DONE and result.info["format_errors"] == 1
    assert result.info["termination_reason"] == "agent_stop"


def test_sft_rows_are_token_identical_to_an_episode(qwen_tok) -> None:
    """An episode in the pipeline protocol, logged as the pipeline logs it (its messages), converted by
    ``--form pipeline`` and rendered for SFT, is the episode's token sequence: the same ids, the policy's
    tokens trained and the env's not (the end-of-turn token after ``</tool_call>``, which the runner writes,
    is trained in the row); the row ends with the end-of-turn token after the last action."""
    from agent_tune.sft.convert import tau2_seed_row
    from agent_tune.sft.rows import render_conversation

    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    replies = [block("create_task", {"user_id": "user_1", "title": "Meeting"}), respond("Done: task created."),
               block("done", {})]
    env = make_env("tau2", **MOCK, protocol="pipeline",
                   user={"kind": "scripted", "turns": ["Create a task please.", "Thanks!\nBye"]})
    result = asyncio.run(run_episode(env, StopStringPolicy(renderer, replies), renderer,
                                     RolloutLimits(16384, 4096)))
    assert result.stop_reason is StopReason.DONE
    record = {"messages": [{**m, "content": m["content"] + "  "} if m["role"] == "system" else m
                           for m in result.messages], "metadata": {"domain": "mock", "task_id": "create_task_1"}}
    row = tau2_seed_row(record, "episode", form="pipeline")
    assert row["tools"] == [] and row["messages"][0] == result.messages[0]  # the env's prompt, not the row's
    ids, mask = render_conversation(renderer, row["messages"], row["tools"])
    traj = result.trajectory
    eot = renderer.end_of_turn_id
    assert ids == traj.all_ids + [eot]
    expected = [0] * len(traj.prompt_ids) + list(traj.response_mask) + [1]
    closes = [i for i, (t, m, prev) in enumerate(zip(ids[1:], expected[1:], ids), 1) if t == eot and m == 0
              and renderer.decode([prev]).endswith(">") and i >= len(traj.prompt_ids)]
    assert len(closes) == 2  # the two actions the policy ended at </tool_call> before the last one
    assert [m for i, m in enumerate(mask) if i not in closes] == [m for i, m in enumerate(expected)
                                                                  if i not in closes]
    assert all(mask[i] == 1 for i in closes)


def test_sft_pipeline_form_refuses_what_the_env_would_not_take(tmp_path) -> None:
    from agent_tune.sft.convert import SFTDataError, convert

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"domain": "airline", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! " + respond("hi")}]}) + "\n")
    with pytest.raises(SFTDataError, match="message 1: not one action of the pipeline protocol"):
        convert("tau2_seed", path, form="pipeline")


# --------------------------------------------------------------------------- against tau2's own gym env
def _gym_env(domain: str, task_id: str, user_turns: Sequence[Any]):
    """tau2's ``AgentGymEnv`` (what the pipeline drives) with the scripted user of the reference runs."""
    gym_agent = pytest.importorskip("tau2.gym.gym_agent")  # tau2's gym needs gymnasium (the dev extra)
    from tests.envs.tau2_helpers import _ScriptedUser

    class ScriptedGym(gym_agent.AgentGymEnv):
        def _get_user(self):
            return _ScriptedUser(user_turns)

    return ScriptedGym(domain=domain, task_id=task_id, max_steps=100)


@pytest.mark.parametrize("domain,task_id", [("airline", "7"), ("retail", "0")])
def test_same_prompt_observations_trajectory_and_reward_as_tau2s_gym(domain: str, task_id: str) -> None:
    """The pipeline's loop over tau2's own gym env (its prompt from the gym's policy and tools, each action as the
    gym's action string, each gym observation read back into user messages) against the env: the same system
    prompt, the same messages for the policy at every step, the same trajectory, the same reward."""
    task = loader.load_task(domain, task_id)
    turns = [FIRST_USER_TURN, "Yes, please go ahead.", "Thanks."]
    texts = [respond("Sure, let me check.")] + [block(*a) for a in gold_actions(task)] + [
        respond(final_text(task)), block("done", {})]
    gym = _gym_env(domain, task_id, turns)
    obs, info = gym.reset()
    gym_messages = [{"role": "system", "content": pipeline.system_prompt(
        domain, info["policy"], [t.openai_schema for t in info["tools"]])}]
    gym_messages += pipeline.followup_messages(obs, pipeline.RESET_CALL, after_tool=False)
    env = make_env("tau2", domain=domain, task_id=task_id, protocol="pipeline",
                   user={"kind": "scripted", "turns": turns})
    assert env.reset().messages == gym_messages
    for text in texts:
        action = pipeline.parse_action(text)
        obs, reward, terminated, _, info = gym.step(pipeline.env_action(action))
        result = env.step(text)
        assert result.done == terminated
        if terminated:
            break
        assert result.observation.messages == pipeline.followup_messages(obs, action.call,
                                                                         after_tool=action.name != "respond")
    assert result.done and reward == result.reward == 1.0
    assert comparable(env.simulation.messages) == comparable(gym._simulation_run.messages)


def test_telecom_dual_control_and_a_multiline_reply_as_tau2s_gym() -> None:
    """Telecom: the user runs its own phone tools between the agent's turns (the gym shows the agent only the
    user's text), and a reply of several lines reaches the policy as the pipeline reads the gym's text."""
    task_id = loader.task_ids("telecom")[0]
    turns = ["My mobile data does not work.",
             {"content": None, "tool_calls": [{"name": "toggle_airplane_mode"}, {"name": "toggle_roaming"}]},
             "Done.\nIt works now: thanks", "Bye."]
    texts = [respond("Please turn airplane mode off and roaming on."), respond("Glad to help."), block("done", {})]
    gym = _gym_env("telecom", task_id, turns)
    obs, _ = gym.reset()
    env = make_env("tau2", domain="telecom", task_id=task_id, protocol="pipeline",
                   user={"kind": "scripted", "turns": turns})
    assert env.reset().messages[1:] == pipeline.followup_messages(obs, pipeline.RESET_CALL, after_tool=False)
    seen = []
    for text in texts:
        action = pipeline.parse_action(text)
        obs, reward, terminated, _, _ = gym.step(pipeline.env_action(action))
        result = env.step(text)
        assert result.done == terminated
        if not terminated:
            assert result.observation.messages == pipeline.followup_messages(obs, action.call, after_tool=False)
            seen.extend(result.observation.messages)
    assert seen == [{"role": "user", "content": "Done."}, {"role": "user", "content": "Bye."}]
    assert result.done and reward == result.reward == 1.0
    assert comparable(env.simulation.messages) == comparable(gym._simulation_run.messages)
