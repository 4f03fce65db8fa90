"""Agent-R1's batched steps (``tool.use_batch_tool_calls``): the generations of concurrent episodes that arrive within
a window go to the shared env's ``batch_step`` together, each episode handed its own ``(tool_response, success,
active)`` (its caller waits within its own ``call_timeout``, never cancelling the batch).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any


class BatchWindow:
    """Batches of ``env.batch_step(raw_responses)`` over the generations :meth:`submit` receives within a window."""

    def __init__(self, env: Any, window: float) -> None:
        self.env = env
        self.window = float(window)
        self._lock = threading.Lock()
        self._pending: list[tuple[str, Future[tuple[Any, Any, Any]]]] = []
        self.sizes: list[int] = []  # each batch's size, in order (for the records and tests)

    def submit(self, raw: str) -> Future[tuple[Any, Any, Any]]:
        """This generation's step result, once its batch has been stepped."""
        future: Future[tuple[Any, Any, Any]] = Future()
        with self._lock:
            self._pending.append((raw, future))
            opens = len(self._pending) == 1
        if opens:
            timer = threading.Timer(self.window, self._flush)
            timer.daemon = True  # a batch_step that never returns keeps only this thread
            timer.start()
        return future

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        self.sizes.append(len(batch))
        try:
            out = self.env.batch_step([raw for raw, _ in batch])
            responses, successes, actives = out
            if not (len(responses) == len(successes) == len(actives) == len(batch)):
                raise TypeError(f"batch_step() of {len(batch)} responses returned lists of {len(responses)}, "
                                f"{len(successes)} and {len(actives)}")
        except Exception as exc:  # noqa: BLE001 - every episode of the batch reads the failure as its own
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), *result in zip(batch, responses, successes, actives):
            future.set_result(tuple(result))  # type: ignore[arg-type]
