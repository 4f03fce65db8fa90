"""A simulated user of your own, by class path (``user.kind: package.module:Class``): it sees what it answers and
can react; bad paths and kwargs fail at start-up naming the key."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from agent_tune.envs import make_env
from agent_tune.users import UserConfig, UserReply, make_user

PATH = f"{__name__}:EchoUser"


class EchoUser:
    """Opens with a request, then repeats what the agent said, until the agent says ``stop_word``."""

    def __init__(self, stop_word: str = "bye") -> None:
        self.stop_word = stop_word

    async def reply(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> UserReply:
        said = [m for m in messages if m["role"] == "user"]  # the agent's messages, from the user's side
        if not said or said[-1]["content"] is None:
            return UserReply("Please create a task.")
        if self.stop_word in said[-1]["content"]:
            return UserReply("###STOP###")
        return UserReply(f"You said: {said[-1]['content']}")


def test_a_user_class_reacts_to_what_it_is_shown() -> None:
    env = make_env("tau2", domain="mock", task_id="create_task_1", user={"kind": PATH, "kwargs": {"stop_word": "ciao"}})
    env.reset()
    r = env.step("Which title should the task have?")
    assert not r.done and r.observation.messages[-1] == {"role": "user",
                                                         "content": "You said: Which title should the task have?"}
    r = env.step("ciao")
    assert r.done and r.info["termination_reason"] == "user_stop"


def test_make_user_builds_one_per_episode() -> None:
    config = UserConfig.parse({"kind": PATH}, "user")
    a, b = make_user(config), make_user(config)
    assert isinstance(a, EchoUser) and a is not b and a.stop_word == "bye"


@pytest.mark.parametrize("user, message", [
    ({"kind": "tests.users.no_such_module:User"}, "user.kind='tests.users.no_such_module:User': cannot import"),
    ({"kind": f"{__name__}:UserConfig"}, "is not a user class"),
    ({"kind": PATH, "kwargs": {"stop": "x"}}, "user.kwargs for"),
    ({"kind": "scripted", "kwargs": {"a": 1}}, "user.kwargs are for a user class"),
    ({"kind": "robot"}, "nor a 'package.module:Class' path"),
])
def test_bad_user_fails_at_start_up_naming_the_key(user, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        UserConfig.parse(user, "user")
