"""From an env's task catalogue to verl rows and back: the one place a row's task is written and read.

An env class may declare a catalogue (``BaseToolEnv.catalogue``, a
:class:`~agent_tune.envs.catalogue.TaskCatalogue`). A row written from it (:func:`catalogue_rows`,
``agent-tune data``) names its env and carries the task apart from the row's own bookkeeping::

    extra_info = {"index": i, "split": "train", "id": task.id, "category": task.category,
                  "env": {"name": NAME, "kwargs": json(task.env_kwargs) or None}, "task": json(task.kwargs)}

so ``reset`` receives exactly ``task.kwargs`` (:func:`row_task`) and the env its own kwargs (:func:`row_env`).
Both are JSON text: verl reads the rows of several files as one table, and a parquet column holding mappings of
different shapes (one env's tasks beside another's, a BFCL row with ``shots`` beside one without) gets every key
of every row, padded with nulls, which would reach ``reset`` and the constructor. Rows written before catalogues
kept the task's fields flat in ``extra_info`` next to the bookkeeping; :func:`row_task` hands those over without
the bookkeeping keys (:data:`ROW_KEYS`), and a reset that does not know a field names it (write the rows again
with ``agent-tune data``).

:func:`select_tasks` is the one rule that picks tasks from a catalogue, for ``agent-tune data`` and
``agent-tune eval`` alike: a split, then categories (a name is a category, or one without the prefix all the
split's categories share: ``base`` is BFCL's ``multi_turn_base``), a suite (the env's named categories), ids, and
the first ``limit`` tasks of each category.

A catalogue that reads another framework's dataset files (skyrl, verifiers, agent_r1, verl_tools, nemo_gym) makes
each row's fields its task's reset kwargs (:func:`dataset_row_kwargs`); ``task`` is one JSON text whatever the
rows' shapes, so rows of differently shaped ``extra_info`` / ``reward_spec`` / ``info`` share one file.
:func:`task_fields` is what such an env's ``reset`` reads them with; it still reads the form before (a task of
one key, ``row``: the row as JSON text), deprecated, for one release.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from typing import Any, Mapping, Sequence

from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.registry import get_env_class

AGENT_NAME = "agent_tune"  # the verl agent loop that plays the rows (verl_ext.agent_loop)


# A row's own bookkeeping in ``extra_info``, never a task field.
ROW_KEYS = ("index", "split", "id", "category", "env", "task")


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def row_task(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """What ``reset`` receives for a row: its ``task`` (a catalogue row: JSON text, or a mapping), else
    ``extra_info`` without :data:`ROW_KEYS` (a row written before catalogues)."""
    task = _decoded(extra_info.get("task"))
    if isinstance(task, Mapping):
        return dict(task)
    return {k: v for k, v in extra_info.items() if k not in ROW_KEYS}


def dataset_row_kwargs(row: Mapping[str, Any], who: str, where: str) -> dict[str, Any]:
    """A dataset file's row as a task's reset kwargs: its fields as a written row gives them back (JSON's values:
    a tuple is a list), so a task reset from the catalogue and from its row in a file is the same task.
    ``ValueError`` starting ``who`` and naming ``where`` (``file row N``) for a row JSON cannot hold."""
    try:
        return json.loads(json.dumps(dict(row), ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{who}: {where} is not JSON-serialisable ({exc})") from None


def task_fields(who: str, row: str | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a dataset-row task, as ``reset`` reads them: ``fields`` (the task's own keys), over ``row``,
    the form before (the row as JSON text, or a mapping), read for one release with a ``DeprecationWarning``.
    ``TypeError`` starting ``who`` for a ``row`` that is not a mapping or its JSON."""
    if row is None:
        return dict(fields)
    warnings.warn(f"{who}: reset(row=...) is deprecated: a task carries the row's fields as its own keys "
                  "(reset(**row)); write the rows again with `agent-tune data` (CHANGELOG.md)",
                  DeprecationWarning, stacklevel=3)
    decoded = json.loads(row) if isinstance(row, str) else row
    if not isinstance(decoded, Mapping):
        raise TypeError(f"{who}: row must be a mapping (or its JSON), got {type(decoded).__name__}")
    return {**decoded, **fields}


def mapping_of(value: Any, who: str, key: str) -> dict[str, Any]:
    """An option or task field given as a mapping or its JSON text (``None``, ``""``: empty); ``TypeError`` starting
    ``who`` and naming ``key`` otherwise."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else None
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(f"{who}: {key} must be a mapping (or its JSON), got {type(value).__name__}")
    return dict(value or {})


def chat_messages(value: Any, where: str) -> list[dict[str, Any]]:
    """``value`` as chat messages (copies, each with a ``role`` string and a ``content``); ``TypeError`` naming
    ``where`` otherwise."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{where}: expected a list of chat messages, got {type(value).__name__}")
    for m in value:
        if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and "content" in m):
            raise TypeError(f"{where}: every message needs a 'role' string and a 'content', got {m!r:.200}")
    return [dict(m) for m in value]


def chat_prompt(prompt: Any, who: str) -> list[dict[str, Any]]:
    """A dataset row's ``prompt`` as chat messages: its text as one user message, or :func:`chat_messages`."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else chat_messages(prompt, f"{who} prompt")


def row_env(extra_info: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The env a row names and the constructor kwargs it gives (``extra_info.env = {name, kwargs}``, kwargs as JSON
    text or a mapping; ``ValueError`` without a name)."""
    spec = extra_info.get("env")
    if not isinstance(spec, Mapping) or not spec.get("name"):
        raise ValueError(f"row {extra_info.get('index')!r} has no extra_info.env = {{name, kwargs}}")
    return str(spec["name"]), dict(_decoded(spec.get("kwargs")) or {})


def catalogue_of(env: str) -> TaskCatalogue:
    """The catalogue env ``env`` declares (``ValueError`` when it declares none)."""
    catalogue = get_env_class(env).catalogue
    if catalogue is None:
        raise ValueError(f"env {env!r} declares no task catalogue (BaseToolEnv.catalogue)")
    return catalogue


def eval_kwargs(env: str) -> dict[str, Any]:
    """The constructor kwargs an evaluation of env ``env`` always sets (its catalogue's; none without one)."""
    catalogue = get_env_class(env).catalogue
    return dict(catalogue.eval_kwargs) if catalogue is not None else {}


def catalogue_tasks(env: str, split: str, options: Mapping[str, Any] | None = None) -> list[Task]:
    """The tasks of ``split`` of env ``env`` (a registered name or ``module:Class`` path).

    Raises:
        ValueError: the env declares no catalogue, ``split`` is not one of its splits, an option it does not
            take (named), or two tasks with one id.
    """
    catalogue = catalogue_of(env)
    if split not in catalogue.splits:
        raise ValueError(f"env {env!r} has no split {split!r}; its splits: {', '.join(catalogue.splits)}")
    options = dict(options or {})
    try:
        inspect.signature(catalogue.tasks).bind(split, **options)
    except TypeError as exc:
        raise ValueError(f"env {env!r}: tasks() options: {exc}") from None
    tasks = catalogue.tasks(split, **options)
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise ValueError(f"env {env!r}: two tasks of split {split!r} have the id {task.id!r}")
        seen.add(task.id)
    return tasks


def resolve_categories(env: str, names: Sequence[str], known: Sequence[str]) -> list[str]:
    """Full category names for ``names`` among ``known`` (see the module docstring); ``ValueError`` naming an
    unknown one."""
    common = os.path.commonprefix(list(known))
    prefix = common[: common.rfind("_") + 1]  # "multi_turn_" for BFCL's multi-turn categories, "" when none
    out = []
    for name in names:
        full = name if name in known else prefix + name
        if full not in known:
            raise ValueError(f"env {env!r}: category {name!r} is not one of {', '.join(known)}")
        out.append(full)
    return list(dict.fromkeys(out))


def select_tasks(env: str, split: str | None = None, options: Mapping[str, Any] | None = None,
                 categories: Sequence[str] | None = None, suite: str | None = None,
                 ids: Sequence[str] | None = None, limit: int | None = None) -> list[Task]:
    """The tasks of env ``env`` a run plays, in catalogue order (``ids``: in their order).

    ``split`` defaults to its catalogue's ``eval_default`` (its categories too, when none of
    ``categories`` / ``suite`` / ``ids`` is given); with ``ids`` and no split, every split is searched.

    Raises:
        ValueError: as :func:`catalogue_tasks`; an unknown category, suite or id (named); more than one of
            ``categories`` / ``suite`` / ``ids``; ``limit < 1``.
    """
    catalogue = catalogue_of(env)
    if sum(bool(x) for x in (categories, suite, ids)) > 1:
        raise ValueError("choose one of categories, suite, ids")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    default_split, default_categories = catalogue.eval_default
    if ids:
        pool: dict[str, Task] = {}
        searched = [split] if split is not None else list(dict.fromkeys([default_split, *catalogue.splits]))
        for name in searched:
            if all(i in pool for i in ids):
                break
            for task in catalogue_tasks(env, name, options):
                pool.setdefault(task.id, task)
        missing = [i for i in dict.fromkeys(ids) if i not in pool]
        if missing:
            raise ValueError(_missing_ids(env, split, options, missing))
        tasks = [pool[i] for i in dict.fromkeys(ids)]
    else:
        if split is None and not categories and not suite:
            categories = default_categories
        tasks = catalogue_tasks(env, split or default_split, options)
        if suite is not None:
            if suite not in catalogue.suites:
                raise ValueError(f"env {env!r} has no suite {suite!r}; its suites: "
                                 f"{', '.join(catalogue.suites) or 'none'}")
            categories = catalogue.suites[suite]
        if categories:
            known = list(dict.fromkeys(t.category or env for t in tasks))
            wanted = resolve_categories(env, categories, known)
            by_category = {c: [t for t in tasks if (t.category or env) == c] for c in wanted}
            tasks = [t for c in wanted for t in by_category[c]]
    if limit is not None:
        seen: dict[str, int] = {}
        kept = []
        for task in tasks:
            c = task.category or env
            if seen.get(c, 0) < limit:
                seen[c] = seen.get(c, 0) + 1
                kept.append(task)
        tasks = kept
    return tasks


def _missing_ids(env: str, split: str | None, options: Mapping[str, Any] | None, missing: Sequence[str]) -> str:
    """Why ``select_tasks`` refuses ``missing``: each id named (the first 20, then how many more), and, when a
    split was searched, the other splits that hold some of them."""
    shown = ", ".join(map(repr, missing[:20])) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    if split is None:
        return f"env {env!r}: no task {shown} in any split ({len(missing)} unknown ids)"
    elsewhere = []
    for other in catalogue_of(env).splits:
        if other != split:
            held = {t.id for t in catalogue_tasks(env, other, options)} & set(missing)
            if held:
                elsewhere.append(f"{len(held)} of them in split {other!r}")
    hint = f" ({'; '.join(elsewhere)})" if elsewhere else " (nor in any other split)"
    return f"env {env!r}: no task {shown} in split {split!r}{hint}"


def catalogue_rows(env: str, split: str, options: Mapping[str, Any] | None = None,
                   env_kwargs: Mapping[str, Any] | None = None, tasks: Sequence[Task] | None = None,
                   ) -> list[dict[str, Any]]:
    """verl rows for ``tasks`` (default: every task of ``split``), marked with ``split``. Each row's ``prompt``
    is its catalogue's ``row_prompt`` of its task with ``env_kwargs`` and the task's own."""
    cls = get_env_class(env)
    catalogue = catalogue_of(env)
    rows = []
    for index, task in enumerate(catalogue_tasks(env, split, options) if tasks is None else tasks):
        prompt = catalogue.row_prompt(cls, task, {**dict(env_kwargs or {}), **task.env_kwargs})
        category = task.category or env
        rows.append({
            "data_source": f"{env}/{category}" if category != env else env,
            "agent_name": AGENT_NAME,
            "prompt": prompt,
            "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": task.reference},
            "extra_info": {
                "index": index, "split": split, "id": task.id, "category": category,
                # JSON text (see the module docstring); null when the task needs no kwargs of its own
                "env": {"name": env, "kwargs": json.dumps(task.env_kwargs) if task.env_kwargs else None},
                "task": json.dumps(task.kwargs),
            },
        })
    return rows
