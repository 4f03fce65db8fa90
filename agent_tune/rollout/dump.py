"""The episode record, one format for every place episodes are kept, with the loss mask shown.

One JSON object per episode (:func:`trajectory_record`): the prompt text, then the response as alternating
segments, each tagged ``policy`` (mask 1: trained on) or ``env`` (mask 0: observations, template glue), with
its token count and mean log-prob; plus reward and the environment's info. :func:`episode_record` adds what the
runner knows of a finished episode (:class:`~agent_tune.rollout.runner.EpisodeResult`): the conversation with
the prompt's end marked (``messages``, ``prompt_messages``), how it ended, its metrics and, with ``tokens``,
the token lists and each response token's text. Training's episode log (:mod:`agent_tune.rollout.records`, which
also reads every kind of record file), the eval's results file and the step dumps below all write it. A
plain-text rendering marks policy spans with ``[[`` ``]]`` for reading in a terminal.

Step dumps (the rollout-only debugging mode, :mod:`verl_ext.debug_modes`): the same records, with their token
lists, filed per trainer step under ``<dump_dir>/step_<N>/rollouts-<worker>.jsonl`` and keyed by the row
(:func:`row_key`: its ``index``, with its env and task id) and the ``sample`` number within its group
(:func:`read_step_dump`): what a replay (:mod:`verl_ext.replay_loop`) feeds back to the update instead of
generating (:data:`REPLAY_KEYS`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from agent_tune.errors import DataError
from agent_tune.rollout.episode_metrics import episode_metrics
from agent_tune.rollout.trajectory import Trajectory

if TYPE_CHECKING:
    from agent_tune.rollout.runner import EpisodeResult

# what ``tokens=True`` adds to a record: the trajectory's lists, and (episode_record) each response token's text
TOKEN_KEYS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "response_pieces")


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
    prompt: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """The JSON-serialisable record of one episode; ``tokens`` adds the trajectory's lists (ids, mask and
    the sampler's log-probs); ``prompt=False`` leaves out the prompt's text (``prompt``: a record that holds the
    conversation has its messages)."""
    record = {
        **extra,
        "reward": reward,
        "prompt_tokens": len(traj.prompt_ids),
        "response_tokens": len(traj),
        "policy_tokens": traj.num_policy_tokens,
        "truncated": traj.truncated,
        **({"prompt": decode(traj.prompt_ids)} if prompt else {}),
        "segments": segments(traj, decode),
        "info": {k: v for k, v in info.items() if _jsonable(v)},
    }
    if tokens:
        record.update(prompt_ids=list(traj.prompt_ids), response_ids=list(traj.response_ids),
                      response_mask=list(traj.response_mask), response_logprobs=list(traj.response_logprobs))
    return record


def episode_record(
    result: EpisodeResult, decode: Callable[[Sequence[int]], str], tokens: bool = False, prompt: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """The record of a finished episode: :func:`trajectory_record` of its trajectory, then

    - ``messages``: the conversation (system, user, assistant, tool), ``prompt_messages``: how many of them are
      the env's initial prompt (a worked example's assistant turns included: the policy wrote none of those);
    - ``tools``: the names of the functions offered last; ``stop_reason``, ``finish_reasons`` (per generation),
      ``num_generations``; ``metrics``: :func:`~agent_tune.rollout.episode_metrics.episode_metrics`;
    - with ``tokens``: the token lists, and ``response_pieces``, each response token's own text (decoded
      alone: a character split over two tokens shows as replacement characters in both).

    ``prompt=False`` leaves out the prompt's rendered text (the messages hold its content; training's episode log
    keeps it only beside token lists, where the token view shows it: about half a BFCL record's size).
    """
    record = trajectory_record(result.trajectory, decode, float(result.reward), result.info, tokens=tokens,
                               prompt=prompt, **extra)
    record.update(
        messages=[_jsonable_message(m) for m in result.messages],
        prompt_messages=result.prompt_messages,
        tools=[_tool_name(t) for t in result.tools or []],
        stop_reason=result.stop_reason.value,
        finish_reasons=list(result.finish_reasons),
        num_generations=result.num_generations,
        metrics=episode_metrics(result),
    )
    if tokens:
        record["response_pieces"] = [decode([t]) for t in result.trajectory.response_ids]
    return record


def _tool_name(schema: Mapping[str, Any]) -> str:
    fn = schema.get("function") if isinstance(schema, Mapping) else None
    name = (fn or schema).get("name") if isinstance(fn or schema, Mapping) else None
    return str(name if name is not None else schema)


def _jsonable_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as JSON can hold it: values JSON cannot encode become their text."""
    return {str(k): (v if _jsonable(v) else str(v)) for k, v in message.items()}


def render_text(record: Mapping[str, Any]) -> str:
    """Terminal rendering: policy tokens inside ``[[ ]]``, environment tokens as they are."""
    body = "".join(f"[[{s['text']}]]" if s["who"] == "policy" else s["text"] for s in record["segments"])
    return f"{record.get('prompt', '')}{body}\n--- reward {record['reward']}\n"


def append_jsonl(path: str | Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Append records to a jsonl file (created with its folder if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


# what a step dump's record must hold for a replay: the key, the tokens verl trains on, the reward
REPLAY_KEYS = ("global_steps", "index", "sample", "prompt_ids", "response_ids", "response_mask",
               "response_logprobs", "reward")


class DumpError(DataError, ValueError):
    """A step dump that cannot be replayed: a missing step or sample, a record without :data:`REPLAY_KEYS`, two
    records under one key."""


def row_key(index: Any, extra_info: Mapping[str, Any] | None = None) -> str:
    """How a step dump names a row: its ``extra_info.index``, with the env and task id of a catalogue row
    (``0 (bfcl:multi_turn_base_0)``). The files of a run mixing envs each count their rows from 0, so the index
    alone names several rows of a step."""
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    env = extra.get("env")
    name = env.get("name") if isinstance(env, Mapping) else None
    task_id = extra.get("id")
    return f"{index}" if name is None or task_id is None else f"{index} ({name}:{task_id})"


def sample_key(step: int, row: Any, sample: int) -> str:
    """How a dumped sample is named in messages: its trainer step, row (:func:`row_key`) and sample number."""
    return f"step {step}, row {row}, sample {sample}"


def step_dump_path(dump_dir: str | Path, step: int, worker: int | str) -> Path:
    """The file one rollout worker appends step ``step``'s records to."""
    return Path(dump_dir) / f"step_{int(step)}" / f"rollouts-{worker}.jsonl"


def dumped_steps(dump_dir: str | Path) -> list[int]:
    """The steps ``dump_dir`` holds records of (its ``step_<N>`` folders), in order."""
    folder = Path(dump_dir)
    if not folder.is_dir():
        return []
    names = (p.name.removeprefix("step_") for p in folder.glob("step_*") if p.is_dir())
    return sorted(int(n) for n in names if n.isdigit())


def _step_records(folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(folder.glob("rollouts-*.jsonl")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                where = f"{path}:{lineno}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DumpError(f"{where}: not JSON ({exc})") from None
                if not isinstance(record, dict):
                    raise DumpError(f"{where}: not a JSON object")
                yield where, record


def read_step_dump(dump_dir: str | Path, step: int) -> dict[tuple[str, int], dict[str, Any]]:
    """Step ``step``'s records in ``dump_dir``, by (row, sample number): the record's ``row`` (:func:`row_key`),
    or its ``index`` as text in a dump written before rows were named so.

    Raises:
        DumpError: the step has no folder (naming the steps there are), a record lacks one of
            :data:`REPLAY_KEYS` or was filed under another step, or two records share a key (two rows of a
            step with the same index, env and task id).
    """
    folder = Path(dump_dir) / f"step_{int(step)}"
    if not folder.is_dir():
        raise DumpError(f"no rollouts dumped for step {step} in {dump_dir} (dumped steps: "
                        f"{dumped_steps(dump_dir) or 'none'})")
    out: dict[tuple[str, int], dict[str, Any]] = {}
    seen: dict[tuple[str, int], str] = {}
    for where, record in _step_records(folder):
        missing = [k for k in REPLAY_KEYS if record.get(k) is None]
        if missing:
            raise DumpError(f"{where}: the record lacks {', '.join(missing)} (not a rollout-only dump?)")
        if int(record["global_steps"]) != int(step):
            raise DumpError(f"{where}: a record of step {record['global_steps']} in step {step}'s folder")
        key = (str(record.get("row") or record["index"]), int(record["sample"]))
        if key in out:
            raise DumpError(f"{where}: {sample_key(step, *key)} dumped twice (also {seen[key]}); the rows of a "
                            "step need distinct extra_info.index, or env and id")
        out[key], seen[key] = record, where
    return out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False
