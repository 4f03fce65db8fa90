"""Access to the BFCL multi-turn data shipped inside the ``bfcl-eval`` package.

Entries, ground truth and function docs are read from the package's data folder without importing
``bfcl_eval.constants`` (whose import writes result folders). Loaded files are cached (bounded: one
entry per category and per class) and shared. What the accessors copy: :func:`function_docs` returns a
deep copy; :func:`load_entry` returns fresh lists and message dicts for ``question`` and ``ground_truth``
(their strings are immutable) but shares ``initial_config`` and the tool schemas with the cache and with
every other entry of the same classes: treat those as read-only (the backends deep-copy the config).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from agent_tune.envs.bfcl.schema import to_tool_schema
from agent_tune.errors import DataError

# The four scored multi-turn categories, in leaderboard order, and the unscored composite one.
SCORED_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
UNSCORED_CATEGORIES: tuple[str, ...] = ("multi_turn_composite",)
ALL_CATEGORIES: tuple[str, ...] = SCORED_CATEGORIES + UNSCORED_CATEGORIES

# bfcl-eval's class -> function-doc file and class -> module tables (its executable_backend_config).
FUNC_DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
_BACKEND_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
BACKEND_MODULES: dict[str, str] = {
    "GorillaFileSystem": f"{_BACKEND_PREFIX}.gorilla_file_system",
    "MathAPI": f"{_BACKEND_PREFIX}.math_api",
    "MessageAPI": f"{_BACKEND_PREFIX}.message_api",
    "TwitterAPI": f"{_BACKEND_PREFIX}.posting_api",
    "TicketAPI": f"{_BACKEND_PREFIX}.ticket_api",
    "TradingBot": f"{_BACKEND_PREFIX}.trading_bot",
    "TravelAPI": f"{_BACKEND_PREFIX}.travel_booking",
    "VehicleControlAPI": f"{_BACKEND_PREFIX}.vehicle_control",
}
STATELESS_CLASSES: frozenset[str] = frozenset({"MathAPI"})


class BFCLDataError(DataError, LookupError):
    """Raised for an unknown test id or category, or when bfcl-eval is not installed."""


PROJECT_ROOT_VARIABLE = "BFCL_PROJECT_ROOT"
EVAL_CONFIG_MODULE = "bfcl_eval.constants.eval_config"
SCRATCH_PROJECT_ROOT = Path(tempfile.gettempdir()) / "agent_tune_bfcl_root"
_environ_lock = threading.Lock()


@contextmanager
def bfcl_project_root(root: str | Path | None = None) -> Iterator[Path]:
    """``BFCL_PROJECT_ROOT`` set to ``root`` inside the block only; the previous value (or its absence) after.

    ``root`` defaults to the user's own ``BFCL_PROJECT_ROOT``, else a scratch folder. bfcl-eval reads the
    variable once, when ``bfcl_eval.constants.eval_config`` is imported: import bfcl-eval's checker modules
    inside this block and they keep the root for good, while the process environment (and every child
    process) stays as it was.
    """
    with _environ_lock:
        previous = os.environ.get(PROJECT_ROOT_VARIABLE)
        path = Path(root) if root is not None else Path(previous) if previous else SCRATCH_PROJECT_ROOT
        path.mkdir(parents=True, exist_ok=True)
        os.environ[PROJECT_ROOT_VARIABLE] = str(path)
        try:
            yield path
        finally:
            if previous is None:
                os.environ.pop(PROJECT_ROOT_VARIABLE, None)
            else:
                os.environ[PROJECT_ROOT_VARIABLE] = previous


def ensure_bfcl_project_root() -> Path:
    """Make bfcl-eval write its ``result/``, ``score/``, ``.file_locks/`` folders outside site-packages.

    Imports ``bfcl_eval.constants.eval_config`` (the module that reads ``BFCL_PROJECT_ROOT`` and creates
    those folders at import) inside :func:`bfcl_project_root`, unless it is already imported, and returns
    the root bfcl-eval uses. The process environment is left as it was. The environments themselves never
    import that module (they load the backend classes only); this guards any later import of bfcl-eval's
    checker in the same process.
    """
    module = sys.modules.get(EVAL_CONFIG_MODULE)
    # = _known_root[:2] == [module, module.PROJECT_ROOT] (identity first, as a list compares), without the two lists:
    # asked at every env construction
    if module is not None and _known_root[0] is module and (
            _known_root[1] is module.PROJECT_ROOT or _known_root[1] == module.PROJECT_ROOT):
        return _known_root[2]
    if module is None:
        with bfcl_project_root():
            try:
                module = importlib.import_module(EVAL_CONFIG_MODULE)
            except ModuleNotFoundError as exc:
                if exc.name != "bfcl_eval" and not (exc.name or "").startswith("bfcl_eval."):
                    raise  # bfcl-eval is there but one of its own imports failed: say which
                raise BFCLDataError(
                    "bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23 mpmath filelock"
                ) from exc
    _known_root[:] = [module, module.PROJECT_ROOT, Path(module.PROJECT_ROOT)]
    return _known_root[2]


_known_root: list[Any] = [None, None, None]  # the eval_config module last asked, its PROJECT_ROOT, as a Path


@lru_cache(maxsize=1)
def bfcl_data_dir() -> Path:
    """The ``data`` folder of the installed bfcl-eval package."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BFCLDataError(
            "bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23 mpmath filelock"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def category_of(test_id: str) -> str:
    """``multi_turn_base_12`` -> ``multi_turn_base``."""
    category, _, number = test_id.rpartition("_")
    if category not in ALL_CATEGORIES or not number.isdigit():
        raise BFCLDataError(f"not a BFCL multi-turn test id: {test_id!r} (categories: {', '.join(ALL_CATEGORIES)})")
    return category


def _category_files(category: str) -> tuple[Path, Path]:
    data = bfcl_data_dir()
    name = f"BFCL_v4_{category}.json"
    if category in UNSCORED_CATEGORIES:
        return data / "unused_datasets" / "question" / name, data / "unused_datasets" / "possible_answer" / name
    return data / name, data / "possible_answer" / name


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@lru_cache(maxsize=len(ALL_CATEGORIES))
def _category_table(category: str) -> dict[str, tuple[dict[str, Any], list[list[str]]]]:
    if category not in ALL_CATEGORIES:
        raise BFCLDataError(f"unknown BFCL category {category!r}; known: {', '.join(ALL_CATEGORIES)}")
    questions, answers = _category_files(category)
    gt = {row["id"]: row["ground_truth"] for row in _read_jsonl(answers)}
    return {row["id"]: (row, gt[row["id"]]) for row in _read_jsonl(questions)}


@lru_cache(maxsize=len(FUNC_DOC_FILES))
def _func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    if class_name not in FUNC_DOC_FILES:
        raise BFCLDataError(f"no function docs for class {class_name!r}")
    return tuple(_read_jsonl(bfcl_data_dir() / "multi_turn_func_doc" / FUNC_DOC_FILES[class_name]))


def function_docs(class_name: str) -> list[dict[str, Any]]:
    """BFCL's function docs (its own schema dialect) for one backend class."""
    return copy.deepcopy(list(_func_docs(class_name)))


@lru_cache(maxsize=len(FUNC_DOC_FILES))
def _class_tools(class_name: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple((doc["name"], to_tool_schema(doc)) for doc in _func_docs(class_name))


@dataclass
class BFCLEntry:
    """One multi-turn test entry with its ground truth.

    ``functions`` are the tools (OpenAI form, converted from BFCL's docs) visible from the start,
    in bfcl-eval's order; ``missed_function`` maps a turn index to the tools held back until that
    turn (miss_func). Tool schemas and ``initial_config`` are shared read-only data: the backends
    deep-copy the config, and nothing may mutate either.
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[str]]
    functions: list[dict[str, Any]]
    missed_function: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def long_context(self) -> bool:
        """bfcl-eval loads long-context (and composite) scenarios with ``long_context=True``."""
        return "long_context" in self.category or "composite" in self.category

    @property
    def num_turns(self) -> int:
        return len(self.question)


def category_test_ids(category: str) -> list[str]:
    """All test ids of a category, in file order."""
    return list(_category_table(category))


def load_entry(test_id: str) -> BFCLEntry:
    """Load one entry by id: fresh lists for questions (with fresh message dicts), ground truth, functions
    and held-back functions; ``initial_config`` and the tool schemas are shared read-only (see ``BFCLEntry``)."""
    category = category_of(test_id)
    table = _category_table(category)
    if test_id not in table:
        raise BFCLDataError(f"unknown BFCL test id {test_id!r}")
    row, gt = table[test_id]
    functions: list[tuple[str, dict[str, Any]]] = []
    for class_name in row["involved_classes"]:
        functions.extend(_class_tools(class_name))
    missed: dict[int, list[dict[str, Any]]] = {}
    for turn, names in (row.get("missed_function") or {}).items():
        held = []
        for name in names:  # bfcl-eval removes the first doc with that name
            for i, (fname, tool) in enumerate(functions):
                if fname == name:
                    held.append(tool)
                    del functions[i]
                    break
        missed[int(turn)] = held
    return BFCLEntry(
        id=row["id"],
        category=category,
        question=[[dict(m) for m in turn] for turn in row["question"]],
        initial_config=row.get("initial_config", {}),
        involved_classes=list(row["involved_classes"]),
        ground_truth=[list(turn) for turn in gt],
        functions=[tool for _, tool in functions],
        missed_function=missed,
    )


@lru_cache(maxsize=256)
def shared_entry(test_id: str) -> BFCLEntry:
    """:func:`load_entry`, cached (bounded) and shared by every episode of the entry: read-only, nothing may
    mutate it (the env copies the question messages it shows)."""
    return load_entry(test_id)
