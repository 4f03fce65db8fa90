"""Episode records as the viewer page holds them: one summary row per episode, its details apart.

Whatever wrote a record (training's episode log, the eval, a rollout dump: the one format of
:func:`agent_tune.rollout.dump.episode_record`, older dumps without the conversation too), :meth:`EpisodeTable.add`
reads it into

- a **summary row** (:data:`COLUMNS`): what the list shows, filters and sorts on, and how the page rebuilds the
  GRPO groups (step, stage and group id);
- a **detail** (one compact JSON text per episode, parsed by the page only when the episode is opened): the
  conversation (the policy's generated messages, each assistant message with its tool calls decoded by the run's
  parser; the prompt's messages as references into :attr:`EpisodeTable.shared`, since every episode of a task
  repeats the same system prompt, tools and worked examples), the loss-mask segments, the token lists when they
  were recorded, and the rest of the record (the env's info, the eval's verdict: turn scores, decoded calls).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from agent_tune.view.sources import Origin

COLUMNS = ("step", "stage", "group", "sample", "env", "category", "task", "reward", "acc", "stop", "fmt", "gens",
           "tokens", "tok", "adv")

# keys the detail carries in its own form, or that the summary row holds: not repeated among the extras
_OWN_KEYS = frozenset({
    "messages", "prompt_messages", "segments", "prompt", "prompt_ids", "response_ids", "response_mask",
    "response_logprobs", "response_pieces", "tools", "finish_reasons", "responses", "sample_record",
})
_CALL_CACHE_SIZE = 4096


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class EpisodeTable:
    """The episodes shown, in the order they were added: :attr:`rows` (summary rows, :data:`COLUMNS`),
    :attr:`details` (a JSON text each) and :attr:`shared` (prompt messages, referenced by the details)."""

    def __init__(self, tool_parser: str = "hermes") -> None:
        from agent_tune.parsing import get_tool_parser

        self.rows: list[list[Any]] = []
        self.details: list[str] = []
        self.shared: list[dict[str, Any]] = []
        self._shared_index: dict[str, int] = {}
        try:
            self._parser: Any = get_tool_parser(tool_parser)
        except Exception:  # an unknown parser name (a plug-in's): calls are shown as text only
            self._parser = None
        self._calls: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, record: Mapping[str, Any], origin: Origin) -> None:
        """Add one episode record (any of the formats above)."""
        self.rows.append(summary_row(record, origin))
        self.details.append(_json(self._detail(record)))

    # ------------------------------------------------------------------------------------------ details
    def _detail(self, rec: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        messages = rec.get("messages")
        if isinstance(messages, list):
            cut = int(rec.get("prompt_messages") or 0)
            out["prompt"] = [self._intern(m) for m in messages[:cut]]
            out["messages"] = [self._message(m) for m in messages[cut:]]
        if "segments" in rec:
            out["segments"] = [[1 if s.get("who") == "policy" else 0, s.get("text", ""), s.get("tokens"),
                                _round(s.get("mean_logprob"))] for s in rec["segments"]]
        if "response_ids" in rec and "response_mask" in rec:
            out["tokens"] = {
                "ids": rec["response_ids"], "mask": rec["response_mask"],
                "lps": _round_all(rec.get("response_logprobs") or []),
                "pieces": rec.get("response_pieces"), "prompt_len": len(rec.get("prompt_ids") or []),
            }
        if ("tokens" in out or "messages" not in out) and rec.get("prompt") is not None:
            out["prompt_text"] = rec["prompt"]  # the token view's prompt; or the only conversation an old dump has
        for key in ("tools", "finish_reasons"):
            if rec.get(key):
                out[key] = rec[key]
        out["extras"] = {k: v for k, v in rec.items() if k not in _OWN_KEYS}
        return out

    def _intern(self, message: Mapping[str, Any]) -> int:
        key = _json(message)
        index = self._shared_index.get(key)
        if index is None:
            index = self._shared_index[key] = len(self.shared)
            self.shared.append(self._message(message))
        return index

    def _message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The message as shown: an assistant text with its tool calls decoded (``calls``, ``call_errors``)."""
        out = dict(message)
        content = out.get("content")
        if out.get("role") == "assistant" and isinstance(content, str) and self._parser is not None:
            out.update(self._decode(content))
        return out

    def _decode(self, text: str) -> dict[str, Any]:
        found = self._calls.get(text)
        if found is None:
            try:
                parsed = self._parser.parse(text)
                found = {}
                if parsed.calls:
                    found["calls"] = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
                if parsed.errors:
                    found["call_errors"] = [e.reason for e in parsed.errors]
            except Exception as exc:  # noqa: BLE001 - a parser must not break the page
                found = {"call_errors": [f"parser failed: {exc}"]}
            if len(self._calls) >= _CALL_CACHE_SIZE:
                self._calls.clear()
            self._calls[text] = found
        return found


def _round_all(values: list[Any]) -> list[float | None]:
    """Log-probs to 4 decimals (what the page shows), the common case without a check per value."""
    try:
        return [round(x, 4) for x in values]
    except TypeError:  # a null among them
        return [_round(x) for x in values]


def _round(value: Any) -> float | None:
    number = _num(value)
    return None if number is None else round(number, 4)


def summary_row(rec: Mapping[str, Any], origin: Origin) -> list[Any]:
    """The episode's summary row (:data:`COLUMNS`), read from whichever record format it is."""
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), Mapping) else {}
    info = rec.get("info") if isinstance(rec.get("info"), Mapping) else {}
    raw_step = rec.get("global_steps")
    step = int(raw_step) + origin.step_offset if _num(raw_step) is not None else None
    if origin.kind == "eval":
        group = str(rec.get("test_id"))
        task = group
        env = origin.env or rec.get("env")
        category = rec.get("category")
        acc = _num(rec.get("accuracy"))
    else:
        group = rec.get("group") or rec.get("uid")
        if group is None:
            group = f"{raw_step}:{rec.get('index')}"
        group = str(group) if origin.stage is None else f"{origin.stage}/{group}"
        task = task_label(rec.get("task")) or info.get("test_id") or rec.get("index")
        env = rec.get("env")
        category = info.get("category") or rec.get("data_source")
        acc = _num(metrics.get("acc", info.get("accuracy")))
    fmt = _num(metrics.get("format_errors", rec.get("format_errors", info.get("format_errors"))))
    gens = _num(rec.get("num_generations", metrics.get("num_generations")))
    tokens = _num(rec.get("response_tokens", rec.get("tokens_generated")))
    row = {
        "step": step, "stage": origin.stage, "group": group, "sample": _int(rec.get("sample")),
        "env": None if env is None else str(env), "category": None if category is None else str(category),
        "task": None if task is None else str(task), "reward": _num(rec.get("reward")) or 0.0, "acc": acc,
        "stop": rec.get("stop_reason") or info.get("stop_reason"), "fmt": fmt, "gens": gens, "tokens": tokens,
        "tok": 1 if "response_ids" in rec else 0, "adv": _num(rec.get("advantage")),
    }
    return [row[c] for c in COLUMNS]


ID_KEYS = ("test_id", "task_id", "id")  # the kwargs that name a task, shown first


def task_label(key: Any) -> str | None:
    """A task key (``verl_ext.task_weighting.task_key``: ``env:{json of the env's kwargs}`` and, for a catalogue
    row, ``:{json of the task's kwargs}``) as shown: the one value when the kwargs hold one (``multi_turn_base_5``);
    else their id (:data:`ID_KEYS`) first, then their other plain values (``3 · domain=airline``; a list, such as
    BFCL's worked examples, is left to the record); else the key."""
    if not isinstance(key, str):
        return None if key is None else str(key)
    _, sep, rest = key.partition(":")
    if not (sep and rest.startswith("{")):
        return key
    kwargs: dict[str, Any] = {}
    decoder, pos = json.JSONDecoder(), 0
    try:
        while pos < len(rest):  # the env's kwargs, then the task's (they win: row_task over row_env)
            part, pos = decoder.raw_decode(rest, pos)
            if not isinstance(part, dict) or rest[pos:pos + 1] not in ("", ":"):
                return key
            kwargs.update(part)
            pos += 1
    except ValueError:
        return key
    if len(kwargs) == 1:
        return str(next(iter(kwargs.values())))
    name = next((k for k in ID_KEYS if kwargs.get(k) is not None), None)
    if name is None:
        return key
    plain = [f"{k}={v}" for k, v in kwargs.items() if k != name and isinstance(v, (str, int, float))]
    return " · ".join([str(kwargs[name]), *plain])


def _int(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)
