"""The ``agent-tune`` command line: ``envs``, ``data``, ``train``, ``sft``, ``sft-data``, ``curriculum``, ``eval``,
``plot``, ``view``."""

from __future__ import annotations

import argparse
import sys

from agent_tune import __version__


def _cmd_envs(_: argparse.Namespace) -> int:
    from agent_tune.envs import describe_envs

    rows = describe_envs()
    width = max(len(row.name) for row in rows)
    print(f"{'name':<{width}}  tasks  description")
    for row in rows:
        print(f"{row.name:<{width}}  {'yes' if row.catalogue else '-':<5}  {row.description}")
    print("tasks: the env has a task catalogue (agent-tune data --env NAME writes its rows; agent-tune eval --env "
          "NAME plays its tests)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agent-tune`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        # Hydra owns the rest of the command line; verl is imported only here.
        from agent_tune.launch.train import main as train_main

        return int(train_main(argv[1:]) or 0)
    if argv and argv[0] == "sft":
        from agent_tune.launch.sft import main as sft_main

        return int(sft_main(argv[1:]) or 0)
    if argv and argv[0] == "sft-data":
        from agent_tune.sft.convert import main as sft_data_main

        return int(sft_data_main(argv[1:]) or 0)
    if argv and argv[0] == "curriculum":
        from agent_tune.launch.curriculum import main as curriculum_main

        return int(curriculum_main(argv[1:]) or 0)
    if argv and argv[0] == "data":
        from agent_tune.data_cli import main as data_main

        return int(data_main(argv[1:]) or 0)
    if argv and argv[0] == "eval":
        from agent_tune.eval.cli import main as eval_main

        return int(eval_main(argv[1:]) or 0)
    if argv and argv[0] == "plot":
        from agent_tune.view.plot import main as plot_main

        return int(plot_main(argv[1:]) or 0)
    if argv and argv[0] == "view":
        from agent_tune.view.cli import main as view_main

        return int(view_main(argv[1:]) or 0)
    from agent_tune.utils.logs import setup_logging

    setup_logging()  # train and eval configure it themselves
    from agent_tune.utils.cli_args import HelpFormatter, examples

    parser = argparse.ArgumentParser(prog="agent-tune", description=__doc__, formatter_class=HelpFormatter,
                                     epilog=examples(
                                         "agent-tune envs",
                                         "agent-tune data --env bfcl --split train val --out data/bfcl",
                                         "agent-tune train --config-name agent_tune_bfcl_cpu "
                                         "data.train_files=data/bfcl/train.parquet "
                                         "data.val_files=data/bfcl/val.parquet --dry-run",
                                         "agent-tune view outputs/bfcl_cpu/checkpoints",
                                         "agent-tune COMMAND -h      (its options, their defaults, examples)"))
    parser.add_argument("--version", action="version", version=f"agent-tune {__version__}",
                        help="print the version (CHANGELOG.md says what changed) and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help="list registered environments").set_defaults(func=_cmd_envs)
    sub.add_parser("data", help="verl rows of any env with a task catalogue: agent-tune data --env NAME --split S "
                   "--out DIR (see agent-tune data -h)")
    sub.add_parser("train", help="GRPO training with verl: agent-tune train --config-name NAME key=value ...")
    sub.add_parser("sft", help="multi-turn SFT with verl's SFT trainer, rows tokenised like the RL rollouts: "
                   "agent-tune sft --config-name agent_tune_sft_cpu data.train_files=... key=value ...")
    sub.add_parser("sft-data", help="other projects' SFT data as agent-tune sft rows: agent-tune sft-data --format "
                   "rlla_sft|tau2_seed IN OUT.parquet (see agent-tune sft-data -h)")
    sub.add_parser("curriculum", help="a curriculum of training stages, each from the one before: "
                   "agent-tune curriculum --curriculum NAME --run-dir DIR (see agent-tune curriculum -h)")
    sub.add_parser("eval", help="evaluation on BFCL (multi-turn and single-turn) and tau2-bench tasks, any env's "
                   "catalogue (--env NAME) or rows, against an OpenAI-compatible server (see agent-tune eval -h)")
    sub.add_parser("plot", help="a run's per-step metrics as a PNG, first steps against last: agent-tune plot "
                   "RUN/checkpoints/metrics.jsonl --out F.png; --table: keys of verl's step log, a line a step "
                   "(see agent-tune plot -h)")
    sub.add_parser("view", help="a training run, curriculum, eval output or rollout dump as one HTML page: curves, "
                   "episodes down to the token, GRPO groups: agent-tune view PATH [--out F.html] [--serve] "
                   "(see agent-tune view -h)")
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
