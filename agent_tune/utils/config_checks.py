"""Checks shared by the typed option blocks that are built from config mappings."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def reject_unknown_keys(prefix: str, raw: Mapping[str, Any], names: Iterable[str]) -> None:
    """Raise ``ValueError`` naming ``prefix`` and every key of ``raw`` not in ``names`` (with the known ones)."""
    known = set(names)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{prefix}: unknown key(s) {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(sorted(known))})")
