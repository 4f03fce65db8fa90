"""Shared pieces of the tau2 tests: gold replays, and the same replay through tau2's own orchestrator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from tau2.agent.base import LocalAgent
from tau2.data_model.message import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tau2.data_model.simulation import SimulationRun
from tau2.data_model.tasks import Task
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.orchestrator.orchestrator import Orchestrator
from tau2.user.base import STOP, BaseUser, UserState

from agent_tune.envs import make_env
from agent_tune.envs.tau2 import loader

REPO = Path(__file__).resolve().parents[2]
FIRST_USER_TURN = "Hi, I need help with my account."
READ_ONLY_PREFIXES = ("get_", "find_", "list_", "search_", "calculate", "think", "transfer_")


def hermes(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def gold_actions(task: Task) -> list[tuple[str, dict[str, Any]]]:
    criteria = task.evaluation_criteria
    return [(a.name, dict(a.arguments)) for a in (criteria.actions or [])] if criteria else []


def final_text(task: Task) -> str:
    info = (task.evaluation_criteria.communicate_info or []) if task.evaluation_criteria else []
    return ("All done. " + " ".join(str(i) for i in info)).strip()


def tasks_with_actions(domain: str) -> list[str]:
    return [tid for tid in loader.task_ids(domain) if gold_actions(loader.load_task(domain, tid))]


def is_write(name: str) -> bool:
    return not name.startswith(READ_ONLY_PREFIXES)


def replay_env(domain: str, task_id: str, actions: Sequence[tuple[str, dict[str, Any]] | str], closing: str,
               user_turns: Sequence[Any] = (FIRST_USER_TURN,)):
    """Play ``actions`` (a (name, arguments) pair: one hermes block per generation; a str: a message to the
    user) and ``closing`` through our env with a scripted user; returns (env, last StepResult)."""
    env = make_env("tau2", domain=domain, task_id=task_id, user={"kind": "scripted", "turns": list(user_turns)})
    env.reset()
    result = None
    for text in [a if isinstance(a, str) else hermes(*a) for a in actions] + [closing]:
        result = env.step(text)
        if result.done:
            break
    assert result is not None and result.done, "the scripted user stops after the closing message"
    return env, result


class _ScriptedAgent(LocalAgent):
    """A tau2 agent that sends fixed messages (tau2's own orchestrator drives it)."""

    def __init__(self, tools, policy, messages: list[AssistantMessage]) -> None:
        super().__init__(tools=tools, domain_policy=policy)
        self.queue = list(messages)

    def get_init_state(self, message_history=None):
        return None

    def generate_next_message(self, message, state):
        # a fresh copy: the orchestrator orders the trajectory by the messages' creation timestamps
        return AssistantMessage(**self.queue.pop(0).model_dump(exclude={"timestamp"})), state

    @classmethod
    def is_stop(cls, message: AssistantMessage) -> bool:
        return message.content is not None and STOP in message.content


class _ScriptedUser(BaseUser):
    """A tau2 user that says fixed turns (a str, or {"content", "tool_calls": [{"name", "arguments"}]})."""

    def __init__(self, turns: Sequence[Any]) -> None:
        super().__init__(instructions=None, llm="scripted")
        self.turns = list(turns)

    def get_init_state(self, message_history=None) -> UserState:
        return UserState(system_messages=[], messages=[])

    def generate_next_message(self, message, state):
        turn = self.turns.pop(0) if self.turns else STOP
        if isinstance(turn, str):
            return UserMessage(role="user", content=turn), state
        calls = [ToolCall(id=f"u{i}", name=c["name"], arguments=c.get("arguments", {}), requestor="user")
                 for i, c in enumerate(turn.get("tool_calls") or [])]
        return UserMessage(role="user", content=turn.get("content"), tool_calls=calls or None), state

    @classmethod
    def is_stop(cls, message: UserMessage) -> bool:
        from tau2.user.user_simulator import UserSimulator
        return UserSimulator.is_stop(message)


def reference_run(domain: str, task_id: str, actions: Sequence[tuple[str, dict[str, Any]] | str], closing: str,
                  max_steps: int = 200, max_errors: int = 10,
                  user_turns: Sequence[Any] = (FIRST_USER_TURN,), score: bool = True) -> SimulationRun:
    """The same replay through tau2's own ``Orchestrator`` (scripted agent and user), scored by tau2 unless
    ``score=False``."""
    task = loader.load_task(domain, task_id)
    environment = loader.new_environment(domain)
    messages = [AssistantMessage(role="assistant", content=a) if isinstance(a, str) else
                AssistantMessage(role="assistant", content=None, tool_calls=[ToolCall(id=f"ref_{i}", name=a[0],
                                                                                      arguments=a[1])])
                for i, a in enumerate(actions)]
    messages.append(AssistantMessage(role="assistant", content=closing))
    agent = _ScriptedAgent(environment.get_tools(), environment.get_policy(), messages)
    orchestrator = Orchestrator(domain=domain, agent=agent, user=_ScriptedUser(user_turns),
                                environment=environment, task=task, max_steps=max_steps, max_errors=max_errors)
    simulation = orchestrator.run()
    if not score:
        return simulation
    simulation.reward_info = evaluate_simulation(simulation=simulation, task=task, evaluation_type=EvaluationType.ALL,
                                                 solo_mode=False, domain=domain)
    return simulation


def comparable(messages: Sequence[Message]) -> list[tuple[Any, ...]]:
    """A trajectory without ids and timestamps: what must be equal between two runs of the same replay."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            content = json.loads(m.content) if m.content and m.content[:1] in "[{" else m.content
            out.append(("tool", m.requestor, content, m.error))
        else:
            calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True), c.requestor) for c in m.tool_calls or ())
            out.append((m.role, m.content, calls))
    return out


@lru_cache(maxsize=None)
def gold_reference(domain: str, task_id: str) -> tuple[tuple[Any, ...], ...]:
    """:func:`comparable` of tau2's own orchestrator replaying ``task_id``'s gold actions, computed once per test
    session: the native protocol's and the pipeline protocol's fidelity tests compare with the same reference."""
    task = loader.load_task(domain, task_id)
    ref = reference_run(domain, task_id, gold_actions(task), final_text(task), score=False)
    return tuple(comparable(ref.messages))



def gold_replay_scores_as_tau2(play: Callable[..., Any], domain: str, task_id: str) -> None:
    """``task_id``'s gold actions played by ``play`` (:func:`replay_env`, or a protocol's own replay with its
    signature) score 1.0 and give tau2's own orchestrator's trajectory (:func:`gold_reference`)."""
    task = loader.load_task(domain, task_id)
    env, result = play(domain, task_id, gold_actions(task), final_text(task))
    assert result.reward == 1.0, (domain, task_id, result.info)
    assert tuple(comparable(env.simulation.messages)) == gold_reference(domain, task_id), (domain, task_id)


def every_gold_replay_scores_as_tau2(play: Callable[..., Any], domain: str, ids: Sequence[str]) -> None:
    """:func:`gold_replay_scores_as_tau2` for every id, half of them in a second Python process: tau2's evaluator is
    pure Python (most of a gold replay's 0.6 s: it loads the domain's database three times), so the slow all-tasks
    tests would otherwise leave the second core idle. ``play`` is a module-level function (the other process
    imports it by name); a failure is raised naming the task. A plain subprocess, not a multiprocessing pool, whose
    semaphores would leave Python's resource tracker running under the suite (the sandbox tests check for stray
    children)."""
    here, there = list(ids)[::2], list(ids)[1::2]
    command = [sys.executable, "-m", "tests.envs.tau2_helpers", play.__module__, play.__name__, domain, *there]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as other:
        try:
            _each_gold_replay(play, domain, here)
            out, _ = other.communicate(timeout=1200)
        finally:
            if other.poll() is None:
                other.kill()
    assert other.returncode == 0, out[-6000:]


def _each_gold_replay(play: Callable[..., Any], domain: str, ids: Sequence[str]) -> None:
    """:func:`gold_replay_scores_as_tau2` for each id in turn; a failure names the task."""
    for task_id in ids:
        try:
            gold_replay_scores_as_tau2(play, domain, task_id)
        except AssertionError as exc:
            raise AssertionError(f"{domain} task {task_id}: {exc}") from exc


if __name__ == "__main__":  # the other process of every_gold_replay_scores_as_tau2: MODULE FUNCTION DOMAIN ID...
    import importlib

    module, function, domain_name, *task_ids = sys.argv[1:]
    try:
        _each_gold_replay(getattr(importlib.import_module(module), function), domain_name, task_ids)
    except AssertionError as exc:
        raise SystemExit(str(exc))
