"""SFT rows from conversations, tokenised exactly as the RL rollout tokenises the same episode.

A conversation (``messages`` + ``tools``, as a data row holds them) is read as the episode the runner
(:mod:`agent_tune.rollout.runner`) would have produced if the policy had written its assistant messages:

    prompt      = render_prompt(messages before the first assistant message, tools)        mask 0
    per assistant message:
        policy  = encode(assistant text) + [end-of-turn token]                                 mask 1
        env     = render_delta(the non-assistant messages up to the next assistant message)  mask 0
                  (only when another assistant message follows: the episode ends with the policy's turn)

so ``input_ids`` and ``loss_mask`` equal the trajectory's ``prompt_ids + response_ids`` and
``[0] * len(prompt_ids) + response_mask`` (the test ``tests/sft/test_rows.py`` plays the runner
against a scripted policy and compares them token for token). The template's separators (the ``"\\n"``
after ``<|im_end|>``, the next ``<|im_start|>assistant\\n``) are env tokens, as in the trajectory; each
group of consecutive non-assistant messages is one observation, one delta (Qwen-style templates fold a
run of tool messages into one user turn). Two assistant messages in a row are two generations with an
empty observation between them (the separator and the generation prompt). Messages after the last
assistant message carry no loss and are left out.

The assistant text is what the policy writes: ``content`` verbatim, or, for a message with structured
``tool_calls`` (OpenAI format), the text the template writes for the message (content and call blocks).
(Qwen3's thinking template, ``qwen3``, starts such a
message with an empty ``<think>`` block, as Qwen3 in thinking mode writes it; ``content`` is never
rewritten.) The tools are rendered once, in the prompt, as the runner does.

A row may instead carry its tokens (``input_ids`` + ``loss_mask``, as the eval's rejection-sampling
output writes them: :mod:`agent_tune.eval.rft`): they are used as they are, after checks
(:func:`token_row`: equal lengths, ids within the vocabulary, a 0/1 mask with at least one 1, at most
``max_length`` tokens); the row's messages are then only for reading.

Raw-text envs (ReTool) keep an episode as one running assistant message, the policy's text and the
env's observations interleaved (``...</code>\n<interpreter>\n4\n</interpreter>\nSo ...``). With an
``observation_pattern`` (a regular expression: the SFT config's ``data.observation_pattern``), the spans of
an assistant message that match it are env tokens (mask 0, encoded on their own as the runner encodes an
observation's text) and the text between them is the policy's (mask 1); the end-of-turn token follows
only the message's last piece, as the runner's trajectory holds a raw-text episode.

A conversation that cannot be rendered (no assistant message, nothing before it, a template error, a
malformed message, a field the template would drop:
:class:`~agent_tune.rollout.chat_render.UnshownFieldError`, named by the message's index in the
conversation) or that is longer than ``max_length`` raises :class:`BadConversation` carrying the reason;
:func:`render_rows` collects those per row id instead, so callers skip and count them or fail.
Nothing is truncated.
"""

from __future__ import annotations

import json
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from agent_tune.errors import DataError
from agent_tune.rollout.chat_render import ChatRenderer, Message, TemplateError

POLICY = 1
ENV = 0


class BadConversation(DataError, ValueError):
    """A conversation that cannot become an SFT row; ``kind`` is ``"too_long"``, ``"render"`` or ``"tokens"``
    (a row's own ``input_ids``/``loss_mask`` are unusable)."""

    def __init__(self, message: str, kind: str = "render") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class SFTRow:
    """One rendered conversation: the token ids and the loss mask (1 on the policy's tokens)."""

    row_id: str
    input_ids: list[int]
    loss_mask: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class RenderReport:
    """The rows that rendered and, per row id, why the others did not."""

    rows: list[SFTRow] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (row id, kind, reason)

    def counts(self) -> dict[str, int]:
        """Rows rendered and skipped, the skipped ones by kind."""
        out = {"rendered": len(self.rows), "skipped": len(self.skipped)}
        for _, kind, _ in self.skipped:
            out[f"skipped_{kind}"] = out.get(f"skipped_{kind}", 0) + 1
        return out

    def summary(self, limit: int = 20) -> str:
        """A readable account: the counts, then up to ``limit`` skipped rows with their reasons."""
        c = self.counts()
        kinds = ", ".join(f"{k[len('skipped_'):]}: {v}" for k, v in sorted(c.items()) if k.startswith("skipped_"))
        lines = [f"SFT rows: {c['rendered']} rendered, {c['skipped']} skipped" + (f" ({kinds})" if kinds else "")]
        for row_id, kind, reason in self.skipped[:limit]:
            lines.append(f"  skipped row {row_id} [{kind}]: {reason}")
        if len(self.skipped) > limit:
            lines.append(f"  ... and {len(self.skipped) - limit} more skipped rows")
        return "\n".join(lines)


# --------------------------------------------------------------------------- one conversation
def assistant_text(renderer: ChatRenderer, message: Message) -> str:
    """The text the policy writes for an assistant ``message``: its content, or with structured
    ``tool_calls`` (or ``reasoning_content``) the template's rendering of the whole message between the
    generation prompt and the end-of-turn token."""
    content = message.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise BadConversation(f"assistant content must be a string, got {type(content).__name__}")
    if not message.get("tool_calls") and not message.get("reasoning_content"):
        return content
    prefix = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    head = renderer.render_text(prefix, add_generation_prompt=True)
    whole = renderer.render_text(prefix + [dict(message, content=content)])
    tail = renderer.end_of_turn + renderer.after_end_of_turn
    if not whole.startswith(head) or not whole.endswith(tail):
        raise BadConversation(
            f"template {renderer.template_name!r} does not render an assistant message with tool_calls as "
            "generation prompt + text + end-of-turn"
        )
    return whole[len(head): len(whole) - len(tail)]


def assistant_pieces(text: str, observation_pattern: re.Pattern[str] | None) -> list[tuple[str, int]]:
    """An assistant message's text as ``(text, POLICY | ENV)`` pieces: the spans matching
    ``observation_pattern`` are env observations, the rest the policy's; empty policy pieces are dropped.

    Raises:
        BadConversation: the message opens with an observation (the policy wrote nothing before it).
    """
    if observation_pattern is None:
        return [(text, POLICY)]
    pieces: list[tuple[str, int]] = []
    pos = 0
    for m in observation_pattern.finditer(text):
        if m.end() == m.start():
            continue
        if m.start() == 0:
            raise BadConversation("an assistant message opens with an observation (data.observation_pattern): "
                                  "the policy wrote nothing before it")
        if m.start() > pos:
            pieces.append((text[pos: m.start()], POLICY))
        pieces.append((m.group(0), ENV))
        pos = m.end()
    if pos < len(text) or not pieces:
        pieces.append((text[pos:], POLICY))
    return pieces


def render_conversation(
    renderer: ChatRenderer,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    max_length: int | None = None,
    observation_pattern: re.Pattern[str] | None = None,
) -> tuple[list[int], list[int]]:
    """``(input_ids, loss_mask)`` of a conversation, as the runner's trajectory would hold them
    (``observation_pattern``: the raw-text observations inside assistant messages, see the module).

    Raises:
        BadConversation: the conversation cannot be rendered (``kind="render"``) or has more than
            ``max_length`` tokens (``kind="too_long"``).
    """
    msgs = [_check_message(m, i) for i, m in enumerate(messages)]
    turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if not turns:
        raise BadConversation("no assistant message: nothing to train on")
    if turns[0] == 0:
        raise BadConversation("the conversation opens with an assistant message: no prompt to render")
    eot = renderer.end_of_turn_id
    try:
        # what the template would drop is refused up front, named by its index in this conversation
        # (the messages after the last assistant message are left out, so they are not checked)
        renderer.check_messages(msgs[: turns[-1] + 1], tools or None)
        ids = renderer.render_prompt(msgs[: turns[0]], tools or None)
        mask = [ENV] * len(ids)
        for k, i in enumerate(turns):
            for text, kind in assistant_pieces(assistant_text(renderer, msgs[i]), observation_pattern):
                piece = renderer.encode(text)
                ids += piece
                mask += [kind] * len(piece)
            ids.append(eot)
            mask.append(POLICY)
            if k + 1 < len(turns):  # the observation up to the next generation (possibly no message)
                env = renderer.render_delta(msgs[i + 1: turns[k + 1]])
                ids += env
                mask += [ENV] * len(env)
    except TemplateError as exc:
        raise BadConversation(str(exc)) from exc
    if max_length is not None and len(ids) > max_length:
        raise BadConversation(f"{len(ids)} tokens, more than max_length {max_length}", kind="too_long")
    return ids, mask


def _check_message(message: Any, index: int) -> dict[str, Any]:
    """A message as a plain dict with a known role; anything else is a :class:`BadConversation`."""
    if not isinstance(message, Mapping):
        raise BadConversation(f"message {index} is a {type(message).__name__}, not a mapping")
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise BadConversation(f"message {index} has role {role!r} (system, user, assistant or tool expected)")
    return {k: v for k, v in message.items() if v is not None or k == "content"}


# --------------------------------------------------------------------------- a row with its tokens
def token_row(input_ids: Any, loss_mask: Any, max_length: int | None = None,
              vocab_size: int | None = None) -> tuple[list[int], list[int]]:
    """A row's own ``(input_ids, loss_mask)``, checked and returned unchanged.

    Raises:
        BadConversation: ``kind="tokens"`` (not lists of ints, unequal lengths, an id outside
            ``[0, vocab_size)``, a mask value other than 0/1, no 1 at all) or ``kind="too_long"``.
    """
    ids, mask = plain_value(input_ids, False), plain_value(loss_mask, False)
    if _missing(ids) or _missing(mask):
        raise BadConversation("a row with its own tokens needs both input_ids and loss_mask", kind="tokens")
    if not isinstance(ids, list) or not isinstance(mask, list):
        raise BadConversation("input_ids and loss_mask must both be lists", kind="tokens")
    if not all(_is_int(t) for t in ids) or not all(_is_int(m) for m in mask):
        raise BadConversation("input_ids and loss_mask must hold integers", kind="tokens")
    ids, mask = [int(t) for t in ids], [int(m) for m in mask]
    if len(ids) != len(mask):
        raise BadConversation(f"{len(ids)} input_ids but {len(mask)} loss_mask entries", kind="tokens")
    bad = [t for t in ids if t < 0 or (vocab_size is not None and t >= vocab_size)]
    if bad:
        raise BadConversation(f"token id {bad[0]} outside the tokenizer's vocabulary ({vocab_size})", kind="tokens")
    if any(m not in (0, 1) for m in mask):
        raise BadConversation("loss_mask values must be 0 or 1", kind="tokens")
    if not any(mask):
        raise BadConversation("loss_mask has no 1: nothing to train on", kind="tokens")
    if max_length is not None and len(ids) > max_length:
        raise BadConversation(f"{len(ids)} tokens, more than max_length {max_length}", kind="too_long")
    return ids, mask


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# --------------------------------------------------------------------------- many conversations
TokenPair = tuple[Any, Any]  # a row's own (input_ids, loss_mask)


def render_rows(
    renderer: ChatRenderer,
    conversations: Iterable[tuple[Any, ...]],
    max_length: int | None = None,
    observation_pattern: re.Pattern[str] | None = None,
) -> RenderReport:
    """Rows from ``(row_id, messages, tools)`` conversations, or ``(row_id, messages, tools, tokens)`` where
    ``tokens`` is the row's own ``(input_ids, loss_mask)`` (used as is, :func:`token_row`) or None
    (rendered, with ``observation_pattern`` as in :func:`render_conversation`); the bad ones are listed,
    never truncated."""
    report = RenderReport()
    vocab = len(renderer.tokenizer) if hasattr(renderer, "tokenizer") else None
    for row_id, messages, tools, *rest in conversations:
        tokens = rest[0] if rest else None
        try:
            if tokens is not None:
                ids, mask = token_row(tokens[0], tokens[1], max_length, vocab)
            else:
                ids, mask = render_conversation(renderer, messages, tools, max_length, observation_pattern)
        except BadConversation as exc:
            report.skipped.append((row_id, exc.kind, str(exc)))
            continue
        report.rows.append(SFTRow(row_id, ids, mask))
    return report


def read_conversations(
    path: str | Path,
    messages_key: str = "messages",
    tools_key: str = "tools",
    id_key: str = "id",
) -> Iterator[tuple[str, list[Any], list[Any] | None]]:
    """``(row_id, messages, tools)`` per row of a ``.jsonl`` or ``.parquet`` file.

    The row id is the row's ``id_key`` value when it has one, else ``<file name>:<row index>``. Tools
    and messages may be lists or JSON strings (as some parquet writers store nested data)."""
    for row_id, messages, tools, _ in read_sft_rows(path, messages_key, tools_key, id_key):
        yield row_id, messages, tools


def read_sft_rows(
    path: str | Path,
    messages_key: str = "messages",
    tools_key: str = "tools",
    id_key: str = "id",
    ids_key: str = "input_ids",
    mask_key: str = "loss_mask",
) -> Iterator[tuple[str, list[Any], list[Any] | None, TokenPair | None]]:
    """``(row_id, messages, tools, tokens)`` per row: as :func:`read_conversations`, with ``tokens`` the
    row's ``(ids_key, mask_key)`` values when it has either (else None: the row is rendered)."""
    for row_id, record in _read_records(path, id_key):
        ids, mask = record.get(ids_key), record.get(mask_key)
        tokens = None if _missing(ids) and _missing(mask) else (ids, mask)
        yield row_id, plain_value(record.get(messages_key)), plain_value(record.get(tools_key)) or None, tokens


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)  # absent, or NaN from parquet


def _read_records(path: str | Path, id_key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    path = Path(path)
    if path.suffix == ".parquet":
        import pandas as pd

        records = pd.read_parquet(path).to_dict(orient="records")
    elif path.suffix in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    else:
        raise ValueError(f"{path}: SFT data must be .jsonl or .parquet")
    for index, record in enumerate(records):
        rid = record.get(id_key)
        row_id = str(rid) if rid is not None and rid == rid else f"{path.name}:{index}"
        yield row_id, record


def plain_value(value: Any, top: bool = True) -> Any:
    """Nested parquet values (numpy arrays) as plain lists and dicts; a top-level JSON string is decoded
    (parquet merges the keys of nested dicts across rows, so writers store messages and tools as JSON)."""
    if isinstance(value, str):
        if not top:
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    if hasattr(value, "tolist") and not isinstance(value, (dict, list)):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: plain_value(v, False) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v, False) for v in value]
    return value
