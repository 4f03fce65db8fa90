"""The episode runner: one async loop that plays a policy against an environment, token in, token out.

The same loop serves training (verl's ``server_manager.generate`` behind a :class:`Policy`) and
evaluation (an inference server behind a :class:`Policy`). It never imports verl or vLLM.

One episode::

    prompt_ids = template(initial messages, tools) + generation prompt        (must fit max_prompt_length)
    loop:
        tokens, log-probs = policy.generate(prompt_ids + response_ids, max_tokens = budget left)
        append tokens (mask 1)                        -- exactly as sampled, end-of-turn token included
        text = decode(tokens without the end-of-turn token);  step = await env.astep(text)
        done -> stop
        chat env:  append (mask 0) [end-of-turn token if the policy stopped without it]
                                   + template delta of the new messages (+ next generation prompt)
        text env:  append (mask 0) the observation text verbatim
        token env: append (mask 0) the observation's token ids as they are

Decisions (documented here because the trainer and the evaluator rely on them):

* After the policy's end-of-turn token the template's own separator (``"\\n"`` after ``<|im_end|>``) is
  an environment token: the policy never wrote it.
* A chat turn that ends without the end-of-turn token (a stop string, a per-turn ``max_tokens`` cap, an
  EOS other than the template's end-of-turn) is closed by the runner: the end-of-turn token is appended
  with mask 0, so the context stays well-formed and equals a full re-render. Raw-text envs (ReTool) get
  their observation appended right after the stop string, with nothing added.
* Token envs (``observation_kind="tokens"``: tinker's envs, which render with their own renderer) speak token
  ids: the initial observation's ``token_ids`` are the prompt (no chat template), each step gets the
  generation's ids as sampled (``env.astep(text, token_ids)``, end-of-turn token included) besides their text,
  and the observation's ``token_ids`` are appended as they are, nothing added. The transcript is the decoded
  prompt as one user message, then one running assistant message (policy text and decoded observations), as
  for raw-text envs.
* The env's sampler hints are read after ``reset`` (an env may set its own per episode: a tinker env's stop
  condition): their stop strings and stop token ids end every generation of the episode.
* The tools the initial prompt rendered are never re-rendered: if an observation carries a longer tool
  list (BFCL miss_func), the env announces the new functions in its messages; the runner only records the
  latest list in ``EpisodeResult.tools``.
* Truncation: ``max_tokens`` of every generation is the response budget left (capped by the caller's own
  ``max_tokens`` if any). A generation that fills the budget ends the episode (``truncated=True``) without
  stepping the env on the partial text; an observation that would not fit, leaving at least one token for
  the policy, is not appended and ends the episode the same way. A policy returning more tokens than asked
  is cut to its ``max_tokens``. Masks and log-probs stay aligned in every case.
* The episode's start (``reset``, then rendering and encoding the initial prompt: ~5 ms with a tool list)
  runs off the event loop, in the runner's start thread (:func:`agent_tune.sync.start_executor`, one per process): when
  thousands of episodes start at once (``asyncio.gather``), their starts would otherwise run back-to-back in
  one loop iteration (4,096 BFCL episodes: 26 s with the loop held; ``benchmarks/episode_scale.py``). One
  thread keeps them in order, one at a time, as on the loop, while the loop goes on serving the episodes
  already started (it gets the GIL back at least every ``sys.getswitchinterval()``). Envs that declare
  ``sampler_hints.blocking_reset`` (tau2 waits for its simulated user's first message there) reset in the default
  executor instead, so a slow user never holds the start thread; their prompt is rendered in the start
  thread too.
* An episode whose ``reset`` runs out of its ``start_timeout`` (``StartTimeoutError``: the time-limit rule,
  :mod:`agent_tune.envs.time_limits`) is not played: its result has no response token, reward 0 and stop
  reason ``timeout``, so one backend that does not start never fails a training batch or an eval.
* Sampling: every generation uses the caller's ``sampling_params`` (plus the env's stop strings), except that a
  step may ask for other parameters for the next generation only (``StepResult.sampling``, laid over them;
  ``max_tokens`` stays the runner's): tau2's pipeline protocol retries a malformed action at temperature 0.
* Env steps are awaited (``BaseToolEnv.astep``): concurrency across episodes comes from the event loop
  running many episodes at once. An env whose acting hook is ``async`` (MCP, OpenEnv, verifiers, tau2's
  users, ReTool's sandbox pool) is awaited on the loop; a plain one runs in the env thread pool
  (``agent_tune.sync.env_executor``), so a blocking env never stalls the other episodes.
* Training progress: ``run_episode(global_step=...)`` hands the trainer's step to the env
  (``env.status.global_step``) before ``reset``; the verl agent loop passes verl's ``global_steps``, the
  standalone eval nothing (``None``).
* Reward: the sum of the step rewards the env returned (BFCL returns 0 until ``done``). An episode that
  ends before the env said ``done`` (the token budget, ``max_generations``, an aborted or empty generation:
  a :class:`~agent_tune.envs.base.StopReason` with ``by_runner``) is scored by
  ``env.finalize(reason)`` (``BaseToolEnv.finalize``: reward 0 by default, BFCL scores the turns played;
  sync, run in the env thread pool since scoring may block, or async), whose reward is added and whose info
  becomes the episode's info. An env object without ``finalize`` keeps the rewards so far. The episode's
  ``info["stop_reason"]`` (and ``EpisodeResult.stop_reason``) says how it ended, the env's own reason when
  the env ended it.
* Words: a *generation* is one call of the policy; a *turn* is a user turn (a question and every
  generation answering it), counted by the env (``EpisodeInfo.turns_completed``).
* Reasoning: the trajectory keeps the ``<think>`` tokens the policy generated; templates that drop earlier
  reasoning on re-render (Qwen3) make :func:`check_drift` report a difference there, by design.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from agent_tune.envs.base import BaseToolEnv, EpisodeInfo, Observation, StepResult, StopReason
from agent_tune.envs.time_limits import StartTimeoutError
from agent_tune.errors import RolloutError
from agent_tune.rollout.chat_render import ChatRenderer, DriftReport, check_drift
from agent_tune.rollout.policy import GenerationOutput, Policy
from agent_tune.rollout.trajectory import Trajectory
from agent_tune.sync import env_executor, in_thread, start_executor


class PromptTooLongError(RolloutError, ValueError):
    """The rendered initial prompt does not fit ``max_prompt_length``."""


@dataclass(frozen=True)
class RolloutLimits:
    """Token and turn budgets of one episode.

    ``max_prompt_length`` bounds the rendered initial prompt; ``max_response_length`` bounds everything
    after it (policy and env tokens); ``max_generations`` bounds the number of policy generations
    (``None``: no bound)."""

    max_prompt_length: int
    max_response_length: int
    max_generations: int | None = None

    def __post_init__(self) -> None:
        if self.max_prompt_length <= 0 or self.max_response_length <= 0:
            raise ValueError(
                f"max_prompt_length and max_response_length must be positive, got "
                f"{self.max_prompt_length} and {self.max_response_length}"
            )
        if self.max_generations is not None and self.max_generations <= 0:
            raise ValueError(f"max_generations must be positive or None, got {self.max_generations}")


@dataclass
class EpisodeResult:
    """What one episode produced: the trajectory, its reward and what the env reported."""

    trajectory: Trajectory
    reward: float
    info: dict[str, Any]
    num_generations: int  # policy generations
    messages: list[dict[str, Any]]  # the conversation as the policy saw it (assistant text as generated)
    tools: list[dict[str, Any]] | None  # the latest tool list the env announced
    finish_reasons: list[str]  # per generation: "stop" | "length" | "abort"
    stop_reason: StopReason  # how the episode ended (the env's reason when the env ended it)
    step_infos: list[dict[str, Any]] = field(default_factory=list)  # each step's own record
    episode: EpisodeInfo | None = None  # the env's typed record (``info``: it, flat, over the last step's keys)
    final_observation: Observation | None = None  # what the env answered the last step (not in the tokens)
    drift: DriftReport | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds: prompt, generate, decode, env, delta
    # where the prompt ends in ``messages``: its first ``prompt_messages`` are the env's initial conversation
    # (system, user, and any worked example's assistant and tool turns: the policy wrote none of them)
    prompt_messages: int = 0
    # the decoded text of each policy generation that produced tokens, in order (end-of-turn token left out):
    # exactly what the policy wrote, never a prompt's example turn nor, in raw-text envs, an observation
    generations: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.stop_reason is StopReason.TOKEN_BUDGET

    def __getattr__(self, name: str) -> Any:
        # only reached for a name the result lacks: say what an old name became (CHANGELOG.md, [0.1.0])
        renamed = _RENAMED_RESULT_FIELDS.get(name)
        if renamed is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(f"EpisodeResult.{name} was renamed in agent-tune 0.1.0: read EpisodeResult.{renamed} "
                             "(CHANGELOG.md)")


# EpisodeResult's fields before 0.1.0 and their names since
_RENAMED_RESULT_FIELDS = {"termination": "stop_reason", "stop_reasons": "finish_reasons"}


async def run_episode(
    env: BaseToolEnv,
    policy: Policy,
    renderer: ChatRenderer,
    limits: RolloutLimits,
    sampling_params: Mapping[str, Any] | None = None,
    task: Mapping[str, Any] | None = None,
    *,
    debug_drift: bool = False,
    stop_on_end_of_turn: bool = True,
    global_step: int | None = None,
) -> EpisodeResult:
    """Play one episode of ``env`` (reset with ``task``) with ``policy``; return its trajectory and reward.

    ``sampling_params`` use vLLM's names; the env's stop strings are added to ``stop`` and the template's
    end-of-turn token to ``stop_token_ids`` (unless ``stop_on_end_of_turn=False``); ``max_tokens`` is set
    per generation to the budget left. ``debug_drift`` re-renders the whole conversation at the end and
    stores a :class:`DriftReport` (chat envs only). ``global_step`` is the trainer's step
    (verl's ``global_steps``; ``None`` outside training), set as ``env.status.global_step`` before
    ``reset``. The env is not closed here: its owner closes it.
    """
    timings = {"prompt": 0.0, "generate": 0.0, "decode": 0.0, "env": 0.0, "delta": 0.0}
    hints = env.sampler_hints
    kind = hints.observation_kind  # read once: the runner plays the whole episode in this kind
    text_mode, token_mode = kind == "text", kind == "tokens"
    env.status.global_step = None if global_step is None else int(global_step)
    task_kwargs = dict(task or {})
    try:
        if hints.blocking_reset:
            obs = await in_thread(lambda: env.reset(**task_kwargs))  # the loop's default executor
            start = await in_thread(_start, env, obs, renderer, limits, kind, pool=start_executor())
        else:  # reset in the start thread too
            start = await in_thread(lambda: _start(env, env.reset(**task_kwargs), renderer, limits, kind),
                                    pool=start_executor())
    except StartTimeoutError as exc:  # the time-limit rule: counted, the batch goes on
        return _not_started(exc, renderer, limits, timings)
    obs, traj, messages, timings["prompt"] = start
    prompt_messages = len(obs.messages) if not token_mode else 1
    initial_tools = list(obs.tools) if obs.tools else None

    hints = env.sampler_hints  # after reset: the episode's own (a tinker env's stop condition)
    base_params = _sampling_params(sampling_params, hints.stop, hints.include_stop_str_in_output,
                                   renderer.end_of_turn_id if stop_on_end_of_turn else None, hints.stop_token_ids)
    per_turn_cap = base_params.pop("max_tokens", None)

    tools = initial_tools
    reward = 0.0
    final_info: dict[str, Any] = {}
    episode: EpisodeInfo | None = None
    step_infos: list[dict[str, Any]] = []
    finish_reasons: list[str] = []
    num_generations = 0
    generations: list[str] = []
    final_observation: Observation | None = None
    stop: StopReason | None = None
    eot = renderer.end_of_turn_id
    next_sampling: dict[str, Any] = {}  # the env's sampling for the next generation only (StepResult.sampling)

    while stop is None:
        remaining = limits.max_response_length - len(traj)
        if remaining <= 0:
            stop = StopReason.TOKEN_BUDGET
            break
        if limits.max_generations is not None and num_generations >= limits.max_generations:
            stop = StopReason.GENERATION_LIMIT
            break
        max_tokens = remaining if per_turn_cap is None else max(1, min(remaining, int(per_turn_cap)))
        t0 = time.perf_counter()
        out = await policy.generate(traj.all_ids, {**base_params, **next_sampling, "max_tokens": max_tokens})
        next_sampling = {}
        timings["generate"] += time.perf_counter() - t0
        if not isinstance(out, GenerationOutput):
            raise TypeError(f"policy.generate returned {type(out).__name__}, not GenerationOutput")
        num_generations += 1
        ids, lps = out.token_ids, out.log_probs
        if len(ids) > max_tokens:  # a policy that ignored max_tokens: cut at the limit it was given
            ids, lps = ids[:max_tokens], (lps[:max_tokens] if lps is not None else None)
        traj.append_policy(ids, lps)
        reason = _classify(out.stop_reason, ids, max_tokens, eot)
        finish_reasons.append(reason)

        t0 = time.perf_counter()
        closed = bool(ids) and ids[-1] == eot
        text = renderer.decode(ids[:-1] if closed else ids)
        timings["decode"] += time.perf_counter() - t0
        if ids:  # the transcript shows what was generated, even when the episode ends here
            generations.append(text)
            if text_mode or token_mode:
                _append_assistant_text(messages, text)
            else:
                messages.append({"role": "assistant", "content": text})
        if reason == "abort":
            stop = StopReason.ABORTED
            break
        if not ids:
            stop = StopReason.EMPTY_GENERATION
            break
        if len(traj) >= limits.max_response_length and not closed:
            stop = StopReason.TOKEN_BUDGET  # the budget ran out mid-turn: the text is unfinished
            break

        t0 = time.perf_counter()
        step = await (env.astep(text, list(ids)) if token_mode else env.astep(text))
        timings["env"] += time.perf_counter() - t0
        if not isinstance(step, StepResult):
            raise TypeError(f"{type(env).__name__}.step() returned {type(step).__name__}, not StepResult")
        reward += float(step.reward)
        step_infos.append(dict(step.info))
        if step.observation.tools is not None:
            tools = list(step.observation.tools)
        if step.done:
            final_info, episode = _episode_info(step)
            final_observation = step.observation
            stop = episode.stop_reason if episode is not None else StopReason.DONE
            break

        t0 = time.perf_counter()
        env_ids, new_messages, new_text = _observation_tokens(renderer, step.observation, kind, closed)
        timings["delta"] += time.perf_counter() - t0
        if len(traj) + len(env_ids) >= limits.max_response_length:
            stop = StopReason.TOKEN_BUDGET  # no room left for the policy after this observation
            break
        traj.append_env(env_ids)
        if step.sampling:
            next_sampling = {k: v for k, v in step.sampling.items() if k != "max_tokens"}
        messages.extend(new_messages)
        if new_text is not None:
            _append_assistant_text(messages, new_text)

    if stop.by_runner:
        t0 = time.perf_counter()
        fin = await _finalize(env, stop)
        timings["env"] += time.perf_counter() - t0
        if fin is None:  # no finalize(): the rewards so far stand, the last step's info is kept
            final_info = dict(step_infos[-1]) if step_infos else {}
        else:
            reward += float(fin.reward)
            final_info, episode = _episode_info(fin)
    final_info["stop_reason"] = stop.value
    if stop is StopReason.TOKEN_BUDGET:
        traj.truncated = True

    drift = None
    if debug_drift and not (text_mode or token_mode):
        t0 = time.perf_counter()
        drift = check_drift(renderer, traj.all_ids, messages, initial_tools, allow_prefix=traj.truncated)
        timings["drift_check"] = time.perf_counter() - t0

    return EpisodeResult(
        trajectory=traj,
        reward=reward,
        info=final_info,
        num_generations=num_generations,
        messages=messages,
        tools=tools,
        finish_reasons=finish_reasons,
        stop_reason=stop,
        step_infos=step_infos,
        episode=episode,
        final_observation=final_observation,
        drift=drift,
        timings=timings,
        prompt_messages=prompt_messages,
        generations=generations,
    )


# --------------------------------------------------------------------------- helpers
def _start(
    env: BaseToolEnv, obs: Observation, renderer: ChatRenderer, limits: RolloutLimits, kind: str
) -> tuple[Observation, Trajectory, list[dict[str, Any]], float]:
    """The episode's start from the env's initial observation: (the observation, the trajectory holding the
    rendered prompt, the transcript so far, seconds spent rendering). Runs in the start thread."""
    if not isinstance(obs, Observation):
        raise TypeError(f"{type(env).__name__}.reset() returned {type(obs).__name__}, not Observation")
    text_mode = kind == "text"
    initial_tools = list(obs.tools) if obs.tools else None
    messages: list[dict[str, Any]] = [dict(m) for m in obs.messages]
    t0 = time.perf_counter()
    if kind == "tokens":  # the env rendered its prompt itself: its tokens as they are
        if not obs.token_ids:
            raise ValueError(f"{type(env).__name__}.reset(): a token env (observation_kind='tokens') must return "
                             "its prompt as Observation.token_ids")
        prompt_ids = [int(t) for t in obs.token_ids]
        messages = [{"role": "user", "content": renderer.decode(prompt_ids)}]
    else:
        prompt_ids = renderer.render_prompt(messages, initial_tools)
    if len(prompt_ids) > limits.max_prompt_length:
        raise PromptTooLongError(
            f"initial prompt has {len(prompt_ids)} tokens, max_prompt_length is {limits.max_prompt_length}"
        )
    traj = Trajectory(prompt_ids)
    if obs.text and kind != "tokens":
        traj.append_env(renderer.encode(obs.text))
        if text_mode:
            messages.append({"role": "assistant", "content": obs.text})
    return obs, traj, messages, time.perf_counter() - t0


def _not_started(exc: StartTimeoutError, renderer: ChatRenderer, limits: RolloutLimits,
                 timings: dict[str, float]) -> EpisodeResult:
    """The record of an episode whose ``reset`` ran out of ``start_timeout``: nothing was played (no response
    token, reward 0), stop reason ``timeout``, the error in ``info["error"]``. Its prompt is the error as a user
    message (cut to ``max_prompt_length``): a trainer needs prompt tokens, and a reader sees why."""
    error = str(exc)
    messages = [{"role": "user", "content": f"(the episode did not start: {error})"}]
    episode = EpisodeInfo(accuracy=0.0, progress=0.0, format_errors=0, num_steps=0, num_calls=0, turns_completed=0,
                          stop_reason=StopReason.TIMEOUT, extras={"error": error})
    return EpisodeResult(
        trajectory=Trajectory(renderer.render_prompt(messages, None)[: limits.max_prompt_length]),
        reward=0.0, info=episode.as_dict(), num_generations=0, messages=messages, tools=None, finish_reasons=[],
        stop_reason=StopReason.TIMEOUT, episode=episode, timings=timings, prompt_messages=len(messages),
    )


def _sampling_params(
    given: Mapping[str, Any] | None,
    env_stop: tuple[str, ...],
    include_stop: bool,
    end_of_turn_id: int | None,
    env_stop_ids: tuple[int, ...] = (),
) -> dict[str, Any]:
    params = dict(given or {})
    stop = params.get("stop") or []
    stop = [stop] if isinstance(stop, str) else list(stop)
    for s in env_stop:
        if s not in stop:
            stop.append(s)
    if stop:
        params["stop"] = stop
        if env_stop:
            params.setdefault("include_stop_str_in_output", include_stop)
    wanted = ([] if end_of_turn_id is None else [end_of_turn_id]) + [int(t) for t in env_stop_ids]
    if wanted:
        ids = list(params.get("stop_token_ids") or [])
        ids += [t for t in dict.fromkeys(wanted) if t not in ids]
        params["stop_token_ids"] = ids
    return params


def _classify(reported: str, ids: list[int], max_tokens: int, eot: int) -> str:
    """The effective stop reason: samplers such as verl report "completed" for both stop and length, and
    "aborted" for a generation a weight sync interrupted (verl's vLLM server; with partial rollout verl's
    client resumes it before the runner sees it)."""
    if reported in ("abort", "aborted"):
        return "abort"
    if ids and ids[-1] == eot:
        return "stop"
    if reported == "length" or len(ids) >= max_tokens:
        return "length"
    return "stop"


def _observation_tokens(
    renderer: ChatRenderer, obs: Observation, kind: str, closed: bool
) -> tuple[list[int], list[dict[str, Any]], str | None]:
    """Env tokens for an observation, the messages it adds to the transcript and its raw text (if any)."""
    if kind == "tokens":
        ids = [int(t) for t in obs.token_ids or []]
        return ids, [], renderer.decode(ids)
    text_mode = kind == "text"
    if text_mode and obs.text is not None:
        return renderer.encode(obs.text), [], obs.text
    if obs.text is not None and not obs.messages:
        raise ValueError("a chat env (observation_kind='messages') returned a raw-text observation")
    new = [dict(m) for m in obs.messages]
    ids = [] if closed else renderer.close_turn_ids()
    ids += renderer.render_delta(new)
    return ids, new, None


def _append_assistant_text(messages: list[dict[str, Any]], text: str) -> None:
    """Raw-text episodes keep one running assistant message (policy text and observations interleaved)."""
    if messages and messages[-1].get("role") == "assistant":
        messages[-1]["content"] += text
    else:
        messages.append({"role": "assistant", "content": text})


def _episode_info(step: StepResult) -> tuple[dict[str, Any], EpisodeInfo | None]:
    """The episode's record from the step that ended it: its ``EpisodeInfo`` over the step's own keys (so
    ``format_errors`` is the episode's total), and the typed record; an env without one: its info as is."""
    if step.episode is None:
        return dict(step.info), None
    return {**step.info, **step.episode.as_dict()}, step.episode


async def _finalize(env: BaseToolEnv, reason: StopReason) -> StepResult | None:
    """Call ``env.finalize(reason)`` if the env has one (sync or async); ``None`` if it has none."""
    fin = getattr(env, "finalize", None)
    if fin is None:
        return None
    if inspect.iscoroutinefunction(fin):
        result = await fin(reason)
    else:  # scoring may block (a verifier, tau2's evaluator)
        result = await in_thread(fin, reason, pool=env_executor())
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, StepResult):
        raise TypeError(f"{type(env).__name__}.finalize() returned {type(result).__name__}, not StepResult")
    return result
