"""One tau2 conversation: the turn logic of tau2's orchestrator, driven one agent message at a time.

tau2's ``Orchestrator.run`` passes a message per step between three roles (agent, user, environment) and
checks its limits after every step whose message is not bound for the environment. :class:`Tau2Episode`
keeps the same state (the trajectory of tau2 messages, the user's state, ``step_count``, ``num_errors``,
the role the last message goes to) but is driven from outside: :meth:`agent_acts` takes the policy's
message (and runs its tool calls), :meth:`user_acts` lets the user answer until the floor is the agent's
again (running the user's own tool calls, telecom). What ends it, as in the orchestrator:

* the agent's message contains ``###STOP###`` (tau2's ``LLMSoloAgent``/``GymAgent`` rule) -> ``agent_stop``;
* the user's message contains ``###STOP###``, ``###TRANSFER###`` or ``###OUT-OF-SCOPE###`` -> ``user_stop``;
* ``step_count >= max_steps`` or ``num_errors >= max_errors`` after a step not bound for the environment
  (checked after the stop signals, so they override them on the step that reaches a limit, as in tau2);
* the user cannot answer (:class:`~agent_tune.users.UserError`), or does not within the call timeout ->
  ``user_error``; an empty agent message
  (tau2's ``validate`` rejects it) -> ``agent_error``; :meth:`cut` (token budget) -> ``max_steps``.

Steps count as in the orchestrator: each agent message, each user message, each batch of tool results.
Tool errors (``ToolMessage.error``, from either side) count towards ``max_errors``; so does each call
block of the policy that could not be decoded (it runs nothing and is not recorded in the trajectory:
tau2 has no such message; its text never reached the user).

The trajectory holds exactly the messages tau2 would hold, tool results untouched and tool-call ids
matching, so tau2's evaluator can re-execute it (:mod:`agent_tune.envs.tau2.scoring`).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any, Sequence

from tau2.agent.llm_agent import LLMAgent, LLMSoloAgent
from tau2.data_model.message import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.data_model.tasks import Task
from tau2.environment.environment import Environment
from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE
from tau2.user.base import is_valid_user_history_message
from tau2.user.user_simulator import UserSimulator
from tau2.utils.llm_utils import to_litellm_messages

from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, EnvTimeoutError
from agent_tune.sync import acall_in_thread
from agent_tune.users.base import User, UserError, UserReply

DEFAULT_MAX_STEPS = 200  # tau2's CLI default (tau2.config.DEFAULT_MAX_STEPS)
PIPELINE_MAX_STEPS = 100  # Tau2-RL-Pipeline's (its gym env's and eval's max_steps)
DEFAULT_MAX_ERRORS = 10  # tau2.config.DEFAULT_MAX_ERRORS


def default_max_steps(protocol: str = "native") -> int:
    """tau2's step limit when none is given: tau2's CLI default, or the pipeline's with its protocol."""
    return PIPELINE_MAX_STEPS if protocol == "pipeline" else DEFAULT_MAX_STEPS

AGENT, USER, ENV = "agent", "user", "env"


class Tau2Episode:
    """The state of one tau2 conversation on its own ``environment`` (see the module docstring)."""

    def __init__(self, domain: str, task: Task, environment: Environment, max_steps: int, max_errors: int) -> None:
        self.domain = domain
        self.task = task
        self.environment = environment
        self.max_steps = max_steps
        self.max_errors = max_errors
        self.step_count = 0
        self.num_errors = 0
        self.termination: TerminationReason | None = None
        self.error_reason: str | None = None
        self.timed_out = False  # the user ended it by not answering in time (the time-limit rule)
        self.start_time = datetime.now().isoformat()
        try:
            self.user_tools = environment.get_user_tools()
        except ValueError:  # the domain gives the user no tools
            self.user_tools = None
        user_sim = UserSimulator(tools=self.user_tools, instructions=str(task.user_scenario))
        self.agent_system_prompt = LLMAgent(tools=environment.get_tools(), domain_policy=environment.get_policy()
                                            ).system_prompt
        self.user_system_prompt = user_sim.system_prompt
        self._call_ids = 0
        self._start(user_sim)

    # ------------------------------------------------------------------ start
    def _start(self, user_sim: UserSimulator) -> None:
        """Set the environment's state and the first message, as ``Orchestrator.initialize`` does (a
        message history must end with a text message: the agent's, to the user, or the user's, to the agent)."""
        state = self.task.initial_state
        history: list[Message] = [m.model_copy(deep=True) for m in (state.message_history or [])] if state else []
        for m in history:
            m.turn_idx = None
        self.environment.set_state(
            initialization_data=state.initialization_data if state else None,
            initialization_actions=state.initialization_actions if state else None,
            message_history=history,
        )
        if not history:
            first = DEFAULT_FIRST_AGENT_MESSAGE.model_copy(deep=True)
            self.trajectory: list[Message] = [first]
            self.user_state = user_sim.get_init_state()
            self._to_user: list[Message] = [first]  # what the user has not seen yet
            self.to_role = USER
        else:
            last = history[-1]
            if not isinstance(last, (AssistantMessage, UserMessage)) or last.is_tool_call():
                raise ValueError(f"tau2 task {self.task.id!r}: a message history ending with "
                                 f"{type(last).__name__} (not a text message) is not supported")
            self.trajectory = history
            if isinstance(last, AssistantMessage):
                self.user_state = user_sim.get_init_state(
                    [m for m in history[:-1] if is_valid_user_history_message(m)])
                self._to_user, self.to_role = [last], USER
                if LLMSoloAgent.is_stop(last):
                    self.termination = TerminationReason.AGENT_STOP
            else:
                self.user_state = user_sim.get_init_state([m for m in history if is_valid_user_history_message(m)])
                self._to_user, self.to_role = [], AGENT
                if UserSimulator.is_stop(last):
                    self.termination = TerminationReason.USER_STOP
        self.environment.sync_tools()

    @property
    def done(self) -> bool:
        return self.termination is not None

    def new_call_id(self) -> str:
        """A tool-call id unique within the episode (tau2 matches results to calls by id)."""
        self._call_ids += 1
        return f"call_at_{self._call_ids}"

    # ------------------------------------------------------------------ the limits
    def _after_step(self) -> None:
        """What ``Orchestrator.run`` does after each step: count it, sync tools, check the limits unless the
        message is bound for the environment."""
        self.step_count += 1
        self.environment.sync_tools()
        if self.to_role == ENV:
            return
        if self.step_count >= self.max_steps:
            self.termination = TerminationReason.MAX_STEPS
        if self.num_errors >= self.max_errors:
            self.termination = TerminationReason.TOO_MANY_ERRORS

    def _run_calls(self, calls: Sequence[ToolCall]) -> list[ToolMessage]:
        """The environment's step: each call on tau2's environment, errors counted."""
        results = [self.environment.get_response(call) for call in calls]
        self.num_errors += sum(1 for r in results if r.error)
        self.trajectory.extend(results)
        return results

    # ------------------------------------------------------------------ the agent
    def agent_acts(self, message: AssistantMessage, undecodable: int = 0) -> list[ToolMessage]:
        """The policy's message (``undecodable``: call blocks that could not be decoded); returns the
        results of its tool calls (empty when it spoke to the user or ended the episode)."""
        if self.done or self.to_role != AGENT:
            raise RuntimeError(f"tau2 episode: the agent cannot act now (to_role={self.to_role}, done={self.done})")
        if message.is_tool_call() and LLMSoloAgent.is_stop(message):
            message.tool_calls = None  # a stop ends the episode: its calls are not run (tau2 would not either)
        if undecodable and not message.is_tool_call():
            # only broken call blocks (maybe with text around them): an attempt at calling tools, so nothing
            # reaches the user, and nothing reached the environment
            self.num_errors += undecodable
            self.step_count += 1  # the agent's message (bound for the environment: no limit check) ...
            self.to_role = AGENT
            self._after_step()  # ... and the environment's answer (the errors), after which limits apply
            return []
        if not message.is_tool_call() and not message.has_text_content():
            self.termination = TerminationReason.AGENT_ERROR
            self.error_reason = "empty agent message"
            return []
        self.trajectory.append(message)
        self.to_role = ENV if message.is_tool_call() else USER
        if LLMSoloAgent.is_stop(message):
            self.termination = TerminationReason.AGENT_STOP
        self._after_step()
        if self.to_role == USER:
            self._to_user.append(message)
            return []
        results = self._run_calls(message.tool_calls or [])
        self.num_errors += undecodable
        self.to_role = AGENT
        self._after_step()
        return results

    # ------------------------------------------------------------------ the user
    def user_messages(self) -> list[dict[str, Any]]:
        """The conversation from the user's side, as tau2's ``UserSimulator`` sends it (OpenAI format)."""
        for m in self._to_user:
            self.user_state.messages.append(m)
        self._to_user = []
        flipped = self.user_state.system_messages + self.user_state.flip_roles()
        return to_litellm_messages(flipped)

    def user_tool_schemas(self) -> list[dict[str, Any]] | None:
        return [t.openai_schema for t in self.user_tools] if self.user_tools else None

    async def user_acts(self, user: User, timeout: float = DEFAULT_CALL_TIMEOUT) -> list[UserMessage]:
        """Let the user answer until the floor is the agent's or the episode ends; returns the user's
        messages to the agent (text only; its tool calls and their results stay between user and
        environment, as in tau2). A user that cannot answer ends the episode (``user_error``); so does one that
        does not answer within ``timeout`` seconds (``timed_out``): each reply runs on an event loop in a thread of
        its own, abandoned then, so a user that blocks (not only one that awaits) is bounded too."""
        said: list[UserMessage] = []
        while not self.done and self.to_role == USER:
            try:
                reply: UserReply = await acall_in_thread(asyncio.run, user.reply(self.user_messages(),
                                                                                 self.user_tool_schemas()),
                                                         timeout=timeout, what="tau2 user reply")
            except EnvTimeoutError as exc:
                self.termination = TerminationReason.USER_ERROR
                self.error_reason, self.timed_out = str(exc), True
                break
            except UserError as exc:
                self.termination = TerminationReason.USER_ERROR
                self.error_reason = str(exc)
                break
            except Exception as exc:  # noqa: BLE001 - a broken user ends the episode, never the trainer
                self.termination = TerminationReason.USER_ERROR
                self.error_reason = f"{type(exc).__name__}: {exc}"
                break
            message = UserMessage(role="user", content=reply.content, tool_calls=[
                ToolCall(id=c.id, name=c.name, arguments=dict(c.arguments), requestor="user")
                for c in reply.tool_calls] or None)
            self.trajectory.append(message)
            self.user_state.messages.append(message)
            if UserSimulator.is_stop(message):
                self.termination = TerminationReason.USER_STOP
            self.to_role = ENV if message.is_tool_call() else AGENT
            self._after_step()
            if self.to_role == AGENT:
                said.append(message)
                break
            results = self._run_calls(message.tool_calls or [])
            self._to_user.extend(results)
            self.to_role = USER
            self._after_step()
        return said

    # ------------------------------------------------------------------ the end
    def fail(self, reason: str) -> None:
        """End the episode on the agent's failure (the pipeline protocol's parse error): tau2's
        ``agent_error``, ``reason`` kept as the error."""
        if not self.done:
            self.termination = TerminationReason.AGENT_ERROR
            self.error_reason = reason

    def cut(self) -> None:
        """End the episode from outside (the policy's token budget ran out): tau2's ``max_steps``."""
        if not self.done:
            self.termination = TerminationReason.MAX_STEPS

    def simulation(self) -> SimulationRun:
        """The episode as tau2's ``SimulationRun`` (messages in order, ``turn_idx`` set)."""
        if self.termination is None:
            raise RuntimeError("tau2 episode: simulation() before the episode ended")
        messages = []
        for i, m in enumerate(self.trajectory):
            m = m.model_copy(deep=True)
            m.turn_idx = i
            messages.append(m)
        end = datetime.now()
        return SimulationRun(
            id=str(uuid.uuid4()), task_id=self.task.id, start_time=self.start_time, end_time=end.isoformat(),
            duration=(end - datetime.fromisoformat(self.start_time)).total_seconds(),
            termination_reason=self.termination, messages=messages,
        )
