"""Chat-template rendering for the token trajectory: the initial prompt, and per-turn *deltas*.

A delta is what the chat template puts between the policy's end-of-turn token and the point where the
policy writes next: for ChatML-style templates ``"\\n"`` (the template's newline after ``<|im_end|>``),
the new messages' turns, and the next assistant generation prompt. It is computed from the new messages
alone, so its cost does not grow with the conversation:

    render( ANCHOR_PREFIX + new_messages, add_generation_prompt=True )
      = "<system turn><user turn><|im_start|>assistant\\n" ANCHOR "<|im_end|>" | delta

``ANCHOR_PREFIX`` is a fixed three-message conversation (system, user, assistant) whose assistant text is
a sentinel string; the delta is everything after the end-of-turn token that follows the sentinel. Cutting
at the sentinel (rather than subtracting a render of the prefix alone) keeps the delta right for templates
that render the last assistant message differently from an earlier one (Qwen3 adds an empty think block to
the last one). All new messages of one observation are rendered together, so a run of consecutive tool
messages, which Qwen-style templates fold into ONE user turn, is one group: this is why deltas are taken
per observation (per group of consecutive tool messages), never per message.

The end-of-turn text (``<|im_end|>``) is found from the template itself: the first token after the
sentinel. It does not trust ``tokenizer.eos_token`` (SmolLM2's GGUF tokenizer reports ``<|im_start|>``).

Reasoning: Qwen3's template drops the ``<think>`` block of assistant turns before the last user query
when the conversation is re-rendered. The trajectory keeps the tokens the policy actually generated
(reasoning included) and the deltas never re-render earlier turns, so for such templates a full
re-render differs from the trajectory by exactly the dropped reasoning: :func:`check_drift` reports it.
Likewise with ``enable_thinking=False`` the empty think block is part of each generation prompt (env
tokens), which Qwen3's template leaves out when it re-renders earlier turns. Use a template that keeps
history (``qwen3_instruct``, ``smollm2_tools``) when token-exact re-renders matter.

What the template shows: a chat template renders the fields it knows and drops the others without a word
(SmolLM2's own template ignores ``tools`` and structured ``tool_calls``; ``smollm2_tools`` and
``qwen3_instruct`` ignore ``reasoning_content``; the written templates render a ``content`` that is a list of
parts as an empty string). So every render first checks its messages (:meth:`ChatRenderer.check_messages`)
and raises :class:`UnshownFieldError` (a :class:`TemplateError`, so a ``ValueError``) naming the message
index, its role and the field, instead of losing it:

* ``tools`` (a non-empty list) and a message's non-empty ``tool_calls`` / ``reasoning_content``: accepted
  when the template shows them, refused otherwise;
* ``content``: a string or ``None``; a list of parts only when the template renders a list of text parts
  as their text (and then only text parts, ``{"type": "text", "text": ...}``); anything else is refused.
  Parts are never joined here: the template decides how, or the caller passes one string.

Whether the template shows a field is *probed*, not looked up by template name: the field is rendered
once with a sentinel value (a message of that role in its usual place: an assistant message after a user
query, a tool message after an assistant turn, ...) and the field counts as shown when the sentinel is in
the text (for parts: both parts' text, in order, with nothing but whitespace between them, so a template
that prints the list's ``repr`` does not pass). Probes run on first need and are cached per template
source, template variables and tokenizer class, for the whole process, so a renderer built per episode
(verl builds an agent loop per episode) probes nothing again. Fields other templates drop by design are not
refused: Qwen3's (``qwen3``) dropping of reasoning before the last user query is its history rewrite
(:func:`check_drift` reports it), and metadata such as a tool message's ``name`` or ``tool_call_id`` is not
checked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from agent_tune.errors import RolloutError
from agent_tune.rollout.templates import load_chat_template

Message = Mapping[str, Any]

# A string no real conversation contains; the template sees it as ordinary assistant text.
ANCHOR = "\u2063agent_tune:delta:anchor\u2063"
_ANCHOR_PREFIX: tuple[dict[str, str], ...] = (
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": ANCHOR},
)


class TemplateError(RolloutError, ValueError):
    """The chat template cannot be used for token-exact deltas (with the reason)."""


class UnshownFieldError(TemplateError):
    """A message (or the tool list) carries a field the chat template would drop without a word.

    The message reads ``<label> <index> (role '<role>'): field '<field>' ...`` (``tools: field 'tools' ...``
    for the tool list), then what the template does and what to do instead. Attributes: ``field``
    (``"tools"``, ``"tool_calls"``, ``"reasoning_content"`` or ``"content"``), ``index`` and ``role`` (of the
    message; ``None`` for the tool list) and ``template_name``."""

    def __init__(self, text: str, field: str, index: int | None, role: str | None, template_name: str) -> None:
        super().__init__(text)
        self.field = field
        self.index = index
        self.role = role
        self.template_name = template_name


# Probes: ASCII word characters only, so JSON escaping and compact tool docs keep them verbatim.
_PROBE = "agenttuneprobe"
_SHOWN: dict[tuple[str, ...], dict[tuple[str, ...], bool]] = {}  # per template key: what it shows
_SHOWN_LOCK = threading.Lock()
_HINTS = {
    "tools": "pick a template that renders tools (e.g. 'smollm2_tools', 'qwen3_instruct') or describe the "
             "tools in the system message",
    "tool_calls": "pick a template that renders structured tool calls (e.g. 'smollm2_tools', 'qwen3_instruct') "
                  "or write the calls into the content as the policy writes them",
    "reasoning_content": "pick a template that renders reasoning (e.g. 'qwen3'), write the reasoning into the "
                         "content (e.g. a <think> block) or leave the field out",
}


def _given(value: Any) -> bool:
    """A field value that would carry something (``None`` and empty strings/lists/dicts carry nothing)."""
    if value is None:
        return False
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0
    return True


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _probe_context(message: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """A probe ``message`` in its role's usual place: (messages, add_generation_prompt)."""
    system, user = {"role": "system", "content": "S"}, {"role": "user", "content": "U"}
    role = message.get("role")
    if role == "system":
        return [message, user], True
    if role == "user":
        return [system, message], True
    if role == "tool":
        return [system, user, {"role": "assistant", "content": "A"}, message], True
    return [system, user, message], False  # assistant: the last turn, after the user's query


class ChatRenderer:
    """Renders prompts and observation deltas with one tokenizer and one chat template.

    Args:
        tokenizer: a Hugging Face tokenizer (``apply_chat_template``, ``encode``, ``decode``).
        template: a template name from :mod:`agent_tune.rollout.templates` (``"tokenizer"`` keeps the
            tokenizer's own template), or ``None`` for the tokenizer's own.
        chat_template_kwargs: extra variables for the template (``enable_thinking``, ``tool_doc``, ...).
        end_of_turn: the policy's end-of-turn token text; detected from the template when ``None``.
    """

    def __init__(
        self,
        tokenizer: Any,
        template: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        end_of_turn: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.template_name = template or "tokenizer"
        source = load_chat_template(self.template_name)
        if source is None and not getattr(tokenizer, "chat_template", None):
            raise TemplateError(
                "chat template 'tokenizer' chosen but the tokenizer has no chat template; "
                "pick a named template (e.g. 'qwen3', 'smollm2_tools')"
            )
        self.chat_template: str | None = source
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.end_of_turn, self.after_end_of_turn = self._detect_end_of_turn(end_of_turn)
        eot_ids = self.encode(self.end_of_turn)
        if len(eot_ids) != 1:
            raise TemplateError(f"end-of-turn text {self.end_of_turn!r} is not one token (got {eot_ids})")
        self.end_of_turn_id: int = eot_ids[0]
        effective = source if source is not None else getattr(tokenizer, "chat_template", None)
        key = (
            repr(effective),
            repr(sorted(self.chat_template_kwargs.items(), key=lambda kv: str(kv[0]))),
            f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}",
            repr(sorted((str(k), repr(v)) for k, v in (getattr(tokenizer, "special_tokens_map", None) or {}).items())),
        )
        with _SHOWN_LOCK:
            self._shown: dict[tuple[str, ...], bool] = _SHOWN.setdefault(key, {})

    # ------------------------------------------------------------------ basics
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS/EOS added: templates write their own special tokens)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens kept."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def render_text(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """The template's text for a whole conversation.

        Raises:
            UnshownFieldError: a message or the tool list carries a field the template does not show
                (:meth:`check_messages`).
            TemplateError: the template failed.
        """
        self.check_messages(messages, tools)
        return self._render(messages, tools, add_generation_prompt)

    def _render(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                tools=[dict(t) for t in tools] if tools else None,
                chat_template=self.chat_template,
                add_generation_prompt=add_generation_prompt,
                tokenize=False,
                **self.chat_template_kwargs,
            )
        except Exception as exc:  # jinja errors carry little context: say what we rendered
            raise TemplateError(
                f"chat template {self.template_name!r} failed on {len(messages)} messages: {exc}"
            ) from exc

    # ------------------------------------------------------------------ prompts
    def render_prompt(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """Token ids of the initial conversation plus the assistant generation prompt."""
        if not messages:
            raise ValueError("the initial observation has no messages to render")
        return self.encode(self.render_text(messages, tools, add_generation_prompt=True))

    def render_full(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        """Token ids of a whole conversation rendered at once (for the drift check and benchmarks)."""
        return self.encode(self.render_text(messages, tools, add_generation_prompt))

    # -------------------------------------------------------------------- delta
    def render_delta_text(self, new_messages: Sequence[Message]) -> str:
        """Text the template puts after the policy's end-of-turn token for ``new_messages`` (all of one
        observation, rendered together), up to and including the next assistant generation prompt.
        With no new messages it is just the separator and the generation prompt."""
        for m in new_messages:
            if m.get("role") == "assistant":
                raise ValueError("observation messages must not be assistant messages (the policy writes those)")
        self.check_messages(new_messages, label="observation message")
        text = self._render(list(_ANCHOR_PREFIX) + list(new_messages), add_generation_prompt=True)
        return self._after_anchor_turn(text)

    def render_delta(self, new_messages: Sequence[Message]) -> list[int]:
        """Token ids of :meth:`render_delta_text`: env tokens to append after the policy's turn."""
        return self.encode(self.render_delta_text(new_messages))

    def close_turn_ids(self) -> list[int]:
        """The end-of-turn token, for a policy turn that stopped without it (stop string, length)."""
        return [self.end_of_turn_id]

    # ------------------------------------------------------- what the template shows
    def check_messages(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        label: str = "message",
    ) -> None:
        """Refuse what the template would drop without a word (see the module): a non-empty tool list,
        ``tool_calls`` or ``reasoning_content`` the template does not show, a ``content`` that is neither a
        string nor ``None`` (a list of parts only where the template renders text parts). Messages are
        named ``<label> <index>``, counted from 0 in ``messages``. Cheap: what the template shows is probed
        once per template (cached for the process), then each call only looks at the messages' fields.

        Raises:
            UnshownFieldError: naming the message index, its role and the field.
        """
        if tools and not self.shows(("tools",)):
            raise UnshownFieldError(
                f"tools: field 'tools' ({len(tools)} tools) is not shown by {self._template_label()}: the tool "
                f"list would be dropped from the prompt; {_HINTS['tools']}",
                "tools", None, None, self.template_name,
            )
        for index, m in enumerate(messages):
            if not isinstance(m, Mapping):
                continue  # the template (or the caller's own checks) reports it
            role = m.get("role")
            where = f"{label} {index} (role {role!r})"
            for name in ("tool_calls", "reasoning_content"):
                if _given(m.get(name)) and not self.shows((name, str(role))):
                    raise UnshownFieldError(
                        f"{where}: field {name!r} is not shown by {self._template_label()}: it would be "
                        f"dropped from the rendered text; {_HINTS[name]}",
                        name, index, role, self.template_name,
                    )
            content = m.get("content")
            if content is None or isinstance(content, str):
                continue
            if not isinstance(content, (list, tuple)):
                raise UnshownFieldError(
                    f"{where}: field 'content' is of type {type(content).__name__}, which {self._template_label()} "
                    "would not render as written: the content must be a string (or None)",
                    "content", index, role, self.template_name,
                )
            if not self.shows(("content_parts", str(role))):
                parts = f"{len(content)} part{'' if len(content) == 1 else 's'}"
                raise UnshownFieldError(
                    f"{where}: field 'content' is a list of {parts}, which {self._template_label()} does not "
                    "render (their text would be lost): the content must be a string (join the parts yourself)",
                    "content", index, role, self.template_name,
                )
            for k, part in enumerate(content):
                if not _is_text_part(part):
                    kind = f"of type {part.get('type')!r}" if isinstance(part, Mapping) else f"a {type(part).__name__}"
                    raise UnshownFieldError(
                        f"{where}: field 'content' part {k} is {kind}, not a text part "
                        "({'type': 'text', 'text': <string>}); only text can be rendered",
                        "content", index, role, self.template_name,
                    )

    def shows(self, capability: tuple[str, ...]) -> bool:
        """Whether the template shows ``capability``: ``("tools",)``, or ``(field, role)`` with field
        ``"tool_calls"``, ``"reasoning_content"`` or ``"content_parts"`` (a list of text parts). Probed on
        first use with a sentinel value, then cached for every renderer of the same template."""
        shown = self._shown.get(capability)
        if shown is None:
            shown = self._probe(capability)
            self._shown[capability] = shown  # a race renders the same probe twice: same answer
        return shown

    def _probe_text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, prompt: bool) -> str:
        try:
            return self._render(messages, tools, prompt)
        except TemplateError:
            return ""  # a template that fails on the field does not show it

    def _probe(self, capability: tuple[str, ...]) -> bool:
        field = capability[0]
        name, arg, value = _PROBE + "fn", _PROBE + "arg", _PROBE + "value"
        if field == "tools":
            tools = [{"type": "function", "function": {
                "name": name, "description": "Probe.",
                "parameters": {"type": "object", "properties": {arg: {"type": "string", "description": "Probe."}},
                               "required": [arg]}}}]
            texts = [self._probe_text([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                      tools, True),
                     self._probe_text([{"role": "user", "content": "U"}], tools, True)]
            return all(name in t and arg in t for t in texts)
        role = capability[1]
        if field == "tool_calls":
            message: dict[str, Any] = {"role": role, "content": "", "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": name, "arguments": {arg: value}}}]}
            messages, prompt = _probe_context(message)
            text = self._probe_text(messages, None, prompt)
            return name in text and value in text
        if field == "reasoning_content":
            message = {"role": role, "content": "C", "reasoning_content": value}
            messages, prompt = _probe_context(message)
            return value in self._probe_text(messages, None, prompt)
        if field == "content_parts":
            a, b = _PROBE + "parta", _PROBE + "partb"
            message = {"role": role, "content": [{"type": "text", "text": a}, {"type": "text", "text": b}]}
            messages, prompt = _probe_context(message)
            text = self._probe_text(messages, None, prompt)
            i, j = text.find(a), text.find(b)
            return 0 <= i and i + len(a) <= j and not text[i + len(a):j].strip()
        raise ValueError(f"unknown capability {capability!r}")

    def _template_label(self) -> str:
        if self.template_name == "tokenizer":
            return "chat template 'tokenizer' (the tokenizer's own)"
        return f"chat template {self.template_name!r}"

    # ---------------------------------------------------------------- internals
    def _after_anchor_turn(self, text: str) -> str:
        i = text.find(ANCHOR)
        if i < 0:
            raise TemplateError(f"template {self.template_name!r} did not render the assistant text verbatim")
        j = i + len(ANCHOR)
        if not text.startswith(self.end_of_turn, j):
            raise TemplateError(
                f"template {self.template_name!r} puts {text[j:j + 20]!r} after an assistant message, "
                f"not the end-of-turn token {self.end_of_turn!r}"
            )
        return text[j + len(self.end_of_turn):]

    def _detect_end_of_turn(self, explicit: str | None) -> tuple[str, str]:
        text = self._render(list(_ANCHOR_PREFIX), add_generation_prompt=False)
        i = text.find(ANCHOR)
        if i < 0:
            raise TemplateError(f"template {self.template_name!r} did not render the assistant text verbatim")
        suffix = text[i + len(ANCHOR):]
        if explicit is not None:
            if not suffix.startswith(explicit):
                raise TemplateError(
                    f"template {self.template_name!r} ends an assistant turn with {suffix!r}, not {explicit!r}"
                )
            return explicit, suffix[len(explicit):]
        ids = self.encode(suffix)
        if ids:
            first = self.tokenizer.convert_ids_to_tokens(ids[0])
            added = {t.content for t in getattr(self.tokenizer, "added_tokens_decoder", {}).values()}
            if first in added and suffix.startswith(first):
                return first, suffix[len(first):]
        raise TemplateError(
            f"cannot tell the end-of-turn token of template {self.template_name!r}: an assistant turn ends "
            f"with {suffix!r}; pass end_of_turn explicitly"
        )


# --------------------------------------------------------------------------- drift check
@dataclass
class DriftReport:
    """Result of comparing a trajectory with a full re-render of its conversation."""

    ok: bool
    position: int | None  # first differing index into prompt+response ids (None when ok)
    trajectory_len: int
    rendered_len: int
    trajectory_window: str = ""  # decoded tokens around the position, trajectory side
    rendered_window: str = ""  # the same, re-render side

    def __str__(self) -> str:
        if self.ok:
            return f"no drift ({self.trajectory_len} tokens)"
        return (
            f"drift at token {self.position} (trajectory {self.trajectory_len} tokens, re-render "
            f"{self.rendered_len}): trajectory {self.trajectory_window!r} vs re-render {self.rendered_window!r}"
        )


def check_drift(
    renderer: ChatRenderer,
    token_ids: Sequence[int],
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    allow_prefix: bool = False,
    window: int = 8,
) -> DriftReport:
    """Re-render ``messages`` whole and compare with ``token_ids`` (prompt + response of a trajectory).

    The re-render may extend past the trajectory by the template's text after the last end-of-turn token
    (``"\\n"``), or by a generation prompt when the trajectory ends with one. With ``allow_prefix`` (a
    truncated episode) any trajectory that is a prefix of the re-render is accepted."""
    ends_with_prompt = bool(messages) and messages[-1].get("role") != "assistant"
    rendered = renderer.render_full(messages, tools, add_generation_prompt=ends_with_prompt)
    got = list(token_ids)
    n = min(len(got), len(rendered))
    pos = next((k for k in range(n) if got[k] != rendered[k]), None)
    if pos is None:
        tail = rendered[len(got):]
        if len(got) > len(rendered):
            pos = len(rendered)
        elif tail and not allow_prefix and renderer.decode(tail) != renderer.after_end_of_turn:
            pos = len(got)
    if pos is None:
        return DriftReport(True, None, len(got), len(rendered))
    lo = max(0, pos - window)
    return DriftReport(
        False,
        pos,
        len(got),
        len(rendered),
        renderer.decode(got[lo:pos + window]),
        renderer.decode(rendered[lo:pos + window]),
    )
