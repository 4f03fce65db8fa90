"""Write verl rows for tau2-bench's task splits (parquet + jsonl), one row per task.

tau2 ships its own splits per domain (``split_tasks.json``): airline train 30 / test 20, retail 74 / 40,
telecom 74 / 40 (mock has none). For each split this writes ``<out>/<split>.parquet`` with the rows of every
chosen domain. Each row names the loop (``agent_name``), ``data_source`` (``tau2/<domain>``, so metrics come
out per domain), and ``extra_info.env = {name: tau2, kwargs: {domain, task_id}}`` from which the agent loop
builds the environment; the user simulator and the limits come from the config (``config/env/tau2.yaml``).

``prompt`` holds what every episode of the task starts with (tau2's agent system prompt with the domain
policy, and the agent's greeting); the env builds the real first observation, which adds the simulated
user's first message. ``reward_model.ground_truth`` is the task's evaluation criteria (JSON, for reading:
the env scores with tau2's evaluator).

    python data_preprocess/tau2.py --out data/tau2 [--domains airline,retail,telecom] [--splits train,test]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file, this folder is sys.path[0]: this tau2.py would shadow tau2's package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from agent_tune.rows import write_rows  # noqa: E402

AGENT_NAME = "agent_tune"
DEFAULT_DOMAINS = ("airline", "retail", "telecom")
DEFAULT_SPLITS = ("train", "test")


def first_messages(domain: str) -> list[dict[str, Any]]:
    """tau2's agent system prompt for ``domain`` and the agent's greeting (the start of every episode)."""
    from tau2.agent.llm_agent import LLMAgent
    from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE

    from agent_tune.envs.tau2 import loader

    env = loader.new_environment(domain)
    system = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy()).system_prompt
    return [{"role": "system", "content": system},
            {"role": "assistant", "content": DEFAULT_FIRST_AGENT_MESSAGE.content}]


def make_row(domain: str, task_id: str, index: int, split: str, prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """One verl row for task ``task_id`` of ``domain``."""
    from agent_tune.envs.tau2 import loader

    task = loader.load_task(domain, task_id)
    criteria = task.evaluation_criteria.model_dump(mode="json") if task.evaluation_criteria else None
    return {
        "data_source": f"tau2/{domain}",
        "agent_name": AGENT_NAME,
        "prompt": prompt,
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(criteria)},
        "extra_info": {
            "index": index,
            "split": split,
            "domain": domain,
            "task_id": task.id,
            "env": {"name": "tau2", "kwargs": {"domain": domain, "task_id": task.id}},
        },
    }


def split_rows(domains: list[str], split: str) -> list[dict[str, Any]]:
    """The rows of ``split`` for every domain (in tau2's order within a domain; indices count across)."""
    from agent_tune.envs.tau2 import loader

    rows: list[dict[str, Any]] = []
    for domain in domains:
        splits = loader.task_splits(domain)
        if split not in splits:
            raise ValueError(f"tau2 domain {domain!r} has no split {split!r} (it has: {', '.join(splits) or 'none'})")
        prompt = first_messages(domain)
        rows.extend(make_row(domain, task_id, len(rows) + k, split, prompt)
                    for k, task_id in enumerate(splits[split]))
    return rows


def write_splits(out: Path, domains: list[str], splits: list[str]) -> dict[str, dict[str, int]]:
    """Write every split; returns the row counts per split and domain (also in ``<out>/splits.json``)."""
    counts: dict[str, dict[str, int]] = {}
    for split in splits:
        rows = split_rows(domains, split)
        write_rows(out, split, rows)
        counts[split] = {d: sum(r["extra_info"]["domain"] == d for r in rows) for d in domains}
    (out / "splits.json").write_text(json.dumps({"domains": domains, "counts": counts}, indent=1))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--domains", default=",".join(DEFAULT_DOMAINS), help="comma-separated tau2 domains")
    parser.add_argument("--splits", default=",".join(DEFAULT_SPLITS), help="comma-separated tau2 split names")
    args = parser.parse_args(argv)
    domains = [d for d in args.domains.split(",") if d]
    splits = [s for s in args.splits.split(",") if s]
    print(json.dumps(write_splits(args.out, domains, splits)), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
