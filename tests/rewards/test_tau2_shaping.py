"""tau2 reward shaping (agent_tune/rewards/tau2_shaping.py): hand-worked partial scores, the domain-adaptive
alpha, the config's validation, and the env's shaped reward on a real airline episode (accuracy stays tau2's)."""

from __future__ import annotations

import pytest

from agent_tune.envs import make_env
from agent_tune.envs.tau2 import loader
from agent_tune.rewards.tau2_shaping import (
    PartialWeights,
    Tau2ShapingConfig,
    partial_components,
    partial_score,
    shape_reward,
)
from tests.envs.tau2_helpers import FIRST_USER_TURN, final_text, gold_actions, hermes

# 2 of 4 actions matched, 1 of 1 communicated, DB wrong, no env assertions
INFO = {
    "reward": 0.0,
    "action_checks": [{"action_match": True}, {"action_match": False}, {"action_match": True},
                      {"action_match": False}],
    "communicate_checks": [{"met": True}],
    "env_assertions": [],
    "db_check": {"db_match": False, "db_reward": 0.0},
}


def test_components_present_only() -> None:
    assert partial_components(INFO) == {"action": 0.5, "communicate": 1.0, "db": 0.0}
    assert partial_components({"reward": 0.0, "info": {"note": "premature"}}) == {}
    assert partial_components(None) == {}


def test_partial_score_renormalises_over_present_components() -> None:
    # default weights: (0.5 * 0.5 + 0.15 * 1.0 + 0.0 * 0.0) / (0.5 + 0.15 + 0.0) = 0.4 / 0.65
    assert partial_score(INFO, PartialWeights()) == pytest.approx(0.4 / 0.65)
    # telecom's weights: (0.35 * 0.5 + 0.35 * 1.0) / 0.70 = 0.75
    telecom = Tau2ShapingConfig().weights_for("telecom")
    assert partial_score(INFO, telecom) == pytest.approx(0.75)
    # with an env assertion half met: (0.25 + 0.15 + 0.35 * 0.5) / 1.0
    with_env = {**INFO, "env_assertions": [{"met": True}, {"met": False}]}
    assert partial_score(with_env, PartialWeights()) == pytest.approx(0.575)
    assert partial_score({}, PartialWeights()) == 0.0
    # only a zero-weight component present: nothing to credit
    assert partial_score({"db_check": {"db_match": True}}, PartialWeights()) == 0.0


def test_domain_adaptive_alpha() -> None:
    config = Tau2ShapingConfig(alpha=0.25)
    assert config.alpha_for("airline") == pytest.approx(0.25)
    assert config.alpha_for("retail") == pytest.approx(0.2)
    assert config.alpha_for("telecom") == pytest.approx(0.4)
    assert config.alpha_for("mock") == pytest.approx(0.25)
    assert Tau2ShapingConfig(alpha=0.25, domain_adaptive=False).alpha_for("telecom") == pytest.approx(0.25)
    shaped = shape_reward(0.0, INFO, "telecom", config)
    assert shaped.reward == pytest.approx(0.4 * 0.75) and shaped.task_reward == 0.0
    assert shaped.partial == pytest.approx(0.75)
    assert shape_reward(1.0, INFO, "retail", config).reward == pytest.approx(1.0 + 0.2 * 0.4 / 0.65)
    assert shape_reward(0.0, None, "airline", config).reward == 0.0


def test_config_parse_and_validation() -> None:
    config = Tau2ShapingConfig.parse({"alpha": 0.25, "weights": {"action": 1, "communicate": 0,
                                                                  "env_assertion": 0, "db": 0},
                                      "domain_alpha": {"airline": 2.0}}, "reward_shaping")
    assert config.alpha_for("airline") == 0.5 and config.alpha_for("retail") == 0.25
    assert partial_score(INFO, config.weights_for("airline")) == 0.5
    assert not Tau2ShapingConfig.parse(None, "reward_shaping").enabled
    for bad, key in (({"alpha": -1}, "reward_shaping.alpha"), ({"alpha": "x"}, "reward_shaping.alpha"),
                     ({"alfa": 0.1}, "unknown key(s) alfa"), ({"weights": {"acton": 1}}, "acton"),
                     ({"weights": {"action": 0, "communicate": 0, "env_assertion": 0, "db": 0}}, "all be 0"),
                     ({"domain_alpha": {"bank": 1.0}}, "unknown domain(s) bank"),
                     ({"domain_adaptive": "yes"}, "reward_shaping.domain_adaptive"),
                     ({"domain_weights": {"telecom": {"action": -0.1}}}, "domain_weights.telecom.action")):
        with pytest.raises(ValueError, match=key.replace("(", r"\(").replace(")", r"\)")):
            Tau2ShapingConfig.parse(bad, "reward_shaping")


def test_env_rejects_bad_shaping_naming_the_key() -> None:
    with pytest.raises(ValueError, match="tau2 env: reward_shaping.alpha"):
        make_env("tau2", domain="mock", task_id="create_task_1", user={"kind": "scripted"},
                 reward_shaping={"alpha": -0.5})


def test_env_shaped_reward_on_an_airline_episode() -> None:
    """Airline task 2 (basis DB + COMMUNICATE, nothing to communicate): its 3 reads played, the certificate
    (the one write) left out. tau2: reward 0, actions 3/4, DB wrong, no communicate checks -> partial =
    (0.5 * 0.75 + 0.0 * 0.0) / 0.5 = 0.75, shaped = 0.25 * 0.75."""
    task = loader.load_task("airline", "2")
    actions = gold_actions(task)
    assert [a[0] for a in actions][-1] == "send_certificate"
    env = make_env("tau2", domain="airline", task_id="2", user={"kind": "scripted", "turns": [FIRST_USER_TURN]},
                   reward_shaping={"alpha": 0.25})
    env.reset()
    for text in [hermes(*a) for a in actions[:-1]] + [final_text(task)]:
        result = env.step(text)
        if result.done:
            break
    assert result.done and result.info["termination_reason"] == "user_stop"
    assert result.info["accuracy"] == 0.0 and result.info["tau2_reward"] == 0.0
    assert result.info["tau2_partial_score"] == pytest.approx(0.75)
    assert result.reward == pytest.approx(0.1875)
    # the same episode unshaped (the default): the reward is tau2's
    plain = make_env("tau2", domain="airline", task_id="2", user={"kind": "scripted", "turns": [FIRST_USER_TURN]})
    plain.reset()
    for text in [hermes(*a) for a in actions[:-1]] + [final_text(task)]:
        result = plain.step(text)
        if result.done:
            break
    assert result.reward == 0.0 and result.info["tau2_partial_score"] == pytest.approx(0.75)
    assert result.info["tau2_shaping_alpha"] == 0.0
