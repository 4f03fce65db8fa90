"""Write results in the format ``bfcl evaluate`` reads, so the official tool can re-score them.

Layout (as bfcl-eval's ``BaseHandler.write`` makes it)::

    DIR/<registry name with / replaced by _>/<group>/BFCL_v4_<category>_result.json

``<group>`` is bfcl-eval's ``get_directory_structure_by_id``: ``multi_turn``, ``non_live`` or ``live``. One
JSON line per entry, sorted by id (bfcl-eval's ``sort_key``): multi-turn ``{"id": ..., "result": [[step
response, ...] per turn]}``; single-turn ``{"id": ..., "result": response}``, the one model response that
bfcl-eval's ``ast_file_runner`` / ``relevance_file_runner`` hand to the handler's ``decode_ast``.
``bfcl evaluate --model <registry name> --result-dir DIR`` decodes each step with the registry model's
handler; the default registry name, ``Qwen/Qwen3-4B-Instruct-2507-FC``, uses bfcl-eval's Qwen FC handler,
which decodes Hermes ``<tool_call>\\n{json}\\n</tool_call>`` blocks.

Two forms of the step responses:

* ``canonical`` (default): per turn, one step per tool-call step our environment executed, each written as
  Hermes blocks of exactly the calls it executed (single-turn: the calls the env decoded from the answer).
  Re-scoring then checks the very calls we scored, whatever parser and template the model used.
* ``raw``: the policy's text of every step (reasoning removed), as bfcl-eval's own generation would store
  it. The official handler then decodes the text itself; with the ``hermes`` parsers (which accept only
  the blocks that handler decodes, ``docs/parsing.md``) both forms score alike, and any difference
  points at a parser that accepts more than the handler.

Episodes that did not finish (token budget or context limit) are written as an inference error string,
as bfcl-eval writes an entry whose generation raised (it fails them, except in the irrelevance
categories, where an answer without a call is right: our env fails an unfinished episode everywhere).
A force-terminated episode (more than 20 steps in a turn) is written without its last turn, so the
official checker reports ``multi_turn:force_terminated`` whichever turn it happened in (bfcl-eval's own
generation keeps the forced turn, so a force-quit in the *last* turn would otherwise be checked like a
finished one).
With several samples per entry only sample 0 is written (BFCL keeps one result per id).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from agent_tune.envs.bfcl.calls import parse_call_string

DEFAULT_REGISTRY_NAME = "Qwen/Qwen3-4B-Instruct-2507-FC"
FORMATS = ("canonical", "raw")
VERSION_PREFIX = "BFCL_v4"


def hermes_block(call_string: str) -> str:
    """``"cd(folder='x')"`` -> ``<tool_call>\\n{"name": "cd", "arguments": {"folder": "x"}}\\n</tool_call>``."""
    call = parse_call_string(call_string)
    return hermes_call(call.name, call.arguments)


def hermes_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call as the Hermes block bfcl-eval's Qwen FC handler decodes."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def _blocks(step: Iterable[str]) -> list[str]:
    """Hermes blocks of one step's call strings. A call string that is not a literal keyword call (an
    argument name that is not an identifier) cannot be written as JSON faithfully and is left out."""
    out = []
    for call in step:
        try:
            out.append(hermes_block(call))
        except (ValueError, SyntaxError):
            continue
    return out


def _finished(record: Mapping[str, Any]) -> bool:
    """Whether the episode ended on its own: BFCL multi-turn's own word (``end_reason``: force termination is an
    ending), else the episode's stop reason."""
    end = record.get("end_reason")
    if end is not None:
        return end in ("completed", "force_terminated")
    return record.get("stop_reason") == "done"


def _strip_reasoning(text: str, reasoning_parser: Any) -> str:
    if reasoning_parser is not None:
        _, text = reasoning_parser.parse(text)
    return text


def single_turn_result(record: Mapping[str, Any], form: str = "canonical", reasoning_parser: Any = None) -> str:
    """The ``result`` of a single-turn record: the answer as one response string."""
    if form == "canonical":
        return "\n".join(hermes_call(c["name"], c["arguments"]) for c in record.get("decoded_calls") or [])
    texts = [text for turn in record.get("responses") or [] for text in turn]
    return _strip_reasoning(texts[-1], reasoning_parser) if texts else ""


def bfcl_result(
    record: Mapping[str, Any], form: str = "canonical", reasoning_parser: Any = None
) -> list[list[str]] | str:
    """The ``result`` field bfcl-eval reads for one episode record."""
    if form not in FORMATS:
        raise ValueError(f"BFCL result form must be one of {FORMATS}, got {form!r}")
    if not _finished(record):
        return f"Error during inference: episode ended before its last turn ({record.get('end_reason')})"
    if result_group(str(record["category"])) != "multi_turn":
        return single_turn_result(record, form, reasoning_parser)
    if form == "canonical":
        turns = [["\n".join(_blocks(step)) for step in turn] for turn in record["decoded_calls"]]
    else:
        turns = []
        for turn in record["responses"]:
            steps = []
            for text in turn:
                steps.append(_strip_reasoning(text, reasoning_parser))
            turns.append(steps)
    if record.get("force_terminated"):
        turns = turns[:-1]
    return turns


def _sort_key(test_id: str) -> int:
    """bfcl-eval's ``sort_key`` within a category: ``live_simple_3-1-0`` and ``simple_python_3`` sort by 3."""
    return int(test_id.rsplit("_", 1)[1].split("-")[0])


def result_group(category: str) -> str:
    """bfcl-eval's result folder of a category (``get_directory_structure_by_id``)."""
    if category.startswith("multi_turn"):
        return "multi_turn"
    return "live" if "live" in category else "non_live"


def write_bfcl_results(
    records: Iterable[Mapping[str, Any]],
    out_dir: str | os.PathLike[str],
    registry_name: str = DEFAULT_REGISTRY_NAME,
    form: str = "canonical",
    reasoning_parser: Any = None,
) -> list[Path]:
    """Write one BFCL result file per category under ``out_dir``; return the files written.

    Files are rewritten whole (sorted by id), so calling this again after a resumed run is safe.
    """
    per_category: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for r in records:
        if int(r.get("sample", 0)) == 0:
            per_category[r["category"]].setdefault(r["test_id"], r)
    model_dir = Path(out_dir) / registry_name.replace("/", "_")
    written = []
    for category, entries in sorted(per_category.items()):
        folder = model_dir / result_group(category)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{VERSION_PREFIX}_{category}_result.json"
        tmp = path.with_suffix(".json.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for test_id in sorted(entries, key=_sort_key):
                row = {"id": test_id, "result": bfcl_result(entries[test_id], form, reasoning_parser)}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        written.append(path)
    return written


def write_results(records: Iterable[Mapping[str, Any]], out_dir: str | os.PathLike[str], meta: Mapping[str, Any],
                  model: str = DEFAULT_REGISTRY_NAME, format: str = "canonical") -> list[str]:
    """The ``bfcl`` and ``toolcall`` envs' ``write_results`` hook: BFCL result files for ``bfcl evaluate --model
    MODEL --result-dir OUT_DIR`` (``--partial-eval`` on subsets), the responses' reasoning stripped with the run's
    reasoning parser (``meta``)."""
    from agent_tune.parsing import get_reasoning_parser

    parser = get_reasoning_parser(str(meta.get("reasoning_parser") or "none"))
    return [str(p) for p in write_bfcl_results(records, out_dir, model, format, parser)]
