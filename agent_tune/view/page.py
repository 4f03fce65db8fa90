"""The viewer page: one self-contained HTML file (its script and style inlined from ``static/``, the data embedded).

:class:`View` is a :class:`~agent_tune.view.sources.Source` and the episodes read from it so far
(:class:`~agent_tune.view.table.EpisodeTable`); :func:`render_page` writes it as one page that opens from disk,
with nothing fetched: the summary rows as JSON (what the first render needs), the episodes' details as one
gzip-compressed, base64 blob the page decompresses after its first render (``DecompressionStream``) and parses one
episode at a time when it is opened. :meth:`View.updates` is what ``--serve`` answers the page's polls with.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
import time
from importlib import resources
from typing import Any

from agent_tune.view.sources import Source
from agent_tune.view.table import COLUMNS, EpisodeTable

POLL_MS = 3000  # how often a served page asks for new steps and episodes
# the blob's gzip level (zlib's default)
BLOB_LEVEL = 6


def static_text(name: str) -> str:
    """A file of the page shipped in the package (``agent_tune/view/static/``)."""
    return resources.files("agent_tune.view").joinpath("static", name).read_text(encoding="utf-8")


class View:
    """A source and the episodes read from it so far; :meth:`refresh` reads what it has added since."""

    def __init__(self, source: Source) -> None:
        self.source = source
        first = source.poll()  # the first read also tells the run's tool parser
        self.table = EpisodeTable(source.tool_parser)
        for record, origin in first:
            self.table.add(record, origin)

    def refresh(self) -> int:
        """Read the records written since the last read; returns how many."""
        new = self.source.poll()
        for record, origin in new:
            self.table.add(record, origin)
        return len(new)

    def meta(self, live: bool = False) -> dict[str, Any]:
        """What the page needs besides the episodes: kind, title, columns, curves, the eval report, live or not."""
        curves = self.source.curves()
        return {"kind": self.source.kind, "title": self.source.title, "columns": list(COLUMNS),
                "curves": {"rows": curves.rows, "stages": curves.stages}, "report": self.source.report(),
                "live": live, "poll_ms": POLL_MS, "built": time.strftime("%Y-%m-%d %H:%M:%S")}

    def updates(self, rows: int, shared: int) -> dict[str, Any]:
        """What a page holding ``rows`` episodes and ``shared`` prompt messages lacks, after a :meth:`refresh`;
        the curves and report whole (they are small)."""
        self.refresh()
        meta = self.meta(live=True)
        return {"rows": self.table.rows[rows:], "details": self.table.details[rows:],
                "shared": self.table.shared[shared:], "curves": meta["curves"], "report": meta["report"]}


def _script_json(value: Any) -> str:
    """JSON to embed in a ``<script type="application/json">``: ``<`` escaped, so no text in the data can close
    the element."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).replace("<", "\\u003c")


def details_blob(table: EpisodeTable) -> str:
    """The episodes' details as the page embeds them: base64 of the gzip of JSON lines (line 0: the shared prompt
    messages, then one detail per episode, in row order)."""
    text = "\n".join([json.dumps(table.shared, ensure_ascii=False, separators=(",", ":")), *table.details])
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=BLOB_LEVEL, mtime=0)).decode("ascii")


def render_page(view: View, live: bool = False) -> str:
    """The whole page, as one HTML text."""
    meta = view.meta(live)
    parts = {
        "TITLE": html.escape(f"agent-tune view · {meta['title']}"),
        "CSS": static_text("viewer.css"),
        "JS": static_text("viewer.js").replace("</script", "<\\/script"),
        "META": _script_json(meta),
        "SUMMARY": _script_json(view.table.rows),
        "DETAILS": details_blob(view.table),
    }
    # one pass over the template: what is substituted is never scanned again
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: parts[m.group(1)], static_text("page.html"))
