"""Real BFCL episodes (bfcl-eval backends, ground-truth replies) through the runner, with real tokenizers."""

from __future__ import annotations

import importlib.util

import pytest

# Skipped only when bfcl-eval is absent (not on an ImportError inside it: importorskip would hide a broken pin).
if importlib.util.find_spec("bfcl_eval") is None:  # pragma: no cover - bfcl-eval is a pinned dependency
    pytest.skip("bfcl-eval is not installed", allow_module_level=True)
import bfcl_eval  # noqa: E402,F401 - installed: an ImportError inside it fails the module loudly

from agent_tune.envs import make_env  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.data import load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode  # noqa: E402
from tests.rollout.scripted import ScriptedPolicy  # noqa: E402

ENTRIES = ["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_miss_param_0", "multi_turn_long_context_0"]


@pytest.mark.parametrize("template", ["qwen3_instruct", "smollm2_tools"])
@pytest.mark.parametrize("test_id", ENTRIES)
async def test_bfcl_ground_truth_episode_is_token_exact(test_id, template, qwen_tok, smol_tok):
    renderer = ChatRenderer(qwen_tok if template.startswith("qwen") else smol_tok, template)
    replies = ground_truth_responses(load_entry(test_id), get_tool_parser("hermes"))
    env = make_env("bfcl", test_id=test_id, tool_parser="hermes")
    policy = ScriptedPolicy(renderer, replies)
    try:
        res = await run_episode(env, policy, renderer, RolloutLimits(16384, 16384), debug_drift=True)
    finally:
        env.close()
    assert res.stop_reason == "done" and res.reward == 1.0 and res.info["accuracy"] == 1.0
    assert res.num_generations == len(replies)
    assert res.drift.ok, str(res.drift)
    traj = res.trajectory
    roles = [m["role"] for m in res.messages]
    entry = load_entry(test_id)
    assert roles.count("user") == entry.num_turns  # every user turn came as an env delta after the first
    if entry.missed_function:  # miss_func: the tool list grew mid-episode, the system prompt was not re-rendered
        held_back = [f["function"] for fs in entry.missed_function.values() for f in fs]
        assert {f["name"] for f in held_back} <= {t["function"]["name"] for t in res.tools}
        prompt = renderer.decode(traj.prompt_ids)
        assert held_back and not any(f"{f['name']}(" in prompt or f'"{f["name"]}"' in prompt for f in held_back)
    assert any(a == b == "tool" for a, b in zip(roles, roles[1:]))  # consecutive tool results occurred
    assert [t for t, m in zip(traj.response_ids, traj.response_mask) if m] == [
        t for o in policy.outputs for t in o.token_ids]
