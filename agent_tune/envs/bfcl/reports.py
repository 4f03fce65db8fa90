"""How BFCL results are reported, for both BFCL envs (``bfcl``, multi-turn; ``toolcall`` on BFCL's single-turn
entries): the leaderboard's summary scores (:mod:`.leaderboard`) and BFCL's result files for ``bfcl evaluate``
(:mod:`.result_files`: options ``model``, ``format``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from agent_tune.envs.bfcl import leaderboard, result_files
from agent_tune.envs.report import EvalReport


def _sections(records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
              meta: Mapping[str, Any]) -> dict[str, Any]:
    return leaderboard.report_sections(summary)


BFCL_REPORT = EvalReport(sections=_sections, lines=leaderboard.format_sections,
                         write_results=result_files.write_results)
