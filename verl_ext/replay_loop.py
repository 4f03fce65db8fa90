"""The agent loops of T3RL's debugging modes (``agent_tune.debug``; :mod:`verl_ext.debug_modes` installs them).

- :class:`RecordingLoop` (rollout-only): agent-tune's own loop (:class:`verl_ext.agent_loop.AgentTuneLoop`,
  unchanged: same env, runner, sampling), and every sample it returns to verl written to the step dump
  ``<agent_tune.debug.dump_dir>/step_<N>/rollouts-<pid>.jsonl`` (:func:`agent_tune.rollout.dump.step_dump_path`):
  the episode record of :func:`agent_tune.rollout.dump.episode_record` with its token lists (prompt and
  response ids, loss mask, the sampler's log-probs), plus its key (``global_steps``, the row's ``index`` and
  ``row``: :func:`agent_tune.rollout.dump.row_key`, the ``sample`` number in its group), verl's ``uid``,
  ``num_turns``, the episode ``metrics`` verl got as ``reward_extra_info`` and the loop's samples record
  (``sample_record``:
  :class:`verl_ext.sample_records.SampleRecord`). The parent loop writes its episode record and samples record
  to files; each episode points them at a private folder, reads them back, and forwards them where the run
  wants them (``sample_metrics_dir``, ``dump_rollouts_dir``) unchanged.
- :class:`ReplayLoop` (replay): generates nothing; returns to verl exactly what the dump of
  ``agent_tune.debug.replay_dir`` holds for the same step, row and sample number (:func:`replay_output`), and
  files the recorded samples record under this run's step and group. :class:`ReplayAgentLoopManager` checks,
  in the trainer process before a step's rows are dispatched, that every sample of the step was dumped: a missing
  one stops the run naming it (a loop's own error would only drop its group: verl's sync trainer trains on).

Both need verl's v1 trainer, whose rows carry ``global_steps`` and whose samples carry ``session_id`` (the
sample number).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

from agent_tune.options import options_of
from agent_tune.rollout.dump import (
    TOKEN_KEYS,
    DumpError,
    append_jsonl,
    read_step_dump,
    row_key,
    sample_key,
    step_dump_path,
)

# A worker loads the mode's agent loop file (agent_tune -> one of the loops below) into verl's registry before it
# builds a loop; building the first one imports this module, and with it verl_ext.agent_loop, whose
# @register("agent_tune") would put agent-tune's own loop back under that name for every later sample. The entry
# the file made is kept (measured: without this, only a worker's first sample was recorded).
_FILE_ENTRY = _agent_loop_registry.get("agent_tune")

from verl_ext.agent_loop import LOOP_NAME, AgentTuneLoop, group_id, trainer_step  # noqa: E402
from verl_ext.sample_records import SampleRecord, read_appended  # noqa: E402

if _FILE_ENTRY is not None:
    _agent_loop_registry[LOOP_NAME] = _FILE_ENTRY

WEIGHT_VERSION_KEYS = ("min_global_steps", "max_global_steps")  # verl's weight versions of a sample's generations
RECORD_LOOP = "agent_tune_record"
REPLAY_LOOP = "agent_tune_replay"


def sample_ids(kwargs: Mapping[str, Any]) -> tuple[int, str, int]:
    """A sample's key in a step dump: (trainer step, row, sample number), from the row kwargs verl's v1 trainer
    passes (``global_steps``; ``index``, the row's ``extra_info.index``, named with its env and task id by
    :func:`~agent_tune.rollout.dump.row_key`; ``session_id``)."""
    step, index = trainer_step(kwargs), _row_index(kwargs)
    sample = kwargs.get("session_id")
    if step is None or index is None or sample is None:
        raise DumpError(f"step dumps need the trainer step, the row index and the sample number of each sample "
                        f"(verl's v1 trainer passes them); got global_steps={step!r}, index={index!r}, "
                        f"session_id={sample!r}")
    return step, row_key(int(index), kwargs.get("extra_info")), int(sample)


def _row_index(kwargs: Mapping[str, Any]) -> Any:
    return kwargs.get("index", (kwargs.get("extra_info") or {}).get("index"))


def _jsonl_records(folder: str, prefix: str) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(Path(folder).glob(f"{prefix}-*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@register(RECORD_LOOP)
class RecordingLoop(AgentTuneLoop):
    """agent-tune's loop, each sample also written to the step dump (rollout-only mode)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        options = self.options
        dump_dir = options.debug.dump_dir
        if not dump_dir:
            raise DumpError("agent_tune.debug.dump_dir is not set (verl_ext.debug_modes.prepare sets it)")
        step, row, sample = sample_ids(kwargs)
        pid = os.getpid()
        with tempfile.TemporaryDirectory(prefix="agent-tune-record-") as private:
            # this loop object plays one episode: its options point the parent's record files here
            self.options = options.model_copy(update={"sample_metrics_dir": private, "dump_rollouts_dir": private,
                                                         "dump_rollout_tokens": True})
            try:
                output = await super().run(sampling_params, **kwargs)
            finally:
                self.options = options
            samples = read_appended(Path(private), {})
            episodes = _jsonl_records(private, "rollouts")
        if len(samples) != 1 or len(episodes) != 1:
            raise DumpError(f"{sample_key(step, row, sample)}: the agent loop wrote {len(samples)} samples "
                            f"record(s) and {len(episodes)} episode record(s), expected one of each")
        if options.sample_metrics_dir:
            append_jsonl(os.path.join(options.sample_metrics_dir, f"samples-{pid}.jsonl"), [samples[0].as_dict()])
        if options.dump_rollouts_dir:
            episode = episodes[0] if options.dump_rollout_tokens else {
                k: v for k, v in episodes[0].items() if k not in TOKEN_KEYS}
            append_jsonl(os.path.join(options.dump_rollouts_dir, f"rollouts-{pid}.jsonl"), [episode])
        record = {
            **episodes[0], "global_steps": step, "index": int(_row_index(kwargs)), "row": row, "sample": sample,
            "uid": str(kwargs.get("uid")),
            "num_turns": output.num_turns,
            "metrics": dict(output.extra_fields.get("reward_extra_info") or {}),
            "sample_record": samples[0].as_dict(),
            # the policy versions that generated it (verl's staleness metrics read them back at replay)
            "weight_versions": {k: output.extra_fields.get(k) for k in WEIGHT_VERSION_KEYS},
        }
        append_jsonl(step_dump_path(dump_dir, step, pid), [record])
        return output


# replay: one step's dump per process, read once (verl builds a loop per sample; a sync trainer plays a step's
# samples before the next step's)
_STEP_CACHE: dict[str, tuple[int, dict[tuple[str, int], dict[str, Any]]]] = {}


def step_samples(replay_dir: str, step: int) -> dict[tuple[str, int], dict[str, Any]]:
    """Step ``step``'s dumped samples in ``replay_dir`` by (row, sample number), cached per process (the latest
    step only)."""
    cached = _STEP_CACHE.get(replay_dir)
    if cached is None or cached[0] != step:
        cached = (step, read_step_dump(replay_dir, step))
        _STEP_CACHE[replay_dir] = cached
    return cached[1]


def replay_sample(replay_dir: str, step: int, row: str, sample: int) -> dict[str, Any]:
    """The record dumped for (``step``, ``row``, ``sample``). Raises :class:`DumpError` naming a missing one."""
    samples = step_samples(replay_dir, step)
    record = samples.get((row, sample))
    if record is None:
        rows = sorted({r for r, _ in samples})
        raise DumpError(f"replay: no dumped sample for {sample_key(step, row, sample)} in "
                        f"{Path(replay_dir) / f'step_{step}'} ({len(samples)} samples there, rows {rows}); replay "
                        "with the rollout-only run's data, data.seed, data.train_batch_size and rollout.n")
    return record


def replay_output(record: Mapping[str, Any]) -> AgentLoopOutput:
    """What verl gets for a dumped sample: its token ids, loss mask, rollout log-probs, reward, turn count,
    episode metrics (``reward_extra_info``) and the weight versions that generated it, as recorded."""
    versions = record.get("weight_versions") or {}
    missing = [k for k in WEIGHT_VERSION_KEYS if versions.get(k) is None]
    if missing:
        key = sample_key(record["global_steps"], record.get("row") or record["index"], record["sample"])
        raise DumpError(f"replay: the dumped sample {key} has no {' or '.join(missing)} (verl's trainer needs the "
                        "weight versions that generated it): dump it again with this version's rollout-only mode")
    return AgentLoopOutput(
        prompt_ids=list(record["prompt_ids"]),
        response_ids=list(record["response_ids"]),
        response_mask=list(record["response_mask"]),
        response_logprobs=list(record["response_logprobs"]),
        reward_score=float(record["reward"]),
        num_turns=int(record.get("num_turns") or 0),
        metrics=AgentLoopMetrics(),
        extra_fields={"reward_extra_info": dict(record.get("metrics") or {}), "env_name": str(record.get("env")),
                      **{k: int(versions[k]) for k in WEIGHT_VERSION_KEYS}},
    )


@register(REPLAY_LOOP)
class ReplayLoop(AgentTuneLoop):
    """Returns the dumped sample of the same step, row and sample number instead of generating (replay mode)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        replay_dir = self.options.debug.replay_dir
        if not replay_dir:
            raise DumpError("agent_tune.debug.replay_dir is not set")
        step, row, sample = sample_ids(kwargs)
        record = replay_sample(replay_dir, step, row, sample)
        samples_dir = self.options.sample_metrics_dir
        if samples_dir and record.get("sample_record"):
            # this run's step and group: the step metrics and the curriculum see the replayed samples
            sample_rec = SampleRecord.from_dict(record["sample_record"])
            sample_rec.global_steps, sample_rec.group = step, group_id(kwargs)
            append_jsonl(os.path.join(str(samples_dir), f"samples-{os.getpid()}.jsonl"), [sample_rec.as_dict()])
        return replay_output(record)


def missing_samples(replay_dir: str, step: int, rows: list[str], n: int) -> list[str]:
    """The samples a step of ``rows`` (:func:`~agent_tune.rollout.dump.row_key`) x ``n`` samples needs that
    ``replay_dir`` lacks, named."""
    samples = step_samples(replay_dir, step)
    return [sample_key(step, r, s) for r in dict.fromkeys(rows) for s in range(n) if (r, s) not in samples]


class ReplayAgentLoopManager(AgentLoopManagerTQ):
    """verl's v1 agent loop manager (``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` in replay mode):
    before dispatching a step's training rows it checks that the dump holds all their samples, in the trainer
    process, so a missing sample stops the run (:class:`DumpError` naming it)."""

    def generate_sequences(self, prompts: Any) -> None:
        if not _flag(prompts, "validate"):
            replay_dir = str(options_of(self.config).debug.replay_dir)
            step = int(_value(prompts, "global_steps"))
            indexes = [int(i) for i in _value(prompts, "index")]
            extras = _value(prompts, "extra_info") if "extra_info" in prompts.keys() else [None] * len(indexes)
            rows = [row_key(i, e) for i, e in zip(indexes, extras)]
            missing = missing_samples(replay_dir, step, rows, int(self.config.actor_rollout_ref.rollout.n))
            if missing:
                shown = "; ".join(missing[:8]) + (f"; ... ({len(missing)} in all)" if len(missing) > 8 else "")
                raise DumpError(f"replay: {replay_dir} has no dumped sample for {shown}; replay with the "
                                "rollout-only run's data, data.seed, data.train_batch_size and rollout.n")
        super().generate_sequences(prompts)


def _value(batch: Any, key: str) -> Any:
    """A non-tensor entry of verl's TensorDict batch: the value, or a list of the per-row values."""
    value = batch[key]
    value = getattr(value, "data", value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value) if isinstance(value, list) else value


def _flag(batch: Any, key: str) -> bool:
    return key in batch.keys() and bool(_value(batch, key))
