"""Final-answer extraction and mathematical equivalence for math tasks (ReTool's reward).

Equivalence is decided by Math-Verify (PyPI ``math-verify``, HuggingFace), which parses LaTeX and
plain expressions to sympy and compares them numerically and symbolically; this module only finds the
final ``\\boxed{...}`` and applies the library. Math-Verify's own timeout uses ``signal.alarm``, which
works only in the main thread: there it is applied (``timeout_s``), elsewhere the comparison runs
without it and very long answers are refused instead (``max_answer_chars``).
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)

_BOX_COMMANDS = ("\\boxed", "\\fbox")


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed x``) in ``text``."""
    best_pos, best = -1, None
    for cmd in _BOX_COMMANDS:
        start = text.rfind(cmd)
        while start != -1:
            content = _box_content(text, start + len(cmd))
            if content is not None:
                if start > best_pos:
                    best_pos, best = start, content
                break
            start = text.rfind(cmd, 0, start)
    return best.strip() if best is not None else None


def _box_content(text: str, i: int) -> str | None:
    """Parse the argument that follows a box command at index ``i`` (braced, or ``\\boxed 5``)."""
    if i < len(text) and text[i] == " ":
        j = i
        while j < len(text) and text[j] == " ":
            j += 1
        end = j
        while end < len(text) and not text[end].isspace() and text[end] not in "$":
            end += 1
        return text[j:end] if end > j else None
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        ch = text[j]
        if ch == "\\":
            continue
        if ch == "{" and (j == 0 or text[j - 1] != "\\"):
            depth += 1
        elif ch == "}" and text[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None  # unbalanced: the answer was cut off


def _parse(answer: str, timeout: int | None):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    text = answer if "$" in answer else f"${answer}$"
    return parse(
        text,
        extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],
        parsing_timeout=timeout,
    )


def math_equivalent(prediction: str, ground_truth: str, timeout_s: int = 5, max_answer_chars: int = 1000) -> bool:
    """True if ``prediction`` and ``ground_truth`` denote the same mathematical object.

    Both are bare answers (the content of a ``\\boxed{}``, or a plain number/expression). Never
    raises: anything Math-Verify cannot parse or compare counts as not equivalent.
    """
    pred, gold = prediction.strip(), str(ground_truth).strip()
    if not pred or not gold:
        return False
    if _normalise(pred) == _normalise(gold):
        return True
    in_main = threading.current_thread() is threading.main_thread()
    if not in_main and max(len(pred), len(gold)) > max_answer_chars:
        return False
    timeout = timeout_s if in_main and timeout_s > 0 else None
    try:
        from math_verify import verify

        gold_parsed = _parse(gold, timeout)
        pred_parsed = _parse(pred, timeout)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception as exc:  # parse errors, timeouts, sympy failures: not equivalent
        logger.debug("math_equivalent(%r, %r) failed: %s", pred, gold, exc)
        return False


def _normalise(s: str) -> str:
    return "".join(s.split()).rstrip(".")
