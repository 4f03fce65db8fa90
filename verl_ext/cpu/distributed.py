"""Let verl's process-group backend string through on CPU.

verl initialises its workers' process group with ``backend=f"cpu:gloo,{device}:{backend}"``
(``verl/utils/distributed.py``). With the ``cpu`` platform that is ``"cpu:gloo,cpu:gloo"``, which
``torch.distributed`` rejects as a duplicate device type although both halves agree. verl offers no
setting for the string, so :func:`install` wraps ``torch.distributed.init_process_group`` in the processes
that load the CPU plugin: a backend string naming the same device twice *with the same backend* is reduced
to one pair (``"cpu:gloo"``); every other argument reaches torch unchanged (conflicting pairs included, for
torch to reject as before). Besides this wrapper, the CPU support replaces one verl function (the critic's loader,
:mod:`verl_ext.cpu.value_model`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

_MARKER = "_agent_tune_dedupes_backend"


def dedupe_backend(backend: Any) -> Any:
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``; anything else (no duplicates, conflicts, non-str) unchanged."""
    if not isinstance(backend, str) or ":" not in backend:
        return backend
    seen: dict[str, str] = {}
    for pair in backend.split(","):
        parts = pair.split(":")
        if len(parts) != 2:
            return backend
        device, name = (p.strip() for p in parts)
        if seen.get(device, name) != name:
            return backend
        seen[device] = name
    deduped = ",".join(f"{d}:{b}" for d, b in seen.items())
    return deduped if deduped.count(",") < backend.count(",") else backend


def _wrap(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (dedupe_backend(args[0]), *args[1:])
        if "backend" in kwargs:
            kwargs["backend"] = dedupe_backend(kwargs["backend"])
        return init(*args, **kwargs)

    setattr(init_process_group, _MARKER, True)
    return init_process_group


def install() -> None:
    """Wrap ``torch.distributed.init_process_group`` (idempotent)."""
    import torch.distributed as dist

    if not getattr(dist.init_process_group, _MARKER, False):
        dist.init_process_group = _wrap(dist.init_process_group)
