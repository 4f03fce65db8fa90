"""verl agent loop ``agent_tune``: builds the row's environment and plays it with agent-tune's runner.

A dataset row names its loop (``agent_name: agent_tune``) and its environment
(``extra_info.env = {name, kwargs}``). This loop adapts; it decides nothing: the environment comes
from the registry and is reset with the row's ``extra_info`` as the task, the episode from
:func:`agent_tune.rollout.run_episode` (the same runner the standalone eval uses), generation from
verl's ``server_manager.generate`` (token in, token out), whichever rollout engine serves it: the runner's
sampling parameters (vLLM's names) are renamed for the engine that needs it (:data:`ENGINE_SAMPLING_PARAMS`:
SGLang, ``actor_rollout_ref.rollout.name=sglang``).

Options live under ``agent_tune:`` in the trainer config (``config/base/agent_tune.yaml``):
``template`` (chat template name, ``tokenizer`` = the model's own), ``chat_template_kwargs``,
``tool_parser`` and ``reasoning_parser`` / ``reasoning_tags`` (given to envs that take them), ``max_generations``,
``env_kwargs`` (per environment name, defaults under each row's kwargs), ``debug_drift``, and
``dump_rollouts_dir``: every episode appended, mask shown, to ``<dir>/rollouts-<pid>.jsonl`` (one file
per agent-loop worker), with the trainer step that generated it, and with ``dump_rollout_tokens`` its token
lists (ids, mask, the sampler's log-probs). With ``trainer.val_only=true`` that is a rollout-only debug run: no update.
``worker_gc`` (``{freeze, gen2_threshold}``): the garbage-collector settings of the worker process, applied
when the process builds its first loop (:func:`agent_tune.rollout.worker_gc.apply_worker_gc`, once per process):
its start-up heap frozen, full collections rarer; a missing key leaves the collector as Python sets it.
``sample_metrics_dir`` (set by the launcher): every episode's metrics, with the trainer step that
trains it (:func:`sample_step`), the row's ``extra_info.split`` and its task key, appended to
``<dir>/samples-<pid>.jsonl``; the launcher turns them into per-step metrics (verl's own step metrics do not
carry them), and the task weighting (:mod:`verl_ext.task_weighting`) into per-task sampling weights.
``episodes`` (``{enable, dir, tokens_every}``, :class:`agent_tune.rollout.records.EpisodeRecording`; the launcher
sets ``dir``): every episode's record (:func:`training_episode_record`) appended as its own gzip member to
``<dir>/episodes-<pid>.jsonl.gz``, what ``agent-tune view`` shows; a group's records go out together when its
samples in this worker have ended (:func:`episode_recorder`), token lists for groups that carried signal.
"""

from __future__ import annotations

import inspect
import os
import uuid
from typing import Any, Callable, Mapping

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import SPEC_DECODE_EXTRA_KEYS

from agent_tune.envs import get_env_class
from agent_tune.envs.tasks import row_env, row_task
from agent_tune.options import AgentTuneOptions, options_of, parse_options
from agent_tune.rollout import (
    ChatRenderer,
    EpisodeResult,
    GenerationOutput,
    PromptTooLongError,
    RolloutLimits,
    run_episode,
)
from agent_tune.rollout.dump import append_jsonl, episode_record
from agent_tune.rollout.episode_metrics import episode_metrics
from agent_tune.rollout.records import EpisodeRecording, GroupRecorder
from agent_tune.rollout.sglang_protocol import sglang_sampling_params
from agent_tune.rollout.worker_gc import apply_worker_gc
from verl_ext.sample_records import SampleRecord
from verl_ext.task_weighting import task_key

LOOP_NAME = "agent_tune"

SamplingTranslation = Callable[[Mapping[str, Any]], dict[str, Any]]


def _sglang_server_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The runner's sampling parameters (vLLM's names) as verl's SGLang server passes them on: it reads
    ``max_new_tokens`` (or ``max_tokens``) and ``logprobs`` itself and hands the rest to SGLang's
    ``SamplingParams``, which refuses any name it does not know (``include_stop_str_in_output``: ``TypeError``)."""
    out, logprobs = sglang_sampling_params(params)
    if logprobs is not None:
        out["logprobs"] = logprobs
    return out


# How the sampling parameters reach verl's rollout server of each engine (``actor_rollout_ref.rollout.name``); an
# engine not listed takes vLLM's names as they are (vllm).
ENGINE_SAMPLING_PARAMS: dict[str, SamplingTranslation] = {"sglang": _sglang_server_params}


def engine_sampling_params(engine: str | None) -> SamplingTranslation | None:
    """The translation of sampling parameters for rollout engine ``engine`` (``None``: none needed)."""
    return ENGINE_SAMPLING_PARAMS.get(str(engine)) if engine is not None else None


class VerlServerPolicy:
    """agent-tune ``Policy`` over verl's ``server_manager`` (one request id per episode, for prefix caching).

    ``translate``: how the runner's sampling parameters (vLLM's names) become the engine's
    (:func:`engine_sampling_params`; ``None``: passed as they are). It also keeps what verl's trainer expects back
    from the episode's generations, merged as verl's own loops merge them: the server's ``extra_fields`` (weight
    versions ``min_global_steps`` from the first generation, the latest ``max_global_steps``; speculative-decoding
    counters summed) and the number of preemptions.
    """

    def __init__(self, server_manager: Any, request_id: str, translate: SamplingTranslation | None = None) -> None:
        self.server_manager = server_manager
        self.request_id = request_id
        self.translate = translate
        self.extra_fields: dict[str, Any] = {}
        self.num_preempted = -1

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        params = self.translate(sampling_params) if self.translate is not None else dict(sampling_params)
        out = await self.server_manager.generate(
            request_id=self.request_id, prompt_ids=list(prompt_ids), sampling_params=params
        )
        self._merge(dict(getattr(out, "extra_fields", None) or {}), getattr(out, "num_preempted", None))
        return GenerationOutput(token_ids=out.token_ids, log_probs=out.log_probs, stop_reason=out.stop_reason)

    def _merge(self, fields: dict[str, Any], preempted: int | None) -> None:
        if self.num_preempted < 0:
            self.num_preempted = preempted if preempted is not None else -1
        elif preempted:
            self.num_preempted += preempted
        if not self.extra_fields:
            self.extra_fields = fields
            return
        if fields.get("max_global_steps"):
            self.extra_fields["max_global_steps"] = fields["max_global_steps"]
        for key in SPEC_DECODE_EXTRA_KEYS:
            if key in fields and key in self.extra_fields:
                self.extra_fields[key] = int(self.extra_fields[key]) + int(fields[key])


def env_kwargs_for(name: str, row_kwargs: Mapping[str, Any],
                   options: AgentTuneOptions | Mapping[str, Any]) -> dict[str, Any]:
    """Row kwargs over config defaults for that env; parser names go to envs whose constructor takes them.
    ``options``: the ``agent_tune`` block, parsed (:func:`agent_tune.options.parse_options`) or as a mapping."""
    if not isinstance(options, AgentTuneOptions):
        options = parse_options(options)
    cls = get_env_class(name)
    params = inspect.signature(cls.__init__).parameters
    kwargs: dict[str, Any] = {}
    for key, value in (("tool_parser", options.tool_parser), ("reasoning_parser", options.reasoning_parser_spec)):
        if value is not None and key in params:
            kwargs[key] = value
    kwargs.update(options.env_kwargs.get(name) or {})
    kwargs.update(row_kwargs)
    return kwargs


def group_id(kwargs: Mapping[str, Any]) -> str:
    """What identifies the sample's GRPO group: verl's ``uid`` (shared by the n samples of a prompt),
    else the trainer step and the row's index."""
    if kwargs.get("uid") is not None:
        return str(kwargs["uid"])
    extra = kwargs.get("extra_info") or {}
    return f"{kwargs.get('global_steps')}:{extra.get('index', kwargs.get('index'))}"


def trainer_step(kwargs: Mapping[str, Any]) -> int | None:
    """The trainer's global step that generates this sample: verl's ``global_steps`` (its v1 trainer puts it
    in every row it dispatches, training and validation); ``None`` when absent (verl's legacy trainer keeps
    it in the batch's meta_info only)."""
    step = kwargs.get("global_steps")
    return None if step is None else int(step)


def sample_step(kwargs: Mapping[str, Any], extra_fields: Mapping[str, Any]) -> int | None:
    """The trainer step an episode record is filed under: verl's ``global_steps`` row kwarg (v1 trainer), else
    the first step that can train on the episode, one past the newest weight version it was generated with
    (``max_global_steps``, else ``min_global_steps``).

    verl's legacy, one-step-off and fully-async trainers pass no step to the loop; their servers carry the
    version of the last weight sync, and every one of them pushes version ``k`` after the update it logs as
    step ``k``. So the batch trained at step ``k`` was generated with version ``k - 1`` (legacy, one-step-off:
    exactly; fully-async: at most ``k - 1``, older by up to its staleness bound, so an episode is filed at the
    earliest step that could have taken it)."""
    step = trainer_step(kwargs)
    if step is None:
        version = extra_fields.get("max_global_steps", extra_fields.get("min_global_steps"))
        if version is not None:
            step = int(version) + 1
    return step


def collapse_fields(kwargs: Mapping[str, Any], step_infos: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-episode fields for collapse monitoring, next to the episode metrics (the step metrics aggregate them
    per step): the GRPO group, the calls the env ran (``calls`` of its step infos: the valid ones), and the
    generations whose step reported a format error (a step's ``format_errors`` is always its own,
    :class:`agent_tune.envs.base.StepResult`)."""
    errors = [int(s.get("format_errors") or 0) for s in step_infos]
    return {
        "group": group_id(kwargs),
        "valid_calls": sum(len(s.get("calls") or []) for s in step_infos),
        "format_error_generations": sum(1 for e in errors if e > 0),
    }


def sample_record(result: EpisodeResult, kwargs: Mapping[str, Any], extra_fields: Mapping[str, Any]) -> SampleRecord:
    """The episode's record for ``sample_metrics_dir`` (:class:`verl_ext.sample_records.SampleRecord`): the row's
    step (:func:`sample_step`, from its kwargs and the policy's ``extra_fields``), split, data source and task key
    (``kwargs["extra_info"]``), the reward and token lengths, :func:`episode_metrics` and :func:`collapse_fields`."""
    extra = kwargs.get("extra_info") or {}
    traj = result.trajectory
    data_source = kwargs.get("data_source")
    return SampleRecord(
        global_steps=sample_step(kwargs, extra_fields), split=str(extra.get("split") or "train"),
        data_source=None if data_source is None else str(data_source), task=task_key(extra),
        reward=float(result.reward), prompt_length=len(traj.prompt_ids), response_length=len(traj),
        **episode_metrics(result), stop_reason=result.stop_reason.value,
        **collapse_fields(kwargs, result.step_infos),
    )


def training_episode_record(result: EpisodeResult, kwargs: Mapping[str, Any], extra_fields: Mapping[str, Any],
                            env_name: str, tokens: bool, decode: Any) -> dict[str, Any]:
    """The episode's record for the run's episode log (``agent_tune.episodes``,
    :func:`agent_tune.rollout.dump.episode_record`) with what places it in training: the trainer step
    (:func:`sample_step`), its GRPO group (:func:`group_id`; verl's ``uid``), the row's index, the sample's number
    in its group (verl's ``session_id``), split, data source and task key; with ``tokens`` (the group was chosen:
    :class:`agent_tune.rollout.records.TokenChoice`) token lists and the prompt's text (the others' prompt is in
    their messages)."""
    extra = kwargs.get("extra_info") or {}
    group = group_id(kwargs)
    data_source = kwargs.get("data_source")
    sample = kwargs.get("session_id")
    return episode_record(
        result, decode, tokens=tokens, prompt=tokens,
        global_steps=sample_step(kwargs, extra_fields), group=group, uid=kwargs.get("uid"),
        index=extra.get("index", kwargs.get("index")), sample=None if sample is None else int(sample),
        env=env_name, split=str(extra.get("split") or "train"),
        data_source=None if data_source is None else str(data_source), task=task_key(extra),
    )


# The episode log's writer of each process, by file (one per process: the file name holds the pid). verl builds a
# loop per episode, so the groups' held records live with the process, not with a loop.
_RECORDERS: dict[str, GroupRecorder] = {}


def episode_recorder(recording: EpisodeRecording) -> GroupRecorder | None:
    """This process's writer of the run's episode log (``None``: recording off)."""
    path = recording.path()
    if path is None:
        return None
    recorder = _RECORDERS.get(str(path))
    if recorder is None:
        recorder = _RECORDERS[str(path)] = GroupRecorder(path, recording.tokens_every)
    return recorder


@register(LOOP_NAME)
class AgentTuneLoop(AgentLoopBase):
    """Plays one row's environment with agent-tune's episode runner."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl's own tool list: agent-tune environments bring their tools
        super().__init__(*args, **kwargs)
        # the block typed (agent_tune/options.py), as the launcher parsed it at start-up
        self.options: AgentTuneOptions = options_of(self.config)
        # verl builds a loop per episode; the first one in a worker process comes once its start-up is done
        # (verl, torch, the tokenizer loaded): the collector's settings are applied then, once per process
        apply_worker_gc(self.options.worker_gc)
        self.renderer = ChatRenderer(
            self.tokenizer,
            template=self.options.template or None,
            chat_template_kwargs=dict(self.options.chat_template_kwargs),
        )
        self.limits = RolloutLimits(
            max_prompt_length=int(self.rollout_config.prompt_length),
            max_response_length=int(self.rollout_config.response_length),
            max_generations=self.options.max_generations,
        )

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        recorder = episode_recorder(self.options.episodes)
        if recorder is None:
            return await self._play(sampling_params, None, kwargs)
        group = group_id(kwargs)
        recorder.begin(group)  # before the first await: every sample of the batch has begun before one ends
        try:
            return await self._play(sampling_params, recorder, kwargs)
        finally:
            recorder.release(group)  # the group's records go out when its last sample here is done

    async def _play(self, sampling_params: dict[str, Any], recorder: GroupRecorder | None,
                    kwargs: dict[str, Any]) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        try:
            name, row_kwargs = row_env(extra)
        except ValueError as exc:
            raise ValueError(f"{exc} for agent loop {LOOP_NAME!r}") from None
        env = get_env_class(name)(**env_kwargs_for(name, row_kwargs, self.options))
        policy = VerlServerPolicy(self.server_manager, uuid.uuid4().hex,
                                  engine_sampling_params(self.rollout_config.get("name")))
        try:
            result = await run_episode(
                env, policy, self.renderer, self.limits, sampling_params, task=row_task(extra),
                debug_drift=self.options.debug_drift, global_step=trainer_step(kwargs),
            )
        except PromptTooLongError as exc:
            raise PromptTooLongError(
                f"{exc} (row {extra.get('index')!r}, env {name!r}): raise data.max_prompt_length "
                "(the rendered prompt includes the tool list) or use a more compact template"
            ) from None
        finally:
            env.close()
        traj = result.trajectory
        # the same keys for every env (agent_tune.rollout.episode_metrics), so verl can stack them: they
        # reach the step metrics and, on the validation split, per-data-source validation metrics
        metrics = episode_metrics(result)
        extra_fields: dict[str, Any] = {**policy.extra_fields, "reward_extra_info": metrics, "env_name": name}
        if result.drift is not None:
            extra_fields["drift"] = str(result.drift)
        samples_dir = self.options.sample_metrics_dir
        if samples_dir:
            sample = sample_record(result, kwargs, policy.extra_fields)
            append_jsonl(os.path.join(str(samples_dir), f"samples-{os.getpid()}.jsonl"), [sample.as_dict()])
        dump_dir = self.options.dump_rollouts_dir
        if dump_dir:
            record = episode_record(result, self.renderer.decode, tokens=self.options.dump_rollout_tokens,
                                    env=name, index=extra.get("index"), global_steps=kwargs.get("global_steps"))
            append_jsonl(os.path.join(str(dump_dir), f"rollouts-{os.getpid()}.jsonl"), [record])
        if recorder is not None:  # the run's episode log (agent_tune.rollout.records)
            fields = policy.extra_fields
            recorder.add(group_id(kwargs), sample_step(kwargs, fields), float(result.reward),
                         lambda tokens: training_episode_record(result, kwargs, fields, name, tokens,
                                                                self.renderer.decode))
        return AgentLoopOutput(
            prompt_ids=list(traj.prompt_ids),
            response_ids=list(traj.response_ids),
            response_mask=list(traj.response_mask),
            response_logprobs=list(traj.response_logprobs),
            reward_score=float(result.reward),
            num_turns=result.num_generations * 2 + 1,  # verl's "turns" count user, assistant and tool messages
            metrics=AgentLoopMetrics(
                generate_sequences=result.timings.get("generate", 0.0),
                tool_calls=result.timings.get("env", 0.0),
                num_preempted=policy.num_preempted,
            ),
            extra_fields=extra_fields,
        )
