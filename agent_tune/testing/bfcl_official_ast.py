"""bfcl-eval's own single-turn scoring code (``ast_checker`` and the runner's per-entry steps), for tests.

Also imported by ``benchmarks/ast_scoring.py`` (the one copy of this importer); nothing else in ``agent_tune/``
imports it.

Why stubs, and which: importing ``bfcl_eval.eval_checker.ast_eval.ast_checker`` (or ``eval_runner``) runs
``bfcl_eval/constants/model_config.py``, which imports every model handler and so every provider SDK.
bfcl-eval is installed with ``--no-deps`` next to the trainer, so those imports fail. The
checker itself uses none of them: from that module it reads only ``MODEL_CONFIG_MAPPING[...]
.underscore_to_dot``. Two ways were weighed:

* a separate virtual environment with a full bfcl-eval install (1.9 GB, minutes, pins numpy/networkx):
  heavy, and the agreement tests would need a subprocess;
* permissive stand-in modules for the missing SDKs (:data:`STUBBED`), present in ``sys.modules`` only
  while the official modules import. Chosen: the real ``model_config.py`` then runs and the mapping the
  checker consults is bfcl-eval's own (no hand-written entry), in ~3 s, with no install.

:func:`official_modules` installs a ``sys.meta_path`` finder that serves only the names in
:data:`STUBBED` (so optional imports elsewhere, like tenacity's ``tornado`` probe, still fail as usual),
and imports ``eval_runner`` and ``ast_checker`` afresh (stand-ins other tests put in place, e.g. an empty
``model_config``, are moved aside meanwhile). Then it removes the finder, drops the stand-ins, and puts
bfcl-eval's entries of ``sys.modules`` (and the parent packages' attributes) back as they were: the
imported bfcl-eval modules live on only through the returned namespace. Real third-party packages the
import loaded on the way stay loaded (removing numpy, say, would make a later import reload it).
bfcl-eval's result folders go under the scratch root of ``ensure_bfcl_project_root``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from functools import lru_cache
from typing import Any, Iterator

from agent_tune.envs.bfcl.multi_turn.data import ensure_bfcl_project_root

# Provider SDKs (and tree-sitter) that bfcl-eval 2026.3.23's model_config import chain needs and the
# --no-deps install lacks; a dotted name stubs that subpackage only (``google`` is a real namespace).
STUBBED: tuple[str, ...] = (
    "boto3",
    "cohere",
    "datamodel_code_generator",
    "google.genai",
    "mistralai",
    "qwen_agent",
    "tree_sitter",
    "tree_sitter_java",
    "tree_sitter_javascript",
    "writerai",
)
# Modules imported afresh even if already loaded (another test may hold stand-ins for them).
FRESH: tuple[str, ...] = (
    "bfcl_eval.constants.model_config",
    "bfcl_eval.eval_checker.ast_eval.ast_checker",
    "bfcl_eval.eval_checker.eval_runner",
)
# A key of bfcl-eval's model mapping: the Qwen3 FC handler (hermes <tool_call> blocks), names keep dots.
MODEL_NAME = "Qwen_Qwen3-8B-FC"
# One with underscore_to_dot=True (OpenAI-style names: "." becomes "_").
DOT_MODEL_NAME = "gpt-4.1-2025-04-14-FC"


class _AnyMeta(type):
    """Class-level attribute access, subscripting and ``|`` on a stand-in class give stand-ins."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


def _stand_in(name: str) -> type:
    """A class that accepts any construction; its instances answer any attribute, call, index or loop."""

    def _instance(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _stand_in(name)()

    return _AnyMeta(name, (), {
        "__init__": lambda self, *args, **kwargs: None,
        "__getattr__": lambda self, attr: _stand_in(attr)(),
        "__call__": _instance,
        "__getitem__": _instance,
        "__iter__": lambda self: iter(()),
    })


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stand_in(name)
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves stand-in packages for :data:`STUBBED` names that no other finder can find."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == n or fullname.startswith(n + ".") for n in STUBBED):
            return None
        for finder in sys.meta_path:
            if finder is not self and getattr(finder, "find_spec", None):
                try:
                    if finder.find_spec(fullname, path, target) is not None:
                        return None  # the real thing is installed: use it
                except (ImportError, ValueError):
                    pass
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _ours(name: str) -> bool:
    """Names the restore step manages: bfcl-eval's modules and the stand-ins. Other packages the import
    pulled in for real (numpy, requests, ...) stay loaded: reloading a C extension later is unsafe."""
    return name.startswith("bfcl_eval.") or isinstance(sys.modules.get(name), _StubModule)


def _restore(before: dict[str, types.ModuleType]) -> None:
    """Put ``sys.modules`` (and each parent package's attribute for its child) back as in ``before``, for
    bfcl-eval's modules and the stand-ins."""
    changed = [k for k in list(sys.modules) if _ours(k) and (k not in before or sys.modules[k] is not before[k])]
    changed += [k for k in before if k not in sys.modules]
    for name in changed:
        if name in before:
            sys.modules[name] = before[name]
        else:
            module = sys.modules.pop(name, None)
            parent_name, _, child = name.rpartition(".")
            parent = sys.modules.get(parent_name)
            if parent is not None and module is not None and vars(parent).get(child) is module:
                delattr(parent, child)
    for name in changed:  # re-point parents at the modules they had
        parent_name, _, child = name.rpartition(".")
        if name in before and parent_name in sys.modules:
            setattr(sys.modules[parent_name], child, before[name])


def _moved_aside() -> Iterator[str]:
    """FRESH modules, and bfcl-eval modules that are stand-ins (no file, not a package) set by other tests."""
    for name in list(sys.modules):
        if name in FRESH:
            yield name
        elif name.startswith("bfcl_eval."):  # only these are inspected (others may import lazily on access)
            attrs = vars(sys.modules[name])
            if attrs.get("__file__") is None and "__path__" not in attrs:
                yield name


@lru_cache(maxsize=1)
def official_modules() -> types.SimpleNamespace:
    """``eval_runner``, ``ast_checker``, ``Language``, ``ReturnFormat``, ``MODEL_CONFIG_MAPPING``,
    ``QwenFCHandler`` (hermes decoding) and ``utils`` (result-file layout) of bfcl-eval."""
    ensure_bfcl_project_root()
    before = dict(sys.modules)
    for name in list(_moved_aside()):
        del sys.modules[name]
    finder = _StubFinder()
    sys.meta_path.insert(0, finder)
    try:
        eval_runner = importlib.import_module("bfcl_eval.eval_checker.eval_runner")
        ast_checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        enums = importlib.import_module("bfcl_eval.constants.enums")
        qwen_fc = importlib.import_module("bfcl_eval.model_handler.local_inference.qwen_fc")
        utils = importlib.import_module("bfcl_eval.utils")
    finally:
        sys.meta_path.remove(finder)
        _restore(before)
    return types.SimpleNamespace(
        eval_runner=eval_runner,
        ast_checker=ast_checker,
        Language=enums.Language,
        ReturnFormat=enums.ReturnFormat,
        MODEL_CONFIG_MAPPING=ast_checker.MODEL_CONFIG_MAPPING,
        QwenFCHandler=qwen_fc.QwenFCHandler,
        utils=utils,
    )


class _Decoded:
    """A stand-in handler whose ``decode_ast`` returns given calls (``None``: decoding fails)."""

    def __init__(self, calls: Any) -> None:
        self.calls = calls

    def decode_ast(self, result: Any, language: Any = None, has_tool_call_tag: bool = False) -> Any:
        if self.calls is None:
            raise ValueError("the response could not be decoded")
        return self.calls


def official_verdict(functions: list[dict[str, Any]], calls: Any, possible_answer: list[dict[str, Any]] | None,
                     category: str, test_id: str = "x", model_name: str = MODEL_NAME) -> dict[str, Any]:
    """bfcl-eval's verdict on decoded ``calls``: the runner's per-entry function for the category.

    (Ir)relevance: ``_evaluate_single_relevance_entry``; the rest ``_evaluate_single_ast_entry`` (format
    check, then ``ast_checker``). Returns its dict (``valid``, and ``error_type`` when invalid).
    """
    off = official_modules()
    prompt = {"id": test_id, "function": functions}
    handler = _Decoded(calls)
    if "relevance" in category:
        return off.eval_runner._evaluate_single_relevance_entry(handler, test_id, "<raw>", prompt, model_name, category)
    return off.eval_runner._evaluate_single_ast_entry(
        handler, test_id, "<raw>", possible_answer, prompt, model_name, category,
        language=off.Language.PYTHON, return_format=off.ReturnFormat.PYTHON)
