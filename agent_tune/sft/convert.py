"""``agent-tune sft-data``: other projects' SFT data as the rows ``agent-tune sft`` trains on.

    agent-tune sft-data --format rlla_sft rlla_sft.json data/rlla_sft.parquet [--system instruction|generated]
    agent-tune sft-data --format tau2_seed seed_sft_v3.jsonl data/tau2_seed.parquet [--form native|pipeline|raw]
    ... [--tokenizer DIR --template NAME [--chat-template-kwargs JSON] [--max-length N]]   (render every row)
    agent-tune sft-data --format reference data/notes/train.parquet data/notes/reference.jsonl --tokenizer DIR \
        --template smollm2_tools [--tool-parser hermes] [--env-kwargs JSON] [--max-prompt-length N ...]

``reference`` plays a training file's rows (``agent-tune data`` output, any env) through the episode runner with a
scripted policy writing each env's reference answers (``BaseToolEnv.reference_replies``) and keeps the episodes
the env scores a success as rows of tokens, exactly the rows the eval's ``--sft-out`` writes
(:mod:`agent_tune.sft.reference`); the dropped rows are counted by reason.

The rows are ``{"id", "messages", "tools", "source", ...}`` (``docs/sft.md``); ``agent-tune sft`` renders them
with the run's chat template exactly as the RL runner tokenises the same episode
(:mod:`agent_tune.sft.rows`), so a row is token-exact with the RL episode whose messages it holds:

* ``rlla_sft``: ToolRL's SFT data (``dataset/rlla_4k_raw/rlla_sft.json``: a JSON list, or jsonl, of
  ``{"instruction", "input", "output"}``; ``output`` is DeepSeek-R1's ``<think>`` and a ``<tool_call>`` block of
  ``{"name", "parameters"}`` lines and/or a ``<response>``). A row is ``[system, user, assistant: output]`` with no
  ``tools`` (ToolRL's layout lists them in the system prompt), the prompt the ``toolcall`` env gives the same
  record with ``answer_format: toolrl``: ``--system instruction`` (default) keeps ToolRL's own system prompt, as
  the env does with the catalogue option ``keep_instruction``; ``--system generated`` writes the env's own
  (:func:`~agent_tune.rewards.toolrl_format.toolrl_system_prompt` of the instruction's tools), as the env does
  without it. Train with the template and parser of ``config/recipe/toolrl.yaml`` (``tokenizer``, ``toolrl``).
* ``tau2_seed``: the Tau2-RL-Pipeline's SFT seed (``seed_sft_v3.jsonl``, ``tau2_sft_merged_v3_rft.jsonl``: one
  conversation per line under ``messages``, or ``prompt`` as slime's ``--input-key prompt`` reads it, with
  metadata such as ``domain`` and ``task_id``). The pipeline's agent answers every turn with one
  ``<tool_call>{"name", "arguments"}</tool_call>``, where the pseudo-tools ``respond`` (``{"content"}``: text for
  the user) and ``done`` end the turn and the episode, and it reads a tool's result as a user message
  ``Tool result for name(k=v, ...):\\n<result>``. ``--form native`` (default) writes the conversation as
  agent-tune's ``tau2`` env plays it: tau2's own system prompt and greeting for the row's domain, the domain's
  tools, a real call as the assistant's structured ``tool_calls`` (the template writes the ``<tool_call>`` block),
  ``respond`` as the assistant's text, ``done`` as ``###STOP###``, each result as a ``tool`` message. (The
  greeting is an assistant message of the row, so it carries loss; in an RL episode it is the env's.) ``--form
  pipeline`` writes it as the ``tau2`` env plays it with ``protocol="pipeline"``: the env's pipeline system
  prompt for the row's domain (:func:`~agent_tune.envs.tau2.catalogue.pipeline_first_messages`, in place of the
  row's own), then the messages as they are, each assistant turn checked to be one action the env accepts; no
  tools (they are in the prompt). ``--form raw`` keeps the messages as they are, system prompt included (what the
  pipeline's own SFT trains on; no tools).

A record that is not in its format raises :class:`SFTDataError` naming the record (its line or index) and the
field; nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from agent_tune.errors import AgentTuneError, DataError, exit_code
from agent_tune.utils.cli_args import HelpFormatter, examples, json_object
from agent_tune.utils.jsonl import jsonl_lines

FORMATS = ("rlla_sft", "tau2_seed", "reference")
RLLA_SYSTEMS = ("instruction", "generated")
TAU2_FORMS = ("native", "pipeline", "raw")
TAU2_STOP = "###STOP###"  # the agent's end of the episode in tau2 (the pipeline's `done`)
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_RESULT = re.compile(r"\ATool result for ([A-Za-z_][\w.\-]*)\((.*?)\):\n", re.S)
_DOMAIN = re.compile(r"You are an? (\w+) customer support agent")


class SFTDataError(DataError, ValueError):
    """A record that is not in the format being converted (the message names the record and the field)."""


# --------------------------------------------------------------------------- reading
def read_records(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """``(where, record)`` per record of a JSON list, a jsonl file or a parquet file (``where``: the file and
    the record's line or index, for error messages)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".parquet":
        import pandas as pd

        from agent_tune.sft.rows import plain_value

        rows = pd.read_parquet(path).to_dict(orient="records")
        return [(f"{path.name} row {i}", {k: plain_value(v) for k, v in r.items()}) for i, r in enumerate(rows)]
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SFTDataError(f"{path.name}: not JSON ({exc})") from None
        out = []
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise SFTDataError(f"{path.name} record {i}: not a JSON object")
            out.append((f"{path.name} record {i}", rec))
        return out
    out = []
    for lineno, rec in jsonl_lines(text, path.name, SFTDataError):
        if not isinstance(rec, dict):
            raise SFTDataError(f"{path.name} line {lineno}: not a JSON object")
        out.append((f"{path.name} line {lineno}", rec))
    return out


# --------------------------------------------------------------------------- ToolRL's rlla_sft
def rlla_sft_row(record: Mapping[str, Any], where: str, system: str = "instruction") -> dict[str, Any]:
    """One ``{"instruction", "input", "output"}`` record as an SFT row (see the module)."""
    from agent_tune.envs.toolcall.rlla import RllaFormatError, record_to_task
    from agent_tune.rewards.toolrl_format import toolrl_system_prompt

    if system not in RLLA_SYSTEMS:
        raise ValueError(f"system must be one of {', '.join(RLLA_SYSTEMS)}, got {system!r}")
    try:
        task = record_to_task(record, where)  # checks the three fields, the tools and the output's calls
    except RllaFormatError as exc:
        raise SFTDataError(str(exc)) from None
    prompt = record["instruction"] if system == "instruction" else toolrl_system_prompt(task["tools"])
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": record["input"]},
                {"role": "assistant", "content": record["output"]}]
    return {"messages": messages, "tools": [], "source": "rlla_sft",
            "ground_truth": task["ground_truth"]}


# --------------------------------------------------------------------------- the Tau2-RL-Pipeline's seed
def _conversation(record: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    for key in ("messages", "prompt"):
        value = record.get(key)
        if value is not None:
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise SFTDataError(f"{where}: field {key!r} is a string that is not JSON") from None
            if not isinstance(value, list) or not value:
                raise SFTDataError(f"{where}: field {key!r} must be a non-empty list of messages")
            for i, m in enumerate(value):
                if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
                    raise SFTDataError(f"{where}: message {i} is not a chat message with a known role")
                if not isinstance(m.get("content"), str):
                    raise SFTDataError(f"{where}: message {i} ({m['role']}): 'content' must be a string")
            return [dict(m) for m in value]
    raise SFTDataError(f"{where}: no 'messages' (or 'prompt') field")


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    meta = record.get("metadata")
    return dict(meta) if isinstance(meta, Mapping) else {}


def tau2_domain(record: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The row's tau2 domain: its ``domain`` (or ``metadata.domain``), else the pipeline's system prompt's
    ``You are a <domain> customer support agent``."""
    domain = record.get("domain") or _metadata(record).get("domain")
    if domain:
        return str(domain)
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    match = _DOMAIN.search(system)
    return match.group(1) if match else None


def _calls(text: str, where: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The text outside the ``<tool_call>`` blocks (stripped) and the blocks' ``(name, arguments)``."""
    calls = []
    for block in _BLOCK.findall(text):
        try:
            obj = json.loads(block)
        except ValueError as exc:
            raise SFTDataError(f"{where}: a <tool_call> block is not JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
            raise SFTDataError(f"{where}: a <tool_call> block has no string 'name'")
        args = obj.get("arguments", obj.get("parameters")) or {}
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                raise SFTDataError(f"{where}: call {obj['name']!r}: 'arguments' is a string that is not JSON") from None
        if not isinstance(args, dict):
            raise SFTDataError(f"{where}: call {obj['name']!r}: 'arguments' must be an object")
        calls.append((obj["name"], args))
    return _BLOCK.sub("", text).strip(), calls


def _native_assistant(message: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """A pipeline assistant turn as the tau2 env's assistant message, and the names of the tools it calls."""
    text, calls = _calls(message["content"], where)
    pseudo = [name for name, _ in calls if name in ("respond", "done")]
    if not calls:
        return {"role": "assistant", "content": text}, []
    if pseudo and len(calls) > 1:
        raise SFTDataError(f"{where}: {pseudo[0]!r} together with other calls in one turn")
    if text:
        raise SFTDataError(f"{where}: text outside the <tool_call> block ({text[:60]!r})")
    name, args = calls[0]
    if name == "respond":
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            raise SFTDataError(f"{where}: 'respond' needs a non-empty string 'content'")
        return {"role": "assistant", "content": content}, []
    if name == "done":
        return {"role": "assistant", "content": TAU2_STOP}, []
    tool_calls = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}, [n for n, _ in calls]


def tau2_native_messages(messages: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """The pipeline's conversation after its system prompt, as the tau2 env's messages (see the module)."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # the calls of the last assistant turn still waiting for their results
    for i, m in enumerate(messages):
        at = f"{where} message {i}"
        role, content = m["role"], m["content"]
        if role == "system":
            continue
        if role == "assistant":
            if pending:
                raise SFTDataError(f"{at}: the result of {pending[0]!r} is missing before this turn")
            msg, pending = _native_assistant(m, at)
            out.append(msg)
        elif role == "tool":
            if not pending:
                raise SFTDataError(f"{at}: a tool result with no call before it")
            out.append({"role": "tool", "name": pending.pop(0), "content": content})
        else:
            match = _RESULT.match(content)
            if match is None:
                out.append({"role": "user", "content": content})
                continue
            if not pending:
                raise SFTDataError(f"{at}: 'Tool result for {match.group(1)}' with no call before it")
            if match.group(1) != pending[0]:
                raise SFTDataError(f"{at}: the result of {match.group(1)!r} answers a call of {pending[0]!r}")
            out.append({"role": "tool", "name": pending.pop(0), "content": content[match.end():]})
    return out


def _tau2_domain_prompt(domain: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """tau2's agent system prompt and greeting for ``domain`` and its tools, as the tau2 env starts an episode."""
    from agent_tune.envs.tau2 import catalogue, loader
    from agent_tune.envs.tau2.messages import tool_schemas

    loader.check_domain(domain)
    return catalogue.first_messages(domain), tool_schemas(loader.new_environment(domain).get_tools())


def tau2_pipeline_messages(messages: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """The pipeline's conversation after its system prompt, checked as the tau2 env's pipeline protocol reads it:
    user and assistant messages only, each assistant turn one well-formed action."""
    from agent_tune.envs.tau2.pipeline import ActionError, parse_action

    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        role, content = m["role"], m["content"]
        if role == "system":
            continue
        if role == "tool":
            raise SFTDataError(f"{where} message {i}: a 'tool' message; the pipeline protocol shows tool results "
                               "as user messages ('Tool result for ...')")
        if role == "assistant":
            try:
                parse_action(content)
            except ActionError as exc:
                raise SFTDataError(f"{where} message {i}: not one action of the pipeline protocol ({exc})") from None
        out.append({"role": role, "content": content})
    return out


def tau2_seed_row(record: Mapping[str, Any], where: str, form: str = "native",
                  domain_prompt: Callable[[str], tuple[list[dict[str, Any]], list[dict[str, Any]]]] | None = None,
                  ) -> dict[str, Any]:
    """One seed conversation as an SFT row (see the module); ``domain_prompt`` gives a domain's first messages
    and tools (default: tau2's own, cached by the caller)."""
    if form not in TAU2_FORMS:
        raise ValueError(f"form must be one of {', '.join(TAU2_FORMS)}, got {form!r}")
    messages = _conversation(record, where)
    meta = _metadata(record)
    extra = {k: record.get(k, meta.get(k)) for k in ("domain", "task_id", "reward")
             if record.get(k, meta.get(k)) is not None}
    domain = tau2_domain(record, messages)
    if domain is not None:
        extra["domain"] = domain
    if form == "raw":
        return {"messages": messages, "tools": [], "source": "tau2_seed", **extra}
    if domain is None:
        raise SFTDataError(f"{where}: no domain (a 'domain' field, or 'You are a <domain> customer support agent' "
                           f"in the system prompt); --form {form} needs it for the env's prompt")
    if form == "pipeline":
        from agent_tune.envs.tau2 import catalogue

        catalogue.loader.check_domain(domain)
        return {"messages": [*catalogue.pipeline_first_messages(domain), *tau2_pipeline_messages(messages, where)],
                "tools": [], "source": "tau2_seed", **extra}
    first, tools = (domain_prompt or _tau2_domain_prompt)(domain)
    return {"messages": [*first, *tau2_native_messages(messages, where)], "tools": tools, "source": "tau2_seed",
            **extra}


# --------------------------------------------------------------------------- conversion
def convert(fmt: str, path: str | Path, system: str = "instruction", form: str = "native",
            domain_prompt: Callable[[str], tuple[list[dict[str, Any]], list[dict[str, Any]]]] | None = None,
            ) -> list[dict[str, Any]]:
    """Every record of ``path`` in format ``fmt`` as an SFT row with an ``id`` (``<fmt>:<index>``, or
    ``tau2/<domain>/<task_id>#<index>`` for a seed row that names its task)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    cache: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}

    def cached(domain: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if domain not in cache:
            cache[domain] = (domain_prompt or _tau2_domain_prompt)(domain)
        return cache[domain]

    rows = []
    for index, (where, record) in enumerate(read_records(path)):
        if fmt == "rlla_sft":
            row = rlla_sft_row(record, where, system)
            row_id = f"rlla_sft:{index}"
        else:
            row = tau2_seed_row(record, where, form, cached)
            task = row.get("task_id")
            row_id = f"tau2/{row['domain']}/{task}#{index}" if task is not None and "domain" in row \
                else f"tau2_seed:{index}"
        rows.append({"id": row_id, **row})
    return rows


def write_rows(rows: Iterable[Mapping[str, Any]], out: str | Path) -> Path:
    """``rows`` to ``out``: parquet (``messages``, ``tools`` and other nested values as JSON text, as
    ``docs/sft.md`` asks) or jsonl."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    if out.suffix == ".parquet":
        import pandas as pd

        flat = [{k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in r.items()}
                for r in rows]
        pd.DataFrame(flat).to_parquet(out, index=False)
    elif out.suffix == ".jsonl":
        with out.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    else:
        raise ValueError(f"{out}: the output must be .parquet or .jsonl")
    return out


def render_check(path: str | Path, tokenizer: str, template: str, chat_template_kwargs: Mapping[str, Any],
                 max_length: int | None) -> Any:
    """Render every row of ``path`` as ``agent-tune sft`` will (:func:`agent_tune.sft.rows.render_rows`
    with the run's tokenizer and template): the :class:`~agent_tune.sft.rows.RenderReport`."""
    from agent_tune.eval.evaluate import load_tokenizer
    from agent_tune.rollout import ChatRenderer
    from agent_tune.sft.rows import read_conversations, render_rows

    renderer = ChatRenderer(load_tokenizer(tokenizer), template, dict(chat_template_kwargs))
    return render_rows(renderer, read_conversations(path), max_length)


# --------------------------------------------------------------------------- command line
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune sft-data",
        description="Convert other projects' SFT data into agent-tune sft rows (messages + tools): ToolRL's "
        "rlla_sft (DeepSeek-R1 thoughts) and the Tau2-RL-Pipeline's SFT seed jsonl. See docs/sft.md.",
        formatter_class=HelpFormatter,
        epilog=examples("agent-tune sft-data --format rlla_sft rlla_sft.json data/sft/train.parquet",
                        "agent-tune sft-data --format tau2_seed seed.jsonl data/sft/tau2.parquet"))
    p.add_argument("input", help="the data file (.json list, .jsonl or .parquet)")
    p.add_argument("output", help="the SFT rows to write (.parquet or .jsonl)")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--system", choices=RLLA_SYSTEMS, default="instruction",
                   help="rlla_sft: ToolRL's own system prompt (instruction, default) or the toolcall env's "
                   "(generated)")
    p.add_argument("--form", choices=TAU2_FORMS, default="native",
                   help="tau2_seed: as agent-tune's tau2 env plays it (native, default; pipeline: with "
                   "protocol=pipeline; both need tau2) or the pipeline's messages as they are (raw)")
    ref = p.add_argument_group("reference: the rows' reference answers played by the episode runner (with "
                               "--tokenizer and --template: the GRPO run's agent_tune.template)")
    ref.add_argument("--tool-parser", default="hermes", help="the GRPO run's agent_tune.tool_parser")
    ref.add_argument("--reasoning-parser", default="none", help="the GRPO run's agent_tune.reasoning_parser")
    ref.add_argument("--env-kwargs", type=json_object, default={},
                     help="the envs' kwargs as JSON (the GRPO run's agent_tune.env_kwargs.<env>, e.g. the mcp server)")
    ref.add_argument("--max-prompt-length", type=int, default=None,
                     help="the GRPO run's data.max_prompt_length (default: no bound)")
    ref.add_argument("--max-response-length", type=int, default=None,
                     help="the GRPO run's data.max_response_length (default: no bound)")
    ref.add_argument("--min-accuracy", type=float, default=1.0, help="keep episodes with accuracy >= this")
    chk = p.add_argument_group("render every row as agent-tune sft will (optional)")
    chk.add_argument("--tokenizer", default=None, help="the SFT run's local Hugging Face tokenizer folder")
    chk.add_argument("--template", default="tokenizer", help="the run's data.chat_template")
    chk.add_argument("--chat-template-kwargs", type=json_object, default={},
                     help="the run's data.apply_chat_template_kwargs as JSON")
    chk.add_argument("--max-length", type=int, default=None, help="the run's data.max_length")
    return p


UNBOUNDED = 1 << 20  # a token budget with no bound


def reference_main(args: argparse.Namespace) -> int:
    """``--format reference``: the rows' reference episodes as token rows (:mod:`agent_tune.sft.reference`)."""
    from agent_tune.eval.evaluate import load_tokenizer
    from agent_tune.rollout import ChatRenderer, RolloutLimits
    from agent_tune.sft.reference import reference_rows

    if not args.tokenizer:
        print("error: --format reference renders the episodes: give --tokenizer (and the run's --template)",
              file=sys.stderr)
        return 2
    try:
        renderer = ChatRenderer(load_tokenizer(args.tokenizer), args.template, dict(args.chat_template_kwargs))
        limits = RolloutLimits(args.max_prompt_length or UNBOUNDED, args.max_response_length or UNBOUNDED)
        rows, report = reference_rows(args.input, renderer, limits, args.tool_parser, args.reasoning_parser,
                                      args.env_kwargs, args.min_accuracy, {"template": args.template})
        print(report.summary())
        for test_id, reason in list(report.dropped.items())[:10]:
            print(f"  dropped {test_id}: {reason}", file=sys.stderr)
        if not rows:
            raise SFTDataError(f"{args.input}: no reference episode scored a success")
        out = write_rows(rows, args.output)
    except (AgentTuneError, FileNotFoundError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    print(f"{len(rows)} SFT rows (reference, with their tokens) written to {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``agent-tune sft-data ...`` (``argv`` excludes ``sft-data``)."""
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.format == "reference":
        return reference_main(args)
    try:
        rows = convert(args.format, args.input, args.system, args.form)
        if not rows:
            raise SFTDataError(f"{args.input}: no records")
        out = write_rows(rows, args.output)
    except (AgentTuneError, FileNotFoundError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    print(f"{len(rows)} SFT rows ({args.format}) written to {out}")
    if args.tokenizer:
        try:
            report = render_check(out, args.tokenizer, args.template, args.chat_template_kwargs, args.max_length)
        except (AgentTuneError, FileNotFoundError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exit_code(exc)
        print(report.summary())
        if report.rows:
            lengths = sorted(len(r) for r in report.rows)
            print(f"tokens per row: min {lengths[0]}, median {lengths[len(lengths) // 2]}, max {lengths[-1]}")
        return 1 if report.skipped else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
