"""``agent-tune eval``: play an env's tasks (BFCL multi-turn or single-turn, tau2-bench, ReTool, any plug-in with a
task catalogue) or a training file's rows against an OpenAI-compatible server, and report them.

    agent-tune eval --base-url http://127.0.0.1:8000/v1 --model NAME --split test [options]      (bfcl)
    agent-tune eval --base-url ... --model NAME --env toolcall --suite live [options]
    agent-tune eval --base-url ... --model NAME --env toolcall --categories simple_python multiple [options]
    agent-tune eval --base-url ... --model NAME --env tau2 --categories airline retail --split test --n 4 \
        --user-base-url http://127.0.0.1:8001/v1 --user-model USER [options]
    agent-tune eval --base-url ... --model NAME --env examples.envs.calculator:CalculatorEnv --split test
    agent-tune eval --base-url ... --model NAME --rows data/train.parquet --n 4 --sft-out rft.jsonl  (any env)
    agent-tune eval --config examples/eval/bfcl_vllm.yaml [--flag value ...]   (flags from YAML; the command wins)
    agent-tune eval report a.jsonl [b.jsonl ...] [--json out.json] [--png out.png] [--results-dir DIR]
                      [--labels A B ...] [--stage-table table.md] [--mixed-ids ids.txt]
    agent-tune eval record | tables | curve ...   results as data: docs/results/*.json, the tables and curves drawn
                      from them (agent_tune/eval/results_cli.py)

The entries are :func:`agent_tune.envs.tasks.select_tasks` of the env's catalogue; the report and the files in
the official scorer's format come from the env's report (``BaseToolEnv.report``: ``sections``, ``lines``,
``write_results``).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any, Sequence

from agent_tune.errors import AgentTuneError, ConfigError, exit_code
from agent_tune.utils.cli_args import HelpFormatter, examples, json_object


def run_parser() -> argparse.ArgumentParser:
    from agent_tune.eval.servers import SERVER_APIS

    p = argparse.ArgumentParser(
        prog="agent-tune eval",
        description="Evaluate a served model with the training episode runner: BFCL v4 (multi-turn: the bfcl env; "
        "single-turn: the toolcall env; leaderboard rules), tau2-bench, the rows of a training file (any env), or "
        "any env's task catalogue (--env NAME --split S). `agent-tune eval report FILE...` re-prints/plots results.",
        formatter_class=HelpFormatter,
        epilog=examples(
            "agent-tune eval --base-url http://127.0.0.1:8000/v1 --model NAME --split test          (BFCL multi-turn)",
            "agent-tune eval --base-url ... --model NAME --env examples.envs.calculator:CalculatorEnv --split test",
            "agent-tune eval --base-url ... --model NAME --rows data/bfcl/val.parquet --n 4 --temperature 0.7",
            "agent-tune eval report eval.jsonl --png eval.png"),
    )
    p.add_argument("--config", default=None, metavar="FILE.yaml",
                   help="take flags from a YAML file: keys are the flag names (dashes or underscores), values "
                   "typed as the flag; flags on the command line override the file (docs/eval.md)")
    srv = p.add_argument_group("server")
    srv.add_argument("--base-url", required=True,
                     help="the server's URL: OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (--api openai); "
                     "SGLang's root, e.g. http://127.0.0.1:30000 (--api sglang)")
    srv.add_argument("--api", choices=tuple(SERVER_APIS), default="openai",
                     help="openai: the OpenAI-compatible API (token mode: vLLM's /completions with token ids; chat "
                     "mode: /chat/completions) (default); sglang: SGLang's native /generate, token ids in, ids and "
                     "log-probs out (token mode)")
    srv.add_argument("--model", required=True, help="served model name (as /v1/models lists it)")
    srv.add_argument("--api-key", default=None, help="bearer token, if the server wants one")
    srv.add_argument("--mode", choices=("tokens", "chat"), default="tokens",
                     help="tokens: token ids to /completions, exactly as training (default); "
                     "chat: /chat/completions with tools= (not token-exact)")
    srv.add_argument("--concurrency", type=int, default=16,
                     help="episodes in flight at once (more keeps a GPU server busy; fewer spares a CPU one)")
    srv.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    srv.add_argument("--retries", type=int, default=5, help="retries per request on 5xx/429/connection errors")
    sel = p.add_argument_group("entries (an env's task catalogue: agent-tune envs lists the envs)")
    sel.add_argument("--env", default=None,
                     help="a registered env (bfcl: BFCL multi-turn; toolcall: BFCL single-turn; tau2; retool; ...) "
                     "or a module:Class path (default bfcl)")
    sel.add_argument("--split", default=None,
                     help="one of the env's splits (bfcl: train train_base train_hard val test all; toolcall: train "
                     "val test all; tau2: train test base all); default: the env's own choice (bfcl: every entry "
                     "of the four scored categories; toolcall: every entry; tau2 and others: test)")
    sel.add_argument("--options", type=json_object, default={},
                     help="the options of the env's tasks() as JSON (bfcl: '{\"seed\": 42}', the split seed)")
    sel.add_argument("--suite", default=None,
                     help="a named set of the env's categories (bfcl: multi_turn; toolcall: single_turn_python, "
                     "non_live, live)")
    sel.add_argument("--categories", nargs="+", default=None,
                     help="full names or their end: bfcl: base miss_func miss_param long_context composite; "
                     "toolcall: simple_python multiple parallel ... live_relevance; tau2: airline retail telecom mock")
    sel.add_argument("--ids", nargs="+", default=None,
                     help="task ids, e.g. multi_turn_base_12, simple_python_3, tau2/airline/0")
    sel.add_argument("--ids-file", default=None,
                     help="task ids from a file: plain lines of ids, or JSONL rows (their id, extra_info.id, or "
                     "T3RL's metadata.bfcl_task.id: its bfcl_test.jsonl keeps its test split)")
    sel.add_argument("--limit", type=int, default=None, help="first N entries per category")
    sel.add_argument("--rows", default=None,
                     help="play the rows of a training data file (.parquet/.jsonl) instead of a catalogue: each "
                     "row's extra_info.env names its env (e.g. for rejection sampling)")
    mdl = p.add_argument_group("model format")
    mdl.add_argument("--tokenizer", default=None, help="local HF tokenizer folder (default: --model if it is a folder)")
    mdl.add_argument("--template", default="tokenizer",
                     help="chat template name or .jinja path (default: the tokenizer's)")
    mdl.add_argument("--tool-parser", default="hermes", help="the tool-call parser (agent_tune/parsing/)")
    mdl.add_argument("--reasoning-parser", default="none",
                     help="a reasoning parser name (none, qwen3, deepseek_r1, thinking) or any tag pair: "
                          "'tags:start=<S>,end=<E>[,opened_in_prompt=true]'")
    mdl.add_argument("--chat-template-kwargs", type=json_object, default={},
                     help='JSON, e.g. \'{"enable_thinking": false}\'')
    mdl.add_argument("--env-kwargs", type=json_object, default={},
                     help="extra env kwargs as JSON (e.g. system_prompt)")
    usr = p.add_argument_group("a simulated user, for envs that take one (tau2): an OpenAI-compatible server, "
                               "checked at start-up")
    usr.add_argument("--user-base-url", default=None, help="e.g. http://127.0.0.1:8001/v1")
    usr.add_argument("--user-model", default=None, help="served model name of the user simulator")
    usr.add_argument("--user-api-key-env", default=None, help="environment variable holding the user server's key")
    usr.add_argument("--user-temperature", type=float, default=0.0, help="tau2's default: 0.0")
    usr.add_argument("--user-max-tokens", type=int, default=1024, help="max new tokens per user reply")
    jdg = p.add_argument_group("tau2's NL-assertion judge (optional; only tasks whose reward counts NL assertions "
                               "ask it; checked at start-up)")
    jdg.add_argument("--judge-base-url", default=None, help="e.g. http://127.0.0.1:8002/v1")
    jdg.add_argument("--judge-model", default=None, help="served model name of the judge")
    jdg.add_argument("--judge-api-key-env", default=None, help="environment variable holding the judge's key")
    jdg.add_argument("--judge-temperature", type=float, default=0.0, help="tau2's default: 0.0")
    smp = p.add_argument_group("sampling")
    smp.add_argument("--n", type=int, default=1, help="samples per entry (pass@k for k <= n; e.g. --n 4 "
                     "--temperature 0.7 for pass@4)")
    smp.add_argument("--temperature", type=float, default=0.0,
                     help="sampling temperature (0: greedy, one answer per entry; > 0 with --n > 1 for pass@k)")
    smp.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling's probability mass")
    smp.add_argument("--top-k", type=int, default=None,
                     help="sample from the K most likely tokens (vLLM's top_k; default: not sent, all tokens)")
    smp.add_argument("--seed", type=int, default=None, help="per-request seed (sample i uses seed+i)")
    smp.add_argument("--max-tokens", type=int, default=2048, help="max new tokens per generation")
    smp.add_argument("--max-model-len", type=int, default=None,
                     help="context length (default: what the server reports)")
    out = p.add_argument_group("output")
    out.add_argument("--output", default="eval.jsonl", help="results jsonl (appended; rerun resumes)")
    out.add_argument("--report-json", default=None, help="report JSON (default: OUTPUT stem + .report.json)")
    out.add_argument("--png", default=None, help="accuracy chart (default: OUTPUT stem + .png)")
    out.add_argument("--results-dir", default=None,
                     help="the results in the env's official scorer's format (bfcl / toolcall: BFCL result files for "
                     "`bfcl evaluate`; tau2: tau2's Results, one <domain>.json each); default: OUTPUT stem + _results")
    out.add_argument("--results-options", type=json_object, default={},
                     help="options of the env's results files as JSON (bfcl / toolcall: '{\"model\": REGISTRY_NAME, "
                     "\"format\": \"canonical\" or \"raw\"}')")
    out.add_argument("--passk-json", default=None,
                     help="also write pass@1 (the first sample's success) and pass@k (any success among the k = --n "
                     "samples), overall and per category, in the shape of Tau2-RL-Pipeline's eval_passk.py output "
                     "(examples/eval/tau2_pipeline_pass4.yaml)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    rft = p.add_argument_group("rejection sampling (RFT)")
    rft.add_argument("--sft-out", default=None,
                     help="also write every successful episode as an SFT row with its exact tokens (jsonl, "
                     "appended; rerun resumes) for `agent-tune sft`; needs --mode tokens")
    rft.add_argument("--sft-min-accuracy", type=float, default=None,
                     help="keep episodes with accuracy >= this (default 1 when no threshold is given)")
    rft.add_argument("--sft-min-reward", type=float, default=None, help="keep episodes with reward >= this")
    return p


class ConfigFileError(ConfigError):
    """A ``--config`` file that cannot give the run's flags (the message names the file and the key)."""


def _config_value(action: argparse.Action, key: str, value: Any, where: str) -> Any:
    """``value`` of config key ``key`` typed as the flag ``action`` types its command-line text."""
    flag = action.option_strings[-1]
    if value is None:
        if action.required:
            raise ConfigFileError(f"{where}: key {key!r}: {flag} needs a value, got null")
        return None
    if action.nargs == 0:  # store_true
        if not isinstance(value, bool):
            raise ConfigFileError(f"{where}: key {key!r}: {flag} is a switch, give true or false, got {value!r}")
        return value
    if action.nargs in ("+", "*"):
        items = value if isinstance(value, list) else [value]
        if action.nargs == "+" and not items:
            raise ConfigFileError(f"{where}: key {key!r}: {flag} needs at least one value")
        return [_config_scalar(action, key, v, where) for v in items]
    return _config_scalar(action, key, value, where)


def _config_scalar(action: argparse.Action, key: str, value: Any, where: str) -> Any:
    flag = action.option_strings[-1]
    kind = action.type
    if kind is json_object:
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            try:
                return json_object(value)
            except argparse.ArgumentTypeError as exc:
                raise ConfigFileError(f"{where}: key {key!r}: {flag}: {exc}") from None
        raise ConfigFileError(f"{where}: key {key!r}: {flag} takes a mapping, got {type(value).__name__}")
    if isinstance(value, (dict, list)) or (isinstance(value, bool) and kind is not None):
        raise ConfigFileError(f"{where}: key {key!r}: {flag} takes one {getattr(kind, '__name__', 'str')}, got "
                              f"{value!r}")
    if kind is int:
        if isinstance(value, float) or (isinstance(value, str) and not value.strip().lstrip("+-").isdigit()):
            raise ConfigFileError(f"{where}: key {key!r}: {flag} takes an integer, got {value!r}")
        out: Any = int(value)
    elif kind is float:
        try:
            out = float(value)
        except ValueError:
            raise ConfigFileError(f"{where}: key {key!r}: {flag} takes a number, got {value!r}") from None
    elif kind is None:
        if isinstance(value, bool):
            raise ConfigFileError(f"{where}: key {key!r}: {flag} takes a string, got {value!r}")
        out = str(value)
    else:
        out = kind(value)
    if action.choices is not None and out not in action.choices:
        raise ConfigFileError(f"{where}: key {key!r}: {flag} must be one of {', '.join(map(str, action.choices))}, "
                              f"got {out!r}")
    return out


def config_values(parser: argparse.ArgumentParser, path: str) -> dict[str, Any]:
    """The flag values of a YAML ``--config`` file for ``parser``, by destination.

    Keys are flag names without the dashes, with dashes or underscores (``top-k``, ``top_k``); each value is
    typed as the flag types its text (a list for a flag of several values, a mapping for a JSON flag). An unknown
    key, a key given twice (``top-k`` and ``top_k``) or a badly typed value raises :class:`ConfigFileError`."""
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ConfigFileError(f"--config {path}: no such file")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"{path}: not YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected a mapping of flag names to values, got {type(data).__name__}")
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in ("help", "config")}
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key)
        dest = key.lstrip("-").replace("-", "_")
        action = actions.get(dest)
        if action is None:
            names = [d.replace("_", "-") for d in actions]
            near = difflib.get_close_matches(key.lstrip("-").replace("_", "-"), names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigFileError(f"{path}: unknown key {key!r} (not a flag of {parser.prog}){hint}")
        if dest in values:
            raise ConfigFileError(f"{path}: key {key!r}: {action.option_strings[-1]} is given twice")
        values[dest] = _config_value(action, key, value, str(path))
    return values


def parse_run_args(argv: Sequence[str]) -> argparse.Namespace:
    """The run's flags: ``--config FILE.yaml`` first (when given), then the command line over it."""
    parser = run_parser()
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(list(argv))
    if known.config:
        values = config_values(parser, known.config)
        for action in parser._actions:
            if action.dest in values:
                action.required = False  # the file gives it
        parser.set_defaults(**values)
    return parser.parse_args(list(argv))


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent-tune eval report", description="Report one or several results files.",
                                formatter_class=HelpFormatter,
                                epilog=examples("agent-tune eval report base.jsonl grpo.jsonl --labels base grpo "
                                                "--png compare.png"))
    p.add_argument("results", nargs="+", help="results jsonl files")
    p.add_argument("--labels", nargs="+", default=None, help="chart labels, one per file")
    p.add_argument("--json", dest="json_out", default=None, help="write the report(s) as JSON")
    p.add_argument("--png", default=None, help="draw per-category accuracy (side by side for several files)")
    p.add_argument("--results-dir", default=None,
                   help="also write the env's official results files (first results file only)")
    p.add_argument("--results-options", type=json_object, default={}, help="as for a run")
    p.add_argument("--passk-json", default=None,
                   help="write pass@1 (first sample) / pass@k (any of k) of the first results file (as for a run)")
    p.add_argument("--mixed-ids", default=None, metavar="OUT.txt",
                   help="write the ids of the first results file's entries whose samples are neither all right nor "
                   "all wrong, one a line (the tasks that give GRPO signal: agent-tune data --ids-file OUT.txt)")
    p.add_argument("--stage-table", default=None, metavar="OUT.md",
                   help="write a Markdown table, one row per results file (labelled by --labels: the stages of a "
                   "chain), pass@1 and pass@k with their 95%% intervals, overall and per category")
    return p


def _stem(path: Path) -> Path:
    return path.with_suffix("") if path.suffix else path


def _write_outputs(summaries, records, meta, png, json_out, results_dir=None, results_options=None,
                   labels=None, passk_json=None) -> None:
    from agent_tune.eval.metrics import report_env
    from agent_tune.eval.report import format_table, plot_accuracy, write_first_and_any, write_json

    for s in summaries:
        print(f"\n== {s['source']} ==")
        print(format_table(s))
    if json_out:
        print(f"report: {write_json(summaries, json_out)}")
    if passk_json:
        print(f"pass@1 (first sample) / pass@k (any of k): {write_first_and_any(summaries[0], passk_json)}")
    if png:
        print(f"chart: {plot_accuracy(summaries, png, labels)}")
    cls = report_env((meta or {}).get("env"))
    if results_dir and records is not None and cls is not None:
        files = cls.report.write_results(records, str(results_dir), dict(meta or {}),
                                         **dict(results_options or {}))
        if files:
            print(f"results in {cls._registered_as or cls.__name__}'s own format: {', '.join(map(str, files))}")


def report_main(argv: Sequence[str]) -> int:
    from agent_tune.eval.report import report_file
    from agent_tune.eval.store import read_results

    args = report_parser().parse_args(list(argv))
    if args.labels and len(args.labels) != len(args.results):
        print("error: --labels needs one label per results file", file=sys.stderr)
        return 2
    try:
        summaries = [report_file(p) for p in args.results]
        meta, records = read_results(args.results[0])
        _write_outputs(summaries, records, meta, args.png, args.json_out, args.results_dir, args.results_options,
                       args.labels, args.passk_json)
        if args.mixed_ids:
            from agent_tune.eval.metrics import mixed_ids

            ids = mixed_ids(records)
            out = Path(args.mixed_ids)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(f"{tid}\n" for tid in ids))
            entries = len({r["test_id"] for r in records})
            print(f"mixed entries (neither all right nor all wrong): {len(ids)} of {entries} -> {out}")
        if args.stage_table:
            from agent_tune.eval.report import stage_table

            out = Path(args.stage_table)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(stage_table(summaries, args.labels or [Path(p).stem for p in args.results]))
            print(f"stage table: {out}")
    except (AgentTuneError, OSError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc, default=2)
    return 0


def _user_env_kwargs(args: argparse.Namespace, env_kwargs: dict) -> dict:
    """``--env-kwargs`` with the simulated ``user`` from the ``--user-*`` flags and the NL-assertion ``judge`` from
    the ``--judge-*`` flags, when given (for envs that take them: tau2; the env's start-up check says what it
    lacks)."""
    if args.user_base_url or args.user_model:
        if not (args.user_base_url and args.user_model):
            raise ValueError("the simulated user needs both --user-base-url and --user-model")
        if "user" in env_kwargs:
            raise ValueError("give the user either with --user-* flags or in --env-kwargs, not both")
        env_kwargs["user"] = {"kind": "llm", "base_url": args.user_base_url, "model": args.user_model,
                              "api_key_env": args.user_api_key_env, "temperature": args.user_temperature,
                              "max_tokens": args.user_max_tokens}
    if args.judge_base_url or args.judge_model:
        if not (args.judge_base_url and args.judge_model):
            raise ValueError("the judge needs both --judge-base-url and --judge-model")
        if "judge" in env_kwargs:
            raise ValueError("give the judge either with --judge-* flags or in --env-kwargs, not both")
        env_kwargs["judge"] = {"base_url": args.judge_base_url, "model": args.judge_model,
                               "api_key_env": args.judge_api_key_env, "temperature": args.judge_temperature}
    return env_kwargs


def run_main(argv: Sequence[str], tokenizer=None) -> int:
    from agent_tune.eval.evaluate import EvalSettings, evaluate
    from agent_tune.eval.metrics import summarize
    from agent_tune.eval.report import wall_time
    from agent_tune.eval.task_rows import catalogue_task_rows, load_task_rows

    try:
        args = parse_run_args(argv)
    except ConfigFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    try:
        env = args.env or "bfcl"
        task_rows = None
        if args.rows is not None:
            given = [f.replace("_", "-") for f in ("env", "split", "suite", "categories", "ids", "ids_file", "options")
                     if getattr(args, f)]
            if given:
                raise ValueError(f"--rows plays the file's rows; drop --{', --'.join(given)}")
            env = "rows"
            test_ids = list(load_task_rows(args.rows))[: args.limit]
        else:
            from agent_tune.envs.id_files import task_ids
            from agent_tune.envs.tasks import select_tasks

            ids = task_ids(args.ids, args.ids_file)
            tasks = select_tasks(env, args.split, args.options, args.categories, args.suite, ids, args.limit)
            task_rows = catalogue_task_rows(env, tasks)
            test_ids = list(task_rows)
        settings = EvalSettings(
            base_url=args.base_url, model=args.model, env=env, mode=args.mode, api=args.api, tokenizer=args.tokenizer,
            template=args.template, tool_parser=args.tool_parser, reasoning_parser=args.reasoning_parser,
            concurrency=args.concurrency, n=args.n, temperature=args.temperature, top_p=args.top_p,
            top_k=args.top_k,
            max_tokens=args.max_tokens, max_model_len=args.max_model_len, seed=args.seed, timeout=args.timeout,
            max_retries=args.retries, api_key=args.api_key, env_kwargs=_user_env_kwargs(args, dict(args.env_kwargs)),
            chat_template_kwargs=args.chat_template_kwargs, progress=not args.no_progress,
            sft_out=args.sft_out, sft_min_accuracy=args.sft_min_accuracy, sft_min_reward=args.sft_min_reward,
            rows=args.rows,
        )
        if args.n > 1 and args.temperature == 0:
            print("warning: --n > 1 with --temperature 0: samples will be (nearly) identical", file=sys.stderr)
        outcome = evaluate(settings, test_ids, args.output, tokenizer, task_rows)
    except (AgentTuneError, FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    wanted = {(t, k) for t in test_ids for k in range(args.n)}
    records = [r for r in outcome.records if (r["test_id"], int(r.get("sample", 0))) in wanted]
    print(f"ran {outcome.ran} episodes, {outcome.skipped} already in {args.output}, {len(outcome.failed)} failed")
    for test_id, sample, err in outcome.failed[:10]:
        print(f"  failed {test_id} sample {sample}: {err}", file=sys.stderr)
    if args.sft_out:
        kept = [f"{k} >= {v}" for k, v in (("accuracy", settings.sft_min_accuracy),
                                             ("reward", settings.sft_min_reward)) if v is not None]
        print(f"RFT: {outcome.sft_rows_written} SFT rows added to {args.sft_out} (kept: {' and '.join(kept)})")
        if outcome.skipped:
            print(f"  note: {outcome.skipped} episodes already in {args.output} were not played again; their rows "
                  "are in --sft-out only if the run that played them wrote it", file=sys.stderr)
    if not records:
        return 1 if outcome.failed else 0
    summary = summarize(records, wall_time(records), settings.env, settings.meta())
    summary["source"] = str(args.output)
    summary["settings"] = settings.meta()
    stem = _stem(Path(args.output))
    try:
        _write_outputs([summary], records, settings.meta(), args.png or f"{stem}.png",
                       args.report_json or f"{stem}.report.json", args.results_dir or f"{stem}_results",
                       args.results_options, passk_json=args.passk_json)
    except (AgentTuneError, OSError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    print(f"episodes, conversations and tokens: agent-tune view {args.output}")
    return 1 if outcome.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``agent-tune eval ...`` (``argv`` excludes ``eval``)."""
    from agent_tune.utils.logs import setup_logging

    setup_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    if argv and argv[0] in ("record", "tables", "curve"):
        from agent_tune.eval import results_cli

        return results_cli.main(argv[0], argv[1:])
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
