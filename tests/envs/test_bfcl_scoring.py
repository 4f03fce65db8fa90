"""The scorer's file-system comparison gives exactly what bfcl-eval's ``Directory.__eq__`` gives."""

from __future__ import annotations

import copy
import random
from typing import Any, Iterator

import pytest

from agent_tune.envs.bfcl.backend import BFCLBackend
from agent_tune.envs.bfcl.data import ALL_CATEGORIES, category_test_ids
from agent_tune.envs.bfcl.ground_truth import ground_truth_trace
from agent_tune.envs.bfcl.scoring import _Directory, _equal, _File, _same_tree


def _dirs(root: Any) -> list[Any]:
    out, todo = [], [root]
    while todo:
        d = todo.pop()
        out.append(d)
        todo.extend(v for v in d.contents.values() if type(v) is _Directory)
    return out


def _mutants(root: Any, rng: random.Random) -> Iterator[tuple[str, Any]]:
    """Copies of a tree, each changed in one way (or not at all), for comparison with the original."""
    def pick(tree: Any, want: type | None = None) -> tuple[Any, Any, str] | None:
        spots = [(d, k) for d in _dirs(tree) for k, v in d.contents.items() if want is None or type(v) is want]
        if not spots:
            return None
        d, k = rng.choice(spots)
        return d, d.contents[k], k

    yield "same", copy.deepcopy(root)
    for kind in ("content", "file_name", "dir_name", "drop", "add", "file_to_dir", "reorder", "root_name"):
        tree = copy.deepcopy(root)
        if kind == "content" and (spot := pick(tree, _File)):
            spot[1].content += "x"
        elif kind == "file_name" and (spot := pick(tree, _File)):
            spot[1].name += "x"  # the key stays: only the File's own name differs
        elif kind == "dir_name" and (spot := pick(tree, _Directory)):
            spot[1].name += "x"
        elif kind == "drop" and (spot := pick(tree)):
            del spot[0].contents[spot[2]]
        elif kind == "add":
            rng.choice(_dirs(tree))._add_file("zz_new.txt", "")
        elif kind == "file_to_dir" and (spot := pick(tree, _File)):
            spot[0].contents[spot[2]] = _Directory(spot[1].name, spot[0])
        elif kind == "reorder":
            for d in _dirs(tree):
                d.contents = dict(reversed(list(d.contents.items())))
        elif kind == "root_name":
            tree.name += "x"
        yield kind, tree


@pytest.mark.parametrize("category", ALL_CATEGORIES)
def test_same_tree_agrees_with_directory_eq(category: str) -> None:
    """Every file system of the category (initial, and after each ground-truth turn), against mutated
    copies of itself and against the other states: ``_same_tree`` and ``==`` always agree."""
    rng = random.Random(category)
    checked = {True: 0, False: 0}
    for test_id in category_test_ids(category):
        backend = BFCLBackend.for_entry(test_id)
        if "GorillaFileSystem" not in backend.instances:
            continue
        roots = [backend.instances["GorillaFileSystem"].root]
        roots += [turn.state["GorillaFileSystem"]["root"] for turn in ground_truth_trace(test_id)]
        for a in roots:
            for b in roots[:2]:
                assert _same_tree(a, b) == (a == b) == _equal(a, b)
            for kind, b in _mutants(a, rng):
                expected = a == b
                assert _same_tree(a, b) == expected == _same_tree(b, a) == (b == a), (test_id, kind)
                checked[expected] += 1
    assert checked[True] > 10 and checked[False] > 10, checked
