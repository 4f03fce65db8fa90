"""What an env declares about its eval results (``BaseToolEnv.report``), kept apart from the env class:
:class:`EvalReport`. ``agent-tune eval`` always reports per-category accuracy and pass@k; an env's report adds
its official scorer's view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

# ``env`` below is the finished episode's BaseToolEnv (not imported here: the env contract imports this module)
Records = Sequence[Mapping[str, Any]]


def _no_fields(env: Any, sample: int) -> dict[str, Any]:
    return {}


def _no_sections(records: Records, summary: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _no_lines(summary: Mapping[str, Any]) -> list[str]:
    return []


def _no_files(records: Records, out_dir: str, meta: Mapping[str, Any], **options: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class EvalReport:
    """How an env's eval results are reported, beyond per-category accuracy and pass@k.

    ``record_fields(env, sample)``: fields of a finished episode added to its eval record, read before the env
    closes (tau2: its ``SimulationRun``); ``sections(records, summary, meta)``: sections merged into the report's
    summary (BFCL: the leaderboard's summary scores; tau2: its pass^k); ``lines(summary)``: text lines printed
    under the report's table for those sections; ``write_results(records, out_dir, meta, **options)``: the results
    in the official scorer's own format (BFCL's result files, tau2's Results), returning the files written.
    Each defaults to nothing.
    """

    record_fields: Callable[[Any, int], dict[str, Any]] = _no_fields
    sections: Callable[[Records, Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] = _no_sections
    lines: Callable[[Mapping[str, Any]], list[str]] = _no_lines
    write_results: Callable[..., list[str]] = _no_files


__all__ = ["EvalReport"]
