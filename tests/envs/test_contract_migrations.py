"""An env written to the contract before 0.1.0 fails when its class is defined, naming the migration
(CHANGELOG.md); an old EpisodeResult field names its new one."""

from __future__ import annotations

from typing import Any

import pytest

from agent_tune.envs import BaseToolEnv, CallToolEnv, EnvContractError, Observation, Outcome, Step
from agent_tune.envs.base import RENAMED_HOOKS, RETIRED_NAMES
from agent_tune.errors import EnvError
from agent_tune.parsing.types import ParsedResponse, ToolCall
from agent_tune.rollout.runner import EpisodeResult


def test_call_tool_on_base_tool_env_names_call_tool_env() -> None:
    with pytest.raises(EnvContractError, match=r"ShopEnv\.call_tool: .*subclass `CallToolEnv` instead") as info:
        class ShopEnv(BaseToolEnv):  # last week's docs: call_tool on the base class, no act
            def reset(self, **task: Any) -> Observation:
                return Observation()

            def call_tool(self, call: ToolCall) -> Any:
                return None

            def outcome(self) -> Outcome:
                return Outcome(reward=0.0, accuracy=0.0)

    assert isinstance(info.value, EnvError) and isinstance(info.value, TypeError)
    assert "\n" not in str(info.value) and "CHANGELOG.md" in str(info.value)


@pytest.mark.parametrize("name", sorted(RETIRED_NAMES))
def test_each_retired_name_fails_at_class_definition(name: str) -> None:
    with pytest.raises(EnvContractError) as info:
        type("OldEnv", (CallToolEnv,), {name: classmethod(lambda cls: ())})
    message = str(info.value)
    assert message.startswith(f"OldEnv.{name}: the env contract changed in agent-tune 0.1.0; ")
    assert RETIRED_NAMES[name] in message and "\n" not in message


def test_an_env_that_still_defines_stop_fails_naming_is_answer() -> None:
    with pytest.raises(EnvContractError) as info:
        class Answers(CallToolEnv):  # the hook's name until is_answer
            def stop(self, raw_response: str) -> bool:
                return "<tool_call>" not in raw_response

    message = str(info.value)
    assert ".Answers.stop: the hook was renamed after agent-tune 0.1.0; rename it `is_answer(raw)`" in message
    assert RENAMED_HOOKS["stop"] in message and "CHANGELOG.md" in message and "\n" not in message
    assert isinstance(info.value, EnvError) and isinstance(info.value, TypeError)


def test_is_answer_is_the_hook_the_template_asks() -> None:
    class NeverAnswers(CallToolEnv):
        def reset(self, **task: Any) -> Observation:
            super().reset()
            return Observation()

        def call_tool(self, call: ToolCall) -> Any:
            raise AssertionError("no call is decoded")

        def is_answer(self, raw_response: str) -> bool:
            return raw_response == "done"

        def outcome(self) -> Outcome:
            return Outcome(reward=1.0, accuracy=1.0)

    env = NeverAnswers()
    env.parser = None
    env.extract_tool_calls = lambda raw: ParsedResponse(content=raw)  # type: ignore[method-assign]
    env.reset()
    assert not env.step("thinking").done
    assert env.step("done").done and env.status.turns_completed == 1


def test_the_old_names_get_their_own_migrations() -> None:
    assert "TaskCatalogue" in RETIRED_NAMES["tasks"] and "TaskCatalogue" in RETIRED_NAMES["splits"]
    assert "super().reset()" in RETIRED_NAMES["begin_episode"]


def test_report_as_a_classmethod_names_eval_report() -> None:
    with pytest.raises(EnvContractError, match=r"report = EvalReport"):
        class OldReport(CallToolEnv):
            @classmethod
            def report(cls, records: Any, summary: Any) -> dict[str, Any]:
                return {}


def test_an_env_on_todays_contract_defines_fine() -> None:
    class Fine(BaseToolEnv):
        def reset(self, **task: Any) -> Observation:
            super().reset()
            return Observation()

        def act(self, step: Step) -> None:
            step.end_turn()

        def call_tool(self, call: ToolCall) -> None:  # a helper of its own act: allowed
            return None

        def outcome(self) -> Outcome:
            return Outcome(reward=1.0, accuracy=1.0)

    class Calls(CallToolEnv):
        def reset(self, **task: Any) -> Observation:
            super().reset()
            return Observation()

        def call_tool(self, call: ToolCall) -> Any:
            return None

        def outcome(self) -> Outcome:
            return Outcome(reward=1.0, accuracy=1.0)

    assert Fine().reset() == Observation() and Calls().reset() == Observation()


@pytest.mark.parametrize(("old", "new"), [("termination", "stop_reason"), ("stop_reasons", "finish_reasons")])
def test_episode_result_old_field_names_its_new_name(old: str, new: str) -> None:
    result = EpisodeResult.__new__(EpisodeResult)
    with pytest.raises(AttributeError, match=rf"EpisodeResult\.{old} was renamed .*EpisodeResult\.{new}"):
        getattr(result, old)
    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        result.nonsense  # noqa: B018


def test_a_reset_calling_begin_episode_fails_at_class_definition() -> None:
    with pytest.raises(EnvContractError, match=r"ShopEnv\.reset calls begin_episode\(\).*super\(\)\.reset\(\)"):
        class ShopEnv(CallToolEnv):
            def reset(self, **task: Any) -> Observation:
                self.begin_episode()
                return Observation()
