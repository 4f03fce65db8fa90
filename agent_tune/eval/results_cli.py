"""``agent-tune eval record | tables | curve``: measured results as data (:mod:`agent_tune.eval.results_records`).

    agent-tune eval record REPORT.json --results docs/results/NAME.json --env E --stage S [--from F] \\
        --split test [--ood] --steps N --command "bash examples/..." [--categories] [--train-metrics METRICS.jsonl]
    agent-tune eval tables docs/results.md [--check]
    agent-tune eval curve docs/results/NAME.json --out docs/img/NAME.png [--env E] [--split S] [--title T]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from agent_tune.errors import AgentTuneError, exit_code


def record_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune eval record",
        description="Add one evaluated model's pass@1 / pass@4 (with 95% intervals) from an eval report to a "
        "results file (replacing the record of the same env, stage, split and category).",
        epilog="example: agent-tune eval record out/eval/grpo.report.json --results docs/results/calculator_rl.json "
        "--env calculator --stage GRPO --from base --split test --steps 32 --command 'bash examples/chain/...'")
    p.add_argument("report", help="the eval's --report-json file")
    p.add_argument("--results", required=True, help="the results file (created when missing)")
    p.add_argument("--env", required=True, help="the env's name, as the tables show it")
    p.add_argument("--stage", required=True, help="the model's stage, e.g. base, SFT, GRPO step 8")
    p.add_argument("--from", dest="from_", default=None, help="the stage it was trained from (default: none, a base)")
    p.add_argument("--split", required=True, help="the split evaluated, e.g. test, or a category not trained on")
    p.add_argument("--ood", action="store_true", help="the split was not trained on (out of distribution)")
    p.add_argument("--steps", type=int, required=True, help="training steps behind the model (0 for a base)")
    p.add_argument("--command", required=True, help="the command that reproduces the model and its eval")
    p.add_argument("--categories", action="store_true", help="also one record per category of the report")
    p.add_argument("--train-metrics", default=None, metavar="METRICS.jsonl",
                   help="the training run's metrics.jsonl: records the seconds of its first --steps steps (curves)")
    return p


def tables_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune eval tables",
        description="Rewrite every '<!-- results: NAME [split=S] [ood=true|false] [category=all|each] -->' ... "
        "'<!-- /results -->' block of a Markdown file with the table of results/NAME.json beside it.",
        epilog="example: agent-tune eval tables docs/results.md --check")
    p.add_argument("markdown", help="the Markdown file")
    p.add_argument("--results-dir", default=None, help="where NAME.json files are (default: results/ beside it)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale table")
    return p


def curve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune eval curve",
        description="Draw test pass@1 (95% interval) against training steps and training wall time.",
        epilog="example: agent-tune eval curve docs/results/calculator_rl.json --out docs/img/calculator_rl.png")
    p.add_argument("results", help="a results file")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--env", default=None, help="only this env's records")
    p.add_argument("--split", default=None, help="only this split's records")
    p.add_argument("--title", default=None, help="the chart's title")
    return p


def main(command: str, argv: Sequence[str]) -> int:
    """Run ``agent-tune eval COMMAND ARGV...`` for COMMAND in record, tables, curve."""
    from agent_tune.eval import results_records as rr

    parser = {"record": record_parser, "tables": tables_parser, "curve": curve_parser}[command]()
    args = parser.parse_args(list(argv))
    try:
        if command == "record":
            train_s = rr.training_seconds(args.train_metrics, args.steps) if args.train_metrics else None
            report = json.loads(Path(args.report).read_text(encoding="utf-8"))
            new = rr.records_from_report(report, env=args.env, stage=args.stage, from_=args.from_, split=args.split,
                                         ood=args.ood, steps=args.steps, command=args.command,
                                         categories=args.categories, train_s=train_s)
            path = Path(args.results)
            old = rr.read_records(path) if path.exists() else []
            rr.write_records(path, rr.upsert(old, new))
            print(f"{path}: {len(new)} record(s) of {args.env} {args.stage} on {args.split}")
        elif command == "tables":
            stale = rr.update_tables(args.markdown, args.results_dir, check=args.check)
            if args.check and stale:
                print(f"{args.markdown}: stale tables (run agent-tune eval tables {args.markdown}): "
                      + "; ".join(stale), file=sys.stderr)
                return 1
            print(f"{args.markdown}: {len(stale)} table(s) {'stale' if args.check else 'rewritten'}")
        else:
            records = [r for r in rr.read_records(args.results)
                       if (args.env is None or r.env == args.env) and (args.split is None or r.split == args.split)]
            if not records:
                print(f"error: {args.results}: no record matches", file=sys.stderr)
                return 2
            print(f"curve: {rr.plot_curve(records, args.out, args.title)}")
    except (AgentTuneError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc, default=2)
    return 0
