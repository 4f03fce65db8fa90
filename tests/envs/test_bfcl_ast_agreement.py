"""Our BFCL single-turn rule (``ast_check.ast_verdict``) gives bfcl-eval's own verdict, everywhere we look.

For every entry of the 11 Python single-turn categories, every output of ``bfcl_perturb.variants`` (the
reference answer picked three ways, then near misses: changed values, dropped required/optional
parameters, extra ones, renamed or other functions, reordered/dropped/duplicated calls, int/float/str/bool
swaps, case, spacing and punctuation in strings, lists vs tuples, nested dict edits, malformed outputs;
for (ir)relevance entries: no call, undecodable, empty call, calls) is scored by both sides: ours, and
bfcl-eval's runner step for the category (``bfcl_official_ast.official_verdict``: ``_evaluate_single_ast_entry``
-> ``ast_checker``, or ``_evaluate_single_relevance_entry``), model ``Qwen_Qwen3-8B-FC``. ``valid`` must
agree, and so must the error type of an invalid answer.

Measured 2026-11-23 (bfcl-eval 2026.3.23; each test prints its category's counts under ``-s``): 3,491
entries (2,351 AST + 1,140 (ir)relevance), 141,634 outputs: 60,462 valid and 81,172 invalid on both sides,
0 disagreements, 0 error-type differences, and bfcl-eval raised on none of them. The sweep makes no copies
(it checks instead that neither side mutates an entry): ~15 s of CPU.

Data quirks, identical on both sides: for 5 entries no answer passes, because the possible answer omits a
required parameter (``live_simple_106-63-0``, ``live_simple_112-68-0``, ``live_multiple_507-149-4``,
``live_multiple_964-207-0``) or requires one the expected function does not declare
(``live_multiple_862-181-3``).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections import Counter

import pytest

from agent_tune.envs.bfcl.single_turn.ast_check import ast_verdict
from agent_tune.envs.bfcl.single_turn.entries import SINGLE_TURN_CATEGORIES, load_single_turn, single_turn_ids
from agent_tune.envs.bfcl.single_turn.task import reference_calls
from agent_tune.testing.bfcl_official_ast import DOT_MODEL_NAME, official_modules, official_verdict
from agent_tune.testing.bfcl_perturb import variants

UNSATISFIABLE = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_507-149-4",
                 "live_multiple_964-207-0", "live_multiple_862-181-3"}


@pytest.fixture(scope="module")
def official():
    """bfcl-eval's checker. Skipped only when the bfcl_eval package is absent; bfcl-eval is a pinned
    dependency, so any other import error (a bump that moved or broke a module) fails the tests loudly
    instead of silently skipping the sweep."""
    if importlib.util.find_spec("bfcl_eval") is None:  # pragma: no cover - bfcl-eval is a pinned dependency
        pytest.skip("bfcl-eval is not installed")
    return official_modules()


def _sweep(category: str) -> tuple[Counter, list[str]]:
    """(counts of (ours, theirs) verdicts, disagreements) over every entry and variant of a category."""
    counts: Counter = Counter()
    problems: list[str] = []
    for test_id in single_turn_ids(category):
        entry = load_single_turn(test_id)
        pristine = json.dumps([entry.functions, entry.possible_answer], sort_keys=True)
        for label, calls in variants(entry):
            ours = ast_verdict(entry.functions, calls, entry.possible_answer, category)
            try:
                theirs = official_verdict(entry.functions, calls, entry.possible_answer, category, test_id)
            except Exception as exc:  # noqa: BLE001 - recorded: bfcl-eval raising is itself a finding
                problems.append(f"{test_id} {label}: bfcl-eval raised {exc!r}; ours: {ours}")
                continue
            counts[(ours.valid, bool(theirs["valid"]))] += 1
            if ours.valid != theirs["valid"] or (not ours.valid and ours.error_type != theirs["error_type"]):
                problems.append(f"{test_id} {label}: ours {ours} vs bfcl-eval {theirs.get('error_type')} "
                                f"{theirs.get('error')} for {calls!r}")
        # neither side may mutate the entry (so no copies are made per variant)
        assert json.dumps([entry.functions, entry.possible_answer], sort_keys=True) == pristine, test_id
    return counts, problems


@pytest.mark.parametrize("category", SINGLE_TURN_CATEGORIES)
def test_verdicts_agree_with_bfcl_eval(official, category: str) -> None:
    counts, problems = _sweep(category)
    print(f"{category}: {sum(counts.values())} outputs, both valid {counts[(True, True)]}, "
          f"both invalid {counts[(False, False)]}, disagreements {len(problems)}")
    assert not problems, "\n".join(problems[:20])
    assert counts[(True, True)] and counts[(False, False)]  # the sweep tells right from wrong


@pytest.mark.parametrize("category", [c for c in SINGLE_TURN_CATEGORIES if "relevance" not in c])
def test_the_reference_answer_passes_except_for_data_quirks(official, category: str) -> None:
    failing = set()
    for test_id in single_turn_ids(category):
        entry = load_single_turn(test_id)
        calls = reference_calls(entry.functions, entry.possible_answer)
        if not ast_verdict(entry.functions, calls, entry.possible_answer, category).valid:
            failing.add(test_id)
            assert not official_verdict(entry.functions, calls, entry.possible_answer, category, test_id)["valid"]
    assert failing == {t for t in UNSATISFIABLE if t.startswith(category + "_")}


def test_dotted_names_follow_the_models_underscore_to_dot(official) -> None:
    """For a model whose names turn "." into "_" (bfcl-eval's convert_func_name), the official checker expects
    the underscored name; ``underscore_to_dot=True`` gives the same verdicts."""
    assert official.MODEL_CONFIG_MAPPING[DOT_MODEL_NAME].underscore_to_dot
    checked = 0
    for category in ("simple_python", "live_simple", "live_multiple", "parallel"):
        for test_id in single_turn_ids(category):
            entry = load_single_turn(test_id)
            if not any("." in doc["name"] for doc in entry.functions):
                continue
            base = reference_calls(entry.functions, entry.possible_answer)
            underscored = [{name.replace(".", "_"): args for name, args in call.items()} for call in base]
            for calls in (base, underscored):
                ours = ast_verdict(entry.functions, calls, entry.possible_answer, category, underscore_to_dot=True)
                theirs = official_verdict(entry.functions, copy.deepcopy(calls), entry.possible_answer, category,
                                          test_id, model_name=DOT_MODEL_NAME)
                assert ours.valid == theirs["valid"], (test_id, calls, ours, theirs)
                checked += 1
    assert checked > 100


def test_the_stand_ins_do_not_outlive_the_import(official) -> None:
    """The SDK stand-ins served only the official import: none is left in ``sys.modules``, and the checker
    module is reachable only through the fixture."""
    from agent_tune.testing.bfcl_official_ast import STUBBED, _StubModule

    assert not [name for name, module in sys.modules.items() if isinstance(module, _StubModule)]
    assert not any(name in sys.modules for name in STUBBED if importlib.util.find_spec(name.split(".")[0]) is None)
    assert sys.modules.get("bfcl_eval.eval_checker.ast_eval.ast_checker") is not official.ast_checker
