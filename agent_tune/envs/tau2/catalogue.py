"""The ``tau2`` env's task catalogue: tau2-bench's tasks, per domain, in tau2's own splits.

tau2 ships its splits per domain (``split_tasks.json``): airline train 30 / test 20, retail 74 / 40, telecom
74 / 40; ``base`` is every task of a domain that has splits (mock has none); ``all`` is every task of every
domain, mock included. A split holds the tasks of every domain that has it. A task's id is
``tau2/<domain>/<task_id>``, its category the domain (``--categories airline retail`` picks domains), its reset
kwargs ``{"domain", "task_id"}``; its ``reference`` is tau2's evaluation criteria (JSON, for a reader: the env
scores with tau2's evaluator).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping

from agent_tune.envs.catalogue import Task
from agent_tune.envs.tau2 import loader

SPLITS = ("train", "test", "base", "all")
DEFAULT_DOMAINS: tuple[str, ...] = ("airline", "retail", "telecom")


def tau2_task_id(domain: str, task_id: str) -> str:
    return f"tau2/{domain}/{task_id}"


def tau2_tasks(split: str) -> list[Task]:
    """The tasks of ``split`` over every domain that has it, in tau2's order within a domain."""
    tasks = []
    for domain in loader.DOMAINS:
        if split == "all":
            ids = loader.task_ids(domain)
        else:
            splits = loader.task_splits(domain)
            if split not in splits:
                continue
            ids = splits[split]
        for task_id in ids:
            task = loader.load_task(domain, task_id)
            criteria = task.evaluation_criteria.model_dump(mode="json") if task.evaluation_criteria else None
            tasks.append(Task(tau2_task_id(domain, task.id), {"domain": domain, "task_id": task.id}, domain, {},
                              json.dumps(criteria)))
    if not tasks:
        raise ValueError(f"no tau2 domain has a split {split!r}")
    return tasks


@lru_cache(maxsize=None)
def _first_messages(domain: str) -> str:
    from tau2.agent.llm_agent import LLMAgent
    from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE

    env = loader.new_environment(domain)
    system = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy()).system_prompt
    return json.dumps([{"role": "system", "content": system},
                       {"role": "assistant", "content": DEFAULT_FIRST_AGENT_MESSAGE.content}])


def row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A training row's prompt: :func:`first_messages` of the task's domain, or :func:`pipeline_first_messages`
    with ``protocol="pipeline"`` (the first observation adds the simulated user's first message, which a row
    cannot hold without asking the user)."""
    if env_kwargs.get("protocol") == "pipeline":
        return pipeline_first_messages(task.kwargs["domain"], env_kwargs.get("prompt_template"))
    return first_messages(task.kwargs["domain"])


@lru_cache(maxsize=None)
def _pipeline_prompt(domain: str, template_path: str | None = None) -> str:
    from agent_tune.envs.tau2 import pipeline
    from agent_tune.envs.tau2.messages import tool_schemas

    env = loader.new_environment(domain)
    return pipeline.system_prompt(domain, env.get_policy(), [*tool_schemas(env.get_tools()),
                                                             pipeline.done_tool_schema()],
                                  pipeline.load_template(template_path))


def pipeline_first_messages(domain: str, template_path: str | None = None) -> list[dict[str, Any]]:
    """The pipeline protocol's start for ``domain``: its system prompt alone (the agent's greeting is not shown
    to a pipeline agent: its first observation is the user's first message); ``template_path``: the env's
    ``prompt_template`` option."""
    return [{"role": "system", "content": _pipeline_prompt(domain, template_path)}]


def first_messages(domain: str) -> list[dict[str, Any]]:
    """tau2's agent system prompt for ``domain`` and the agent's greeting: what every episode of the domain
    starts with before the simulated user's first message (a training row's ``prompt``)."""
    return json.loads(_first_messages(domain))
