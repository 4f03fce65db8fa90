"""Write verl rows for tau2-bench's task splits (parquet + jsonl): the ``tau2`` env's catalogue as rows.

tau2 ships its own splits per domain (``split_tasks.json``): airline train 30 / test 20, retail 74 / 40,
telecom 74 / 40 (mock has none). For each split this writes ``<out>/<split>.parquet`` with the rows of every
chosen domain (:mod:`agent_tune.envs.tau2.catalogue`): ``data_source`` is ``tau2/<domain>``, so metrics come
out per domain; the user simulator and the limits come from the config (``config/env/tau2.yaml``). ``prompt``
holds what every episode of the task starts with (tau2's agent system prompt with the domain policy, and the
agent's greeting; with ``--protocol pipeline``, the pipeline protocol's system prompt); the env builds the real
first observation, which adds the simulated user's first message. The protocol the episodes are played in is
the config's (``agent_tune.env_kwargs.tau2.protocol``): build the rows with the same one, so that their prompt
is the one the episodes start with. This script is ``agent-tune data --env tau2 --split ... --categories
DOMAIN ...`` plus ``splits.json``.

    python data_preprocess/tau2.py --out data/tau2 [--domains airline,retail,telecom] [--splits train,test]
        [--protocol native|pipeline]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file, this folder is sys.path[0]: this tau2.py would shadow tau2's package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from agent_tune.envs.tasks import catalogue_rows, select_tasks  # noqa: E402
from agent_tune.utils.rows import write_rows  # noqa: E402

DEFAULT_DOMAINS = ("airline", "retail", "telecom")
DEFAULT_SPLITS = ("train", "test")


def write_splits(out: Path, domains: list[str], splits: list[str], protocol: str = "native",
                 ) -> dict[str, dict[str, int]]:
    """Write every split; returns the row counts per split and domain (also in ``<out>/splits.json``)."""
    counts: dict[str, dict[str, int]] = {}
    for split in splits:
        tasks = select_tasks("tau2", split, categories=domains)
        missing = [d for d in domains if not any(t.category == d for t in tasks)]
        if missing:
            raise ValueError(f"tau2 domain {missing[0]!r} has no split {split!r}")
        write_rows(out, split, catalogue_rows("tau2", split, env_kwargs={"protocol": protocol}, tasks=tasks))
        counts[split] = {d: sum(t.category == d for t in tasks) for d in domains}
    (out / "splits.json").write_text(json.dumps({"domains": domains, "counts": counts}, indent=1))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--domains", default=",".join(DEFAULT_DOMAINS), help="comma-separated tau2 domains")
    parser.add_argument("--splits", default=",".join(DEFAULT_SPLITS), help="comma-separated tau2 split names")
    parser.add_argument("--protocol", choices=("native", "pipeline"), default="native",
                        help="the tau2 env's protocol the rows' prompt is written for (the config's)")
    args = parser.parse_args(argv)
    domains = [d for d in args.domains.split(",") if d]
    splits = [s for s in args.splits.split(",") if s]
    print(json.dumps(write_splits(args.out, domains, splits, args.protocol)), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
