"""Read ToolRL's rlla data (Qian et al., 2025) as ``toolcall`` tasks.

ToolRL ships it in two forms (``dataset/rlla_4k_raw/rlla.py`` turns the first into the second):

* raw JSON (``rlla_rl.json``, ``rlla_sft.json``): a list of ``{"instruction", "input", "output"}``
  (a jsonl of such objects is read too);
* processed parquet (``rlla_4k/{train,test}.parquet``): verl rows with ``prompt = [{system: instruction},
  {user: input}]`` and ``reward_model.ground_truth = output`` (``extra_info`` repeats the three fields).

``instruction`` is ToolRL's system prompt: the tools under ``**Available Tools**`` as ``N. Name: ...`` /
``Description: ...`` / ``Parameters: {json}`` (each parameter ``{description, type, default}``), then the
output format. ``input`` is the dialogue so far (``**Dialogue Records History**\\n<user> ... </user>``, with
earlier calls and ``<obs>``). ``output`` is ``<think> ... </think>`` followed by a ``<tool_call>`` block of
JSON objects ``{"name", "parameters"}`` and/or a ``<response> ... </response>``.

A task (what the ``toolcall`` catalogue, :mod:`agent_tune.envs.toolcall.tasks`, plays) is ``{"id", "question":
input, "tools": the instruction's tools as OpenAI tools, "ground_truth": the output's calls as {"name",
"arguments"} (empty when the output only responds), "instruction": the system prompt}``. A record missing a field (or a
parquet row missing a column) raises :class:`RllaFormatError` naming the record and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from agent_tune.errors import DataError
from agent_tune.utils.jsonl import jsonl_lines

FIELDS = ("instruction", "input", "output")
PARQUET_COLUMNS = ("prompt", "reward_model")
TOOLS_HEADER = "**Available Tools**"
# ToolRL's parameter types -> JSON-schema types (anything else is kept as "string").
_TYPES = {
    "str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "number",
    "number": "number", "double": "number", "bool": "boolean", "boolean": "boolean", "list": "array",
    "array": "array", "dict": "object", "object": "object",
}
_TOOL_START = re.compile(r"^\d+\.\s*Name:\s*", re.M)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S)


class RllaFormatError(DataError, ValueError):
    """A record that is not in ToolRL's rlla format (the message names the record and the field)."""


def parse_tools(instruction: str, where: str) -> list[dict[str, Any]]:
    """The tools listed in ToolRL's system prompt, as OpenAI tools."""
    start = instruction.find(TOOLS_HEADER)
    if start < 0:
        raise RllaFormatError(f"{where}: field 'instruction' has no {TOOLS_HEADER!r} section")
    section = instruction[start + len(TOOLS_HEADER):]
    end = section.find("\n**")
    section = section[:end] if end >= 0 else section
    chunks = _TOOL_START.split(section)[1:]
    tools = []
    for chunk in chunks:
        name, _, rest = chunk.partition("\n")
        desc_part, sep, params_text = rest.partition("Parameters:")
        if not sep:
            raise RllaFormatError(f"{where}: tool {name.strip()!r} in 'instruction' has no 'Parameters:' line")
        description = desc_part.strip()
        if description.startswith("Description:"):
            description = description[len("Description:"):].strip()
        try:
            params = json.loads(params_text.strip() or "{}")
        except ValueError as exc:
            raise RllaFormatError(f"{where}: tool {name.strip()!r} in 'instruction': parameters are not JSON "
                                  f"({exc})") from None
        tools.append({"type": "function", "function": {
            "name": name.strip(), "description": description, "parameters": _schema(params)}})
    return tools


def _schema(params: Any) -> dict[str, Any]:
    """ToolRL's ``{param: {description, type, default}}`` as a JSON schema (no ``required``: ToolRL gives none)."""
    properties: dict[str, Any] = {}
    for name, spec in (params.items() if isinstance(params, Mapping) else []):
        spec = spec if isinstance(spec, Mapping) else {}
        prop: dict[str, Any] = {"type": _TYPES.get(str(spec.get("type", "string")).strip().lower(), "string")}
        if spec.get("description"):
            prop["description"] = str(spec["description"])
        if spec.get("default") not in (None, ""):
            prop["default"] = spec["default"]
        properties[str(name)] = prop
    return {"type": "object", "properties": properties}


def parse_calls(output: str, where: str) -> list[dict[str, Any]]:
    """The calls of the output's ``<tool_call>`` blocks as ``{"name", "arguments"}`` (none for a response).
    The ``<think>`` part is left out first: reasoning may mention ``<tool_call>`` in passing."""
    decoder = json.JSONDecoder()
    calls = []
    for block in _TOOL_CALL.findall(_THINK.sub("", output)):
        pos = 0
        while True:
            while pos < len(block) and block[pos] in " \t\r\n,;":
                pos += 1
            if pos >= len(block):
                break
            try:
                obj, pos = decoder.raw_decode(block, pos)
            except ValueError as exc:
                raise RllaFormatError(f"{where}: field 'output' holds a tool call that is not JSON ({exc})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                raise RllaFormatError(f"{where}: field 'output' holds a tool call without a string 'name'")
            args = obj.get("parameters", obj.get("arguments")) or {}
            if not isinstance(args, dict):
                raise RllaFormatError(f"{where}: field 'output': call {obj['name']!r} has non-object parameters")
            calls.append({"name": obj["name"], "arguments": args})
    return calls


def record_to_task(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One ``{"instruction", "input", "output"}`` record as a toolcall task."""
    for key in FIELDS:
        if key not in record or record[key] is None:
            raise RllaFormatError(f"{where}: missing field {key!r}")
        if not isinstance(record[key], str):
            raise RllaFormatError(f"{where}: field {key!r} must be a string, got {type(record[key]).__name__}")
    return {
        "id": where,
        "question": record["input"],
        "tools": parse_tools(record["instruction"], where),
        "ground_truth": parse_calls(record["output"], where),
        "instruction": record["instruction"],
    }


def _parquet_records(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(where, {"instruction", "input", "output"})`` per row of a processed parquet."""
    import pandas as pd

    df = pd.read_parquet(path)
    for col in PARQUET_COLUMNS:
        if col not in df.columns:
            raise RllaFormatError(f"{path.name}: missing column {col!r} (ToolRL's rlla parquet has "
                                  f"{', '.join(PARQUET_COLUMNS)}); found {', '.join(map(str, df.columns))}")
    for i, row in enumerate(df.to_dict("records")):
        where = f"{path.name} row {i}"
        prompt, reward = row.get("prompt"), row.get("reward_model")
        if prompt is None:
            raise RllaFormatError(f"{where}: missing column 'prompt'")
        if not isinstance(reward, Mapping) or reward.get("ground_truth") is None:
            raise RllaFormatError(f"{where}: missing column 'reward_model.ground_truth'")
        roles = {str(m.get("role")): m.get("content") for m in list(prompt) if isinstance(m, Mapping)}
        for role in ("system", "user"):
            if roles.get(role) is None:
                raise RllaFormatError(f"{where}: column 'prompt' has no {role} message")
        yield where, {"instruction": roles["system"], "input": roles["user"], "output": reward["ground_truth"]}


def _json_records(path: Path) -> Iterable[tuple[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError:  # jsonl
        data = [value for _, value in jsonl_lines(text, path.name, RllaFormatError)]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise RllaFormatError(f"{path.name}: expected a JSON list of {{instruction, input, output}} records")
    for i, rec in enumerate(data):
        if not isinstance(rec, Mapping):
            raise RllaFormatError(f"{path.name} record {i}: not a JSON object")
        yield f"{path.name} record {i}", rec


def load_rlla(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a raw rlla JSON/jsonl file or a processed rlla parquet, as toolcall tasks.

    Reads the whole file first, so a malformed record fails before anything is written."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"rlla file {path} not found")
    records = _parquet_records(path) if path.suffix == ".parquet" else _json_records(path)
    return [record_to_task(rec, where) for where, rec in records]
