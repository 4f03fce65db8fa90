"""Final-answer extraction and Math-Verify equivalence (the ReTool reward)."""

from __future__ import annotations

import threading

import pytest

from agent_tune.rewards import extract_boxed, math_equivalent


@pytest.mark.parametrize(
    "text,expected",
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{\\frac{a}{b^{2}}}", "\\frac{a}{b^{2}}"),
        ("answer: \\boxed 7$", "7"),
        ("\\fbox{3}", "3"),
        ("no answer here", None),
        ("cut off \\boxed{\\frac{1}{", None),
        ("\\boxed{ 5 }", "5"),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "pred,gold,same",
    [
        ("\\frac{1}{2}", "0.5", True),
        ("\\dfrac{3}{4}", "0.75", True),
        ("2\\sqrt{2}", "\\sqrt{8}", True),
        ("\\{1, 2\\}", "\\{2, 1\\}", True),
        ("3", "4", False),
        ("1/3", "0.333", False),
        ("}{", "1", False),
        ("", "1", False),
    ],
)
def test_math_equivalent(pred, gold, same):
    assert math_equivalent(pred, gold) is same


def test_works_off_the_main_thread():
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", math_equivalent("\\frac{1}{2}", "0.5")))
    t.start()
    t.join()
    assert out["v"] is True
