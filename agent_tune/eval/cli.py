"""``agent-tune eval``: BFCL evaluation (multi-turn or single-turn) or tau2-bench against an OpenAI-compatible
server.

    agent-tune eval --base-url http://127.0.0.1:8000/v1 --model NAME --split test [options]
    agent-tune eval --base-url ... --model NAME --env tau2 --domains airline,retail,telecom --split test --n 4 \
        --user-base-url http://127.0.0.1:8001/v1 --user-model USER [options]
    agent-tune eval --base-url ... --model NAME --suite single_turn_python [--split test] [options]
    agent-tune eval --base-url ... --model NAME --env toolcall --categories simple_python multiple [options]
    agent-tune eval --base-url ... --model NAME --rows data/train.parquet --n 4 --sft-out rft.jsonl  (any env)
    agent-tune eval --base-url ... --model NAME --env examples.envs.calculator:CalculatorEnv --split test  (a catalogue)
    agent-tune eval report a.jsonl [b.jsonl ...] [--json out.json] [--png out.png] [--bfcl-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from agent_tune.cli_args import json_object
from agent_tune.envs.bfcl.single_turn_splits import SINGLE_TURN_SPLITS
from agent_tune.envs.bfcl.splits import SPLITS
from agent_tune.eval.bfcl_format import DEFAULT_REGISTRY_NAME, FORMATS, write_bfcl_results
from agent_tune.eval.targets import ENVS, SUITES

TAU2_SPLITS = ("train", "test", "base")


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune eval",
        description="Evaluate a served model with the training episode runner: BFCL v4 (multi-turn: the bfcl env; "
        "single-turn: the toolcall env; leaderboard rules), tau2-bench, the rows of a training file (any env), or "
        "any env's task catalogue (--env NAME --split S). `agent-tune eval report FILE...` re-prints/plots results.",
    )
    srv = p.add_argument_group("server")
    srv.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    srv.add_argument("--model", required=True, help="served model name (as /v1/models lists it)")
    srv.add_argument("--api-key", default=None, help="bearer token, if the server wants one")
    srv.add_argument("--mode", choices=("tokens", "chat"), default="tokens",
                     help="tokens: token ids to /completions, exactly as training (default); "
                     "chat: /chat/completions with tools= (not token-exact)")
    srv.add_argument("--concurrency", type=int, default=16, help="episodes in flight at once")
    srv.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    srv.add_argument("--retries", type=int, default=5, help="retries per request on 5xx/429/connection errors")
    sel = p.add_argument_group("entries")
    sel.add_argument("--env", default=None,
                     help="bfcl (multi-turn), toolcall (single-turn), tau2 (tau2-bench), or any env with a task "
                     "catalogue (a registered name or module:Class path: its --split tasks); default: what the "
                     "entries asked for need")
    sel.add_argument("--split", default=None,
                     help=f"bfcl: {', '.join(SPLITS)} (data_preprocess/bfcl.py's; same seed = same entries as "
                     f"training's); toolcall: {', '.join(SINGLE_TURN_SPLITS)}; tau2: tau2's own task split "
                     f"({', '.join(TAU2_SPLITS)}: every task; default test); a catalogue env: one of its splits "
                     "(default test)")
    sel.add_argument("--options", type=json_object, default={},
                     help="a catalogue env: the options of its tasks() as JSON (e.g. '{\"seed\": 1}')")
    sel.add_argument("--domains", default=None,
                     help="tau2: comma-separated domains (default airline,retail,telecom); implies --env tau2")
    sel.add_argument("--split-seed", type=int, default=42)
    sel.add_argument("--suite", choices=tuple(SUITES), default=None,
                     help="a named set of categories: "
                     + "; ".join(f"{k}: {' '.join(v[1])}" for k, v in SUITES.items()))
    sel.add_argument("--categories", nargs="+", default=None,
                     help="multi-turn: base miss_func miss_param long_context composite (or full names); "
                     "single-turn: simple_python multiple parallel ... live_relevance")
    sel.add_argument("--ids", nargs="+", default=None,
                     help="explicit test ids, e.g. multi_turn_base_12 or simple_python_3")
    sel.add_argument("--limit", type=int, default=None, help="first N entries per category (--rows: first N rows)")
    sel.add_argument("--rows", default=None,
                     help="play the rows of a training data file (.parquet/.jsonl of data_preprocess/*.py) instead "
                     "of BFCL entries: any env, each row's extra_info.env (e.g. for rejection sampling)")
    mdl = p.add_argument_group("model format")
    mdl.add_argument("--tokenizer", default=None, help="local HF tokenizer folder (default: --model if it is a folder)")
    mdl.add_argument("--template", default="tokenizer",
                     help="chat template name or .jinja path (default: the tokenizer's)")
    mdl.add_argument("--tool-parser", default="hermes")
    mdl.add_argument("--reasoning-parser", default="none")
    mdl.add_argument("--chat-template-kwargs", type=json_object, default={},
                     help='JSON, e.g. \'{"enable_thinking": false}\'')
    mdl.add_argument("--env-kwargs", type=json_object, default={},
                     help="extra env kwargs as JSON (e.g. system_prompt)")
    usr = p.add_argument_group("tau2's simulated user (an OpenAI-compatible server, checked at start-up)")
    usr.add_argument("--user-base-url", default=None, help="e.g. http://127.0.0.1:8001/v1")
    usr.add_argument("--user-model", default=None, help="served model name of the user simulator")
    usr.add_argument("--user-api-key-env", default=None, help="environment variable holding the user server's key")
    usr.add_argument("--user-temperature", type=float, default=0.0, help="tau2's default: 0.0")
    usr.add_argument("--user-max-tokens", type=int, default=1024)
    jdg = p.add_argument_group("tau2's NL-assertion judge (optional; only tasks whose reward counts NL assertions "
                               "ask it; checked at start-up)")
    jdg.add_argument("--judge-base-url", default=None, help="e.g. http://127.0.0.1:8002/v1")
    jdg.add_argument("--judge-model", default=None, help="served model name of the judge")
    jdg.add_argument("--judge-api-key-env", default=None, help="environment variable holding the judge's key")
    jdg.add_argument("--judge-temperature", type=float, default=0.0, help="tau2's default: 0.0")
    smp = p.add_argument_group("sampling")
    smp.add_argument("--n", type=int, default=1, help="samples per entry (pass@k for k <= n)")
    smp.add_argument("--temperature", type=float, default=0.0)
    smp.add_argument("--top-p", type=float, default=1.0)
    smp.add_argument("--seed", type=int, default=None, help="per-request seed (sample i uses seed+i)")
    smp.add_argument("--max-tokens", type=int, default=2048, help="max new tokens per generation")
    smp.add_argument("--max-model-len", type=int, default=None,
                     help="context length (default: what the server reports)")
    out = p.add_argument_group("output")
    out.add_argument("--output", default="bfcl_eval.jsonl", help="results jsonl (appended; rerun resumes)")
    out.add_argument("--report-json", default=None, help="report JSON (default: OUTPUT stem + .report.json)")
    out.add_argument("--png", default=None, help="accuracy chart (default: OUTPUT stem + .png)")
    out.add_argument("--bfcl-dir", default=None,
                     help="BFCL result files for `bfcl evaluate` (default: OUTPUT stem + _bfcl)")
    out.add_argument("--bfcl-model", default=DEFAULT_REGISTRY_NAME,
                     help="bfcl-eval registry name the files are filed under")
    out.add_argument("--bfcl-format", choices=FORMATS, default="canonical")
    out.add_argument("--tau2-dir", default=None,
                     help="tau2: results in tau2's format, one <domain>.json each (default: OUTPUT stem + _tau2)")
    out.add_argument("--no-progress", action="store_true")
    rft = p.add_argument_group("rejection sampling (RFT)")
    rft.add_argument("--sft-out", default=None,
                     help="also write every successful episode as an SFT row with its exact tokens (jsonl, "
                     "appended; rerun resumes) for `agent-tune sft`; needs --mode tokens")
    rft.add_argument("--sft-min-accuracy", type=float, default=None,
                     help="keep episodes with accuracy >= this (default 1 when no threshold is given)")
    rft.add_argument("--sft-min-reward", type=float, default=None, help="keep episodes with reward >= this")
    return p


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent-tune eval report", description="Report one or several results files.")
    p.add_argument("results", nargs="+", help="results jsonl files")
    p.add_argument("--labels", nargs="+", default=None, help="chart labels, one per file")
    p.add_argument("--json", dest="json_out", default=None, help="write the report(s) as JSON")
    p.add_argument("--png", default=None, help="draw per-category accuracy (side by side for several files)")
    p.add_argument("--bfcl-dir", default=None, help="also write BFCL result files (first results file only)")
    p.add_argument("--bfcl-model", default=DEFAULT_REGISTRY_NAME)
    p.add_argument("--bfcl-format", choices=FORMATS, default="canonical")
    p.add_argument("--tau2-dir", default=None, help="tau2 results files: also write tau2's format (first file only)")
    return p


def _stem(path: Path) -> Path:
    return path.with_suffix("") if path.suffix else path


def _is_tau2(meta) -> bool:
    return (meta or {}).get("env") == "tau2"


def _add_tau2_metrics(summary: dict, records, meta) -> None:
    """tau2's own metrics (average reward, pass^k per domain) on a tau2 results file's records."""
    from agent_tune.eval.tau2_results import tau2_metrics

    if _is_tau2(meta):
        summary["tau2"] = tau2_metrics(records, meta)


def _write_outputs(summaries, records, meta, png, json_out, bfcl_dir, bfcl_model, bfcl_format, labels=None,
                   tau2_dir=None) -> None:
    from agent_tune.eval.report import format_table, plot_accuracy, write_json
    from agent_tune.eval.tau2_results import format_tau2_metrics, write_tau2_results
    from agent_tune.parsing import get_reasoning_parser

    for s in summaries:
        print(f"\n== {s['source']} ==")
        print(format_table(s))
        if s.get("tau2"):
            print(format_tau2_metrics(s["tau2"]))
    if json_out:
        print(f"report: {write_json(summaries, json_out)}")
    if png:
        print(f"chart: {plot_accuracy(summaries, png, labels)}")
    if _is_tau2(meta):
        if tau2_dir and records is not None:
            files = write_tau2_results(records, tau2_dir, meta)
            print(f"tau2 results files (tau2's format: `python -m tau2.scripts.evaluate_trajectories FILE` re-scores "
                  f"them): {', '.join(map(str, files))}")
        return
    if bfcl_dir and records is not None:
        rp = get_reasoning_parser((meta or {}).get("reasoning_parser") or "none")
        files = write_bfcl_results(records, bfcl_dir, bfcl_model, bfcl_format, rp)
        print(f"BFCL result files ({bfcl_format}, for `bfcl evaluate --model {bfcl_model} --result-dir {bfcl_dir}"
              f" --partial-eval` on subsets): {', '.join(map(str, files))}")


def report_main(argv: Sequence[str]) -> int:
    from agent_tune.eval.report import report_file
    from agent_tune.eval.store import read_results

    args = report_parser().parse_args(list(argv))
    if args.labels and len(args.labels) != len(args.results):
        print("error: --labels needs one label per results file", file=sys.stderr)
        return 2
    try:
        summaries = [report_file(p) for p in args.results]
        for summary, path in zip(summaries, args.results):
            _add_tau2_metrics(summary, read_results(path)[1], summary.get("settings"))
        meta, records = read_results(args.results[0])
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _write_outputs(summaries, records, meta, args.png, args.json_out, args.bfcl_dir, args.bfcl_model,
                   args.bfcl_format, args.labels, args.tau2_dir)
    return 0


def _tau2_env_kwargs(args: argparse.Namespace, env_kwargs: dict) -> dict:
    """``--env-kwargs`` with the simulated user from the ``--user-*`` flags (a ``user`` in ``--env-kwargs``
    is used as given; tau2 needs one) and the NL-assertion judge from the ``--judge-*`` flags (optional)."""
    if args.user_base_url or args.user_model:
        if not (args.user_base_url and args.user_model):
            raise ValueError("tau2's user needs both --user-base-url and --user-model")
        if "user" in env_kwargs:
            raise ValueError("give the user either with --user-* flags or in --env-kwargs, not both")
        env_kwargs["user"] = {"kind": "llm", "base_url": args.user_base_url, "model": args.user_model,
                              "api_key_env": args.user_api_key_env, "temperature": args.user_temperature,
                              "max_tokens": args.user_max_tokens}
    if args.judge_base_url or args.judge_model:
        if not (args.judge_base_url and args.judge_model):
            raise ValueError("tau2's judge needs both --judge-base-url and --judge-model")
        if "judge" in env_kwargs:
            raise ValueError("give the judge either with --judge-* flags or in --env-kwargs, not both")
        env_kwargs["judge"] = {"base_url": args.judge_base_url, "model": args.judge_model,
                               "api_key_env": args.judge_api_key_env, "temperature": args.judge_temperature}
    if "user" not in env_kwargs:
        raise ValueError("tau2 needs a simulated user: --user-base-url URL --user-model NAME "
                         "(an OpenAI-compatible server), or a `user` in --env-kwargs")
    return env_kwargs


def run_main(argv: Sequence[str], tokenizer=None) -> int:
    from agent_tune.eval.client import ServerError
    from agent_tune.eval.evaluate import EvalAbortedError, EvalSettings, evaluate
    from agent_tune.eval.metrics import summarize
    from agent_tune.eval.report import wall_time
    from agent_tune.eval.selection import infer_env, select_test_ids
    from agent_tune.eval.store import ResultsFileError
    from agent_tune.eval.task_rows import catalogue_task_rows, load_task_rows
    from agent_tune.eval.tau2_results import select_tau2_ids

    args = run_parser().parse_args(list(argv))
    try:
        if args.rows is not None:
            given = [f for f in ("env", "split", "suite", "categories", "ids", "domains")
                     if getattr(args, f) is not None]
            if given:
                raise ValueError(f"--rows plays the file's rows; drop --{', --'.join(given)}")
            env = "rows"
        elif args.env is not None and args.env not in ENVS:  # any env with a task catalogue
            given = [f for f in ("suite", "categories", "ids", "domains") if getattr(args, f) is not None]
            if given:
                raise ValueError(f"--env {args.env} plays its catalogue's --split; drop --{', --'.join(given)}")
            env = args.env
        else:
            env = infer_env(args.env or ("tau2" if args.domains else None), args.categories, args.ids, args.suite)
        env_kwargs_arg = dict(args.env_kwargs)
        if env == "tau2":
            env_kwargs_arg = _tau2_env_kwargs(args, env_kwargs_arg)
        elif args.domains:
            raise ValueError(f"--domains is for --env tau2, not {env}")
        settings = EvalSettings(
            base_url=args.base_url, model=args.model, env=env, mode=args.mode, tokenizer=args.tokenizer,
            template=args.template, tool_parser=args.tool_parser, reasoning_parser=args.reasoning_parser,
            concurrency=args.concurrency, n=args.n, temperature=args.temperature, top_p=args.top_p,
            max_tokens=args.max_tokens, max_model_len=args.max_model_len, seed=args.seed, timeout=args.timeout,
            max_retries=args.retries, api_key=args.api_key, env_kwargs=env_kwargs_arg,
            chat_template_kwargs=args.chat_template_kwargs, progress=not args.no_progress,
            sft_out=args.sft_out, sft_min_accuracy=args.sft_min_accuracy, sft_min_reward=args.sft_min_reward,
            rows=args.rows,
        )
        task_rows = None
        if args.options and env in (*ENVS, "rows"):
            raise ValueError("--options are the options of a catalogue env's tasks(); --env bfcl / toolcall / tau2 "
                             "and --rows take none")
        if args.rows is not None:
            test_ids = list(load_task_rows(args.rows))[: args.limit]
        elif env not in ENVS:
            task_rows = catalogue_task_rows(env, args.split or "test", args.options, args.limit)
            test_ids = list(task_rows)
        elif env == "tau2":
            if args.categories or args.suite:
                raise ValueError("tau2 entries are chosen with --domains, --split, --ids and --limit")
            domains = [d for d in (args.domains or "").split(",") if d] or None
            test_ids = select_tau2_ids(domains, args.split or "test", args.ids, args.limit)
        else:
            test_ids = select_test_ids(args.split, args.categories, args.ids, args.split_seed, args.limit, env,
                                       args.suite)
        if args.n > 1 and args.temperature == 0:
            print("warning: --n > 1 with --temperature 0: samples will be (nearly) identical", file=sys.stderr)
        outcome = evaluate(settings, test_ids, args.output, tokenizer, task_rows)
    except (ServerError, EvalAbortedError, ResultsFileError, FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
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
    summary = summarize(records, wall_time(records))
    summary["source"] = str(args.output)
    summary["settings"] = settings.meta()
    _add_tau2_metrics(summary, records, settings.meta())
    stem = _stem(Path(args.output))
    bfcl_dir = args.bfcl_dir or f"{stem}_bfcl" if env in ("bfcl", "toolcall") else None  # only BFCL entries
    _write_outputs([summary], records, settings.meta(), args.png or f"{stem}.png",
                   args.report_json or f"{stem}.report.json", bfcl_dir, args.bfcl_model, args.bfcl_format,
                   tau2_dir=args.tau2_dir or f"{stem}_tau2")
    return 1 if outcome.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``agent-tune eval ...`` (``argv`` excludes ``eval``)."""
    from agent_tune.logs import setup_logging

    setup_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
