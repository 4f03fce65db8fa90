"""Writing verl dataset rows: one split as ``<name>.parquet`` (what verl reads) and ``<name>.jsonl`` (to read)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


def write_rows(out_dir: str | Path, name: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` to ``out_dir/name.parquet`` and ``out_dir/name.jsonl`` (the folder is created)."""
    import pandas as pd

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_parquet(out_dir / f"{name}.parquet", index=False)
    with open(out_dir / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
