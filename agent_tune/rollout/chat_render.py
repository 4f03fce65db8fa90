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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from agent_tune.rollout.templates import load_chat_template

Message = Mapping[str, Any]

# A string no real conversation contains; the template sees it as ordinary assistant text.
ANCHOR = "\u2063agent_tune:delta:anchor\u2063"
_ANCHOR_PREFIX: tuple[dict[str, str], ...] = (
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": ANCHOR},
)


class TemplateError(ValueError):
    """The chat template cannot be used for token-exact deltas (with the reason)."""


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
        """The template's text for a whole conversation."""
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
        text = self.render_text(list(_ANCHOR_PREFIX) + list(new_messages), add_generation_prompt=True)
        return self._after_anchor_turn(text)

    def render_delta(self, new_messages: Sequence[Message]) -> list[int]:
        """Token ids of :meth:`render_delta_text`: env tokens to append after the policy's turn."""
        return self.encode(self.render_delta_text(new_messages))

    def close_turn_ids(self) -> list[int]:
        """The end-of-turn token, for a policy turn that stopped without it (stop string, length)."""
        return [self.end_of_turn_id]

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
        text = self.render_text(list(_ANCHOR_PREFIX), add_generation_prompt=False)
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
