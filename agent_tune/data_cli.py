"""``agent-tune data``: verl rows of any env that declares a task catalogue.

    agent-tune data --env NAME --split train [test ...] --out DIR [--options JSON] [--env-kwargs JSON]
                    [--categories C ... | --suite NAME | --ids ID ... | --ids-file FILE] [--limit N]

``NAME`` is a registered env or a ``module:Class`` path (a plug-in env in one file). Writes ``DIR/<split>.parquet``
(what verl reads, ``data.train_files``) and ``DIR/<split>.jsonl`` (to read) per split; ``--options`` are the
catalogue's own (``agent-tune envs`` lists the envs; an env's ``tasks()`` docstring its options). ``--ids`` /
``--ids-file`` keep the tasks of one split with those ids, in their order: a file of plain ids or JSONL rows
(:mod:`agent_tune.envs.id_files`: the ``bfcl_*.jsonl`` T3RL's preprocessing writes among them); an id the split does
not hold stops the command, naming it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from agent_tune.errors import AgentTuneError, exit_code
from agent_tune.utils.cli_args import HelpFormatter, examples, json_object


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-tune data", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
        epilog=examples("agent-tune data --env bfcl --split train val --out data/bfcl",
                        "agent-tune data --env examples.envs.calculator:CalculatorEnv --split train test "
                        "--out data/calc --options '{\"size\": 256}'",
                        "agent-tune envs      (the envs; 'tasks yes': the ones this command takes)"))
    p.add_argument("--env", required=True, help="a registered env name or a module:Class path")
    p.add_argument("--split", nargs="+", required=True, help="one or more of the env's splits")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--options", type=json_object, default={},
                   help="the catalogue's options as JSON, e.g. '{\"seed\": 1}'")
    p.add_argument("--env-kwargs", type=json_object, default={},
                   help="env constructor kwargs used to render each row's prompt (JSON)")
    p.add_argument("--categories", nargs="+", default=None,
                   help="keep these categories (full names, or the end of one: BFCL's base, tau2's airline)")
    p.add_argument("--suite", default=None, help="keep a named set of the env's categories")
    p.add_argument("--ids", nargs="+", default=None, help="keep the tasks with these ids (one --split)")
    p.add_argument("--ids-file", default=None,
                   help="keep the tasks whose ids a file lists (one --split): plain lines of ids, or JSONL rows "
                   "(their id, extra_info.id, or T3RL's metadata.bfcl_task.id)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks of each category")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``agent-tune data ...`` (``argv`` excludes ``data``)."""
    from agent_tune.envs.id_files import task_ids
    from agent_tune.envs.tasks import catalogue_rows, select_tasks
    from agent_tune.utils.rows import write_rows

    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    counts = {}
    try:
        ids = task_ids(args.ids, args.ids_file)
        if ids and len(args.split) > 1:
            raise ValueError("--ids / --ids-file pick the tasks of one split: give one --split")
        for split in args.split:
            tasks = select_tasks(args.env, split, args.options, args.categories, args.suite, ids, args.limit)
            rows = catalogue_rows(args.env, split, args.options, args.env_kwargs, tasks)
            write_rows(args.out, split, rows)
            counts[split] = len(rows)
    except (AgentTuneError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc, default=2)
    print(f"{args.env}: " + ", ".join(f"{n} {split} rows" for split, n in counts.items()) + f" in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
