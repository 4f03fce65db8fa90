"""Tau2-RL-Pipeline's agent protocol (the ``tau2`` env with ``protocol="pipeline"``): what its checkpoints speak.

The pipeline plays tau2 through tau2's gym env (``AgentGymEnv``) and talks to its policy in plain chat messages
(no tool schemas for the chat template: they are in the system prompt):

* **System prompt** (:func:`system_prompt`): the output format (exactly one ``<tool_call>`` per turn, the
  pseudo-tools ``respond`` and ``done``), the domain policy, the agent's tools as a JSON list of ``{name,
  description, parameters}`` (the domain's tools and tau2's gym ``done`` tool), and a few rules. The words are
  agent-tune's own (:data:`PROMPT_TEMPLATE`); the env's ``prompt_template`` option takes a file of other words
  with the same ``$domain``, ``$policy`` and ``$tools`` fields (e.g. the exact text a checkpoint was trained on).
* **Action** (:func:`parse_action`): the whole generation is one ``<tool_call>{"name", "arguments"}</tool_call>``
  block, nothing around it (whitespace aside); ``arguments`` an object (or a JSON string of one; missing or null:
  none). Generation stops at ``</tool_call>`` (:data:`STOP_STRING`). ``respond`` carries ``{"content"}``: the text
  for the user; ``done`` ends the episode; any other name is a tool call. Anything else is malformed: the
  policy reads :data:`FORMAT_ERROR` as a user message and gets one retry at temperature 0; a second malformed
  action ends the episode as a parse error.
* **To tau2** (:func:`env_action`): the action becomes the gym's action string, ``respond``'s content as is, a
  call as ``name(k=v, ...)`` with Python literals (:func:`python_call`), which tau2's ``parse_action_string``
  reads as the gym does (a call named ``done`` becomes tau2's ``###STOP###``, as tau2's ``GymAgent`` has it).
* **Observation** (:func:`observation_text`, :func:`followup_messages`): what tau2 sends the agent, as the gym
  writes it (``role: content`` lines since the agent's last message), read back line by line as the pipeline
  does: after a tool call one user message ``Tool result for name(k=v, ...):\\n<result>``; after ``respond``
  the user's reply as a user message. Only lines that carry the expected role are kept (a user reply's second
  line is dropped when its first line was kept): the pipeline's own rule, kept so its checkpoints read what
  they were trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from string import Template
from typing import Any, Sequence

from agent_tune.errors import EnvError

STOP_STRING = "</tool_call>"
OPEN, CLOSE = "<tool_call>", "</tool_call>"
RESPOND, DONE = "respond", "done"
FORMAT_ERROR = ('FORMAT ERROR: answer with exactly one action and nothing else, one block '
                '<tool_call>{"name": "...", "arguments": {...}}</tool_call>.')
RETRY_SAMPLING = {"temperature": 0.0}  # the one retry after a malformed action
NO_OBSERVATION = "[no_observation]"
RESET_CALL = "(reset)"


class ActionError(EnvError, ValueError):
    """A generation that is not one well-formed action (the message says why); the env answers it with the
    FORMAT ERROR message, never lets it out of ``step``."""


@dataclass(frozen=True)
class Action:
    """One action of the policy: the pseudo-tool or tool ``name``, its ``arguments`` and ``call``, the action
    as a Python call (``name(k=v, ...)``: how the gym reads it, and how the next observation names it)."""

    name: str
    arguments: dict[str, Any]
    call: str


def python_literal(value: Any) -> str:
    """A JSON value written as Python source (``None``, ``True``, ``'text'``, ``[1, 2]``, ``{'k': 1}``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def python_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(k=v, ...)`` with the arguments in their order, values as Python literals."""
    return f"{name}(" + ", ".join(f"{k}={python_literal(v)}" for k, v in arguments.items()) + ")"


def parse_action(text: str) -> Action:
    """The one action of a generation; :class:`ActionError` when it is not exactly one well-formed block."""
    blocks: list[tuple[int, int]] = []  # (start of the block, end of its closing tag)
    at = 0
    while (start := text.find(OPEN, at)) != -1:
        end = text.find(CLOSE, start + len(OPEN))
        if end == -1:
            raise ActionError(f"{OPEN} without {CLOSE}")
        blocks.append((start, end + len(CLOSE)))
        at = end + len(CLOSE)
    if not blocks:
        raise ActionError(f"no {OPEN}...{CLOSE} block")
    if len(blocks) > 1:
        raise ActionError(f"{len(blocks)} {OPEN} blocks; one action per turn")
    start, end = blocks[0]
    if text[:start].strip() or text[end:].strip():
        raise ActionError(f"text outside the {OPEN} block")
    body = text[start + len(OPEN):end - len(CLOSE)].strip()
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ActionError(f"the block is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ActionError("the block is not a JSON object")
    name, arguments = data.get("name"), data.get("arguments") or {}
    if not isinstance(name, str) or not name:
        raise ActionError("no non-empty string 'name'")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            raise ActionError(f"'arguments' is a string that is not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise ActionError("'arguments' is not an object")
    if name == RESPOND:
        content = arguments.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ActionError("'respond' needs a non-empty string 'content'")
    return Action(name, arguments, python_call(name, arguments))


def env_action(action: Action) -> str:
    """The gym's action string: ``respond``'s content, else the call."""
    return action.arguments["content"] if action.name == RESPOND else action.call


def tau2_message(action: Action) -> Any:
    """tau2's ``AssistantMessage`` for ``action``, as the gym makes it: tau2's ``parse_action_string`` of the
    action string, a call of ``done`` turned into ``###STOP###``."""
    from tau2.agent.llm_agent import LLMSoloAgent
    from tau2.utils.tools import parse_action_string

    message = parse_action_string(env_action(action))
    if message.tool_calls and any(c.name == DONE for c in message.tool_calls):
        message.content, message.tool_calls = LLMSoloAgent.STOP_TOKEN, None
    return message


# --------------------------------------------------------------------------- the system prompt
def done() -> str:
    """Call this function when you are done with the task."""
    return "###STOP###"  # never called: its schema (tau2's, from this signature and docstring) is the gym's


@lru_cache(maxsize=1)
def done_tool_schema() -> dict[str, Any]:
    """The schema of the gym's ``done`` tool (tau2's ``as_tool`` of a function named ``done``, as tau2's gym
    agent adds it to the agent's tools)."""
    from tau2.environment.tool import as_tool

    return as_tool(done).openai_schema


def tools_text(tools: Sequence[dict[str, Any]]) -> str:
    """The tools as the prompt lists them: a JSON list of ``{name, description, parameters}``, indented by 2."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        out.append({"name": fn.get("name", "unknown"), "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {"type": "object", "properties": {}})})
    return json.dumps(out, indent=2)


PROMPT_TEMPLATE = """\
You are the $domain agent of a customer service. Help the user with their request, following the policy below.

# How to act
Each of your turns is one action and nothing else, written as one block:
<tool_call>
{"name": "<tool name>", "arguments": {"<parameter>": "<value>"}}
</tool_call>
Two actions are not tools:
- to write to the user: <tool_call>{"name": "respond", "arguments": {"content": "<your message>"}}</tool_call>
- to end the conversation once the request is handled: <tool_call>{"name": "done", "arguments": {}}</tool_call>

# Policy
$policy

# Tools
$tools

# Reminders
- Never answer in plain text: every turn is one action.
- Verify the user's identity before changing anything.
- Get the user's explicit confirmation before a change.
- Tell the user everything relevant to their request.
- Call done as soon as the request is complete.
"""
FIELDS = ("domain", "policy", "tools")


def check_template(template: str, where: str = "prompt_template") -> str:
    """``template`` if it is a :class:`string.Template` using only :data:`FIELDS` (``$policy`` and ``$tools``
    at least); else a ``ValueError`` naming ``where``."""
    try:
        used = set(Template(template).get_identifiers())
    except ValueError as exc:
        raise ValueError(f"{where}: not a template ({exc})") from None
    unknown, missing = used - set(FIELDS), {"policy", "tools"} - used
    if unknown or missing:
        raise ValueError(f"{where}: the fields are $domain, $policy and $tools"
                         + (f"; unknown: {', '.join(sorted(unknown))}" if unknown else "")
                         + (f"; missing: {', '.join(sorted(missing))}" if missing else ""))
    return template


def load_template(path: str | None) -> str | None:
    """The text of the template file at ``path`` (None: the default), checked; a ``ValueError`` naming the
    ``prompt_template`` option when it cannot be read or is not a template of :data:`FIELDS`."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(f"prompt_template: cannot read {path!r} ({exc.strerror})") from None
    return check_template(text, f"prompt_template ({path})")


def system_prompt(domain: str, policy: str, tools: Sequence[dict[str, Any]], template: str | None = None) -> str:
    """The protocol's system prompt for ``domain``: ``policy`` (tau2's domain policy) and ``tools`` (OpenAI
    schemas: the domain's tools, then :func:`done_tool_schema`) in ``template`` (default
    :data:`PROMPT_TEMPLATE`; checked by :func:`check_template`)."""
    return Template(template or PROMPT_TEMPLATE).substitute(domain=domain, policy=policy, tools=tools_text(tools))


# --------------------------------------------------------------------------- observations
def observation_text(messages: Sequence[Any]) -> str:
    """The gym's observation of tau2 ``messages`` (what the agent received): a ``role: content`` line per
    message (calls written ``name(k=v)``), only those after the last assistant message."""
    from tau2.data_model.message import AssistantMessage, UserMessage
    from tau2.utils.tools import to_functional_format

    lines: list[str] = []
    for m in messages:
        if isinstance(m, (UserMessage, AssistantMessage)):
            text = ", ".join(to_functional_format(c) for c in m.tool_calls) if m.is_tool_call() else m.content
            lines.append(f"{m.role}: {text}")
            if isinstance(m, AssistantMessage):
                lines = []
        else:
            lines.append(f"{m.role}: {m.content}")
    return "\n".join(lines)


def _split(observation: str) -> tuple[str, str, str]:
    """The observation's user lines, tool lines and other lines (each joined by newlines), read as the pipeline
    reads them: a line's role is what comes before its first ``": "`` (lowercased), its text what follows."""
    user: list[str] = []
    tool: list[str] = []
    other: list[str] = []
    for raw in observation.splitlines():
        line = raw.strip()
        role, text = (line.split(": ", 1) if ": " in line else (None, line))
        role = role.strip().lower() if role is not None else None
        text = text.strip()
        if not text:
            continue
        if role == "user":
            user.append(text)
        elif role == "tool":
            tool.append(text)
        else:
            other.append(text if role is None else f"{role}: {text}")
    return "\n".join(user).strip(), "\n".join(tool).strip(), "\n".join(other).strip()


def followup_messages(observation: str, last_call: str, after_tool: bool) -> list[dict[str, str]]:
    """The user messages the policy reads next: after a tool call (``after_tool``), ``Tool result for
    <last_call>:\\n<result>`` (and what the user said, if anything); else what the user said."""
    user, tool, other = _split(observation)
    if after_tool:
        out = [{"role": "user", "content": f"Tool result for {last_call}:\n{tool or other or NO_OBSERVATION}"}]
        if user:
            out.append({"role": "user", "content": user})
        return out
    return [{"role": "user", "content": user or other or NO_OBSERVATION}]
