"""Human-readable dumps of token trajectories, with the loss mask shown.

One JSON object per episode: the prompt text, then the response as alternating segments, each
tagged ``policy`` (mask 1: trained on) or ``env`` (mask 0: observations, template glue), with its
token count and mean log-prob; plus reward and the environment's info. A plain-text rendering
marks policy spans with ``[[`` ``]]`` for reading in a terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from agent_tune.rollout.trajectory import Trajectory


def segments(traj: Trajectory, decode: Callable[[Sequence[int]], str]) -> list[dict[str, Any]]:
    """Maximal runs of equal mask, decoded: ``{"who": "policy"|"env", "tokens": n, "text": ..., "mean_logprob"}``."""
    out: list[dict[str, Any]] = []
    start = 0
    mask = traj.response_mask
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            ids = traj.response_ids[start:i]
            seg: dict[str, Any] = {"who": "policy" if mask[start] else "env", "tokens": len(ids), "text": decode(ids)}
            if mask[start]:
                lps = traj.response_logprobs[start:i]
                seg["mean_logprob"] = sum(lps) / len(lps)
            out.append(seg)
            start = i
    return out


def trajectory_record(
    traj: Trajectory,
    decode: Callable[[Sequence[int]], str],
    reward: float,
    info: Mapping[str, Any],
    tokens: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """The JSON-serialisable record of one episode; ``tokens`` adds the trajectory's lists (ids, mask and
    the sampler's log-probs)."""
    record = {
        **extra,
        "reward": reward,
        "prompt_tokens": len(traj.prompt_ids),
        "response_tokens": len(traj),
        "policy_tokens": traj.num_policy_tokens,
        "truncated": traj.truncated,
        "prompt": decode(traj.prompt_ids),
        "segments": segments(traj, decode),
        "info": {k: v for k, v in info.items() if _jsonable(v)},
    }
    if tokens:
        record.update(prompt_ids=list(traj.prompt_ids), response_ids=list(traj.response_ids),
                      response_mask=list(traj.response_mask), response_logprobs=list(traj.response_logprobs))
    return record


def render_text(record: Mapping[str, Any]) -> str:
    """Terminal rendering: policy tokens inside ``[[ ]]``, environment tokens as they are."""
    body = "".join(f"[[{s['text']}]]" if s["who"] == "policy" else s["text"] for s in record["segments"])
    return f"{record['prompt']}{body}\n--- reward {record['reward']}\n"


def append_jsonl(path: str | Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Append records to a jsonl file (created with its folder if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False
