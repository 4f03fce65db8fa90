"""Run an env's tasks against an OpenAI-compatible server with the shared episode runner.

The entries are :class:`~agent_tune.eval.task_rows.TaskRow` s: an env's catalogue tasks (``agent-tune eval --env
NAME``: BFCL's multi-turn entries played by ``bfcl`` in eval mode, its single-turn ones by ``toolcall``,
tau2-bench's tasks by ``tau2``, any plug-in's) or the rows of a training file (``--rows``: each row names its
env). Before the first episode the env's own start-up check runs on the run's kwargs (``check_kwargs``: for
tau2, the user server's health check). Every episode goes through :func:`agent_tune.rollout.run_episode`, the
loop training uses; this module only schedules episodes (a concurrency limit), feeds them a server-backed policy,
and appends one record per finished episode to the results file (:class:`~agent_tune.eval.store.ResultStore`;
the env's report may add fields of its own, ``record_fields``: tau2's ``SimulationRun``), so a killed run resumes
where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from agent_tune.envs import get_env_class, make_env
from agent_tune.envs.base import StopReason
from agent_tune.envs.tasks import eval_kwargs, select_tasks
from agent_tune.errors import RolloutError
from agent_tune.eval.client import ModelInfo, OpenAIClient, RequestError, RetryPolicy, ServerUnavailableError
from agent_tune.eval.policies import (
    ChatCompletionsPolicy,
    MessageLedger,
    TokenIdsUnavailableError,
    UsageCounter,
    reasoning_tags,
)
from agent_tune.eval.rft import RFTFilter, RFTWriter, rft_row
from agent_tune.eval.servers import check_mode, get_server_api
from agent_tune.eval.store import ResultStore
from agent_tune.eval.task_rows import TaskRow, catalogue_task_rows, load_task_rows, row_env_kwargs
from agent_tune.parsing import get_tool_parser
from agent_tune.rollout import ChatRenderer, EpisodeResult, Policy, PromptTooLongError, RolloutLimits, run_episode
from agent_tune.rollout.dump import episode_record
from agent_tune.rollout.episode_metrics import METRIC_KEYS, episode_metrics
from agent_tune.utils.run_lock import RunLock

MODES = ("tokens", "chat")
ROWS_ENV = "rows"  # EvalSettings.env of a run on training rows: each row names its own env
# Without a known context length (a server that does not report one and no --max-model-len).
UNBOUNDED_CONTEXT = 1 << 20


@dataclass
class EvalSettings:
    """Everything that defines an evaluation run (CLI flags map onto these fields one to one)."""

    base_url: str
    model: str
    env: str = "bfcl"  # the env of the entries (a registered name or module:Class path); "rows": each row's own
    mode: str = "tokens"
    api: str = "openai"  # the server's API (agent_tune.eval.servers): openai (/v1) or sglang (native /generate)
    tokenizer: str | None = None
    template: str = "tokenizer"
    tool_parser: str = "hermes"
    reasoning_parser: str = "none"
    concurrency: int = 16
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None  # None: not sent (the server's default: all tokens)
    max_tokens: int | None = 2048  # per generation
    max_model_len: int | None = None  # None: as the server reports it
    seed: int | None = None
    timeout: float = 600.0
    max_retries: int = 5
    api_key: str | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    sft_out: str | None = None  # RFT: successful episodes as SFT rows with their exact tokens (agent_tune.eval.rft)
    sft_min_accuracy: float | None = None  # with sft_out and no threshold given: 1.0
    sft_min_reward: float | None = None
    rows: str | None = None  # training rows of any env (agent_tune.eval.task_rows); env is then "rows"

    def __post_init__(self) -> None:
        if self.sft_out is None:
            if self.sft_min_accuracy is not None or self.sft_min_reward is not None:
                raise ValueError("--sft-min-accuracy / --sft-min-reward filter the rows of --sft-out: give --sft-out")
        else:
            if self.mode != "tokens":
                raise ValueError("--sft-out needs --mode tokens: chat mode does not see the tokens the model generated")
            if self.sft_min_accuracy is None and self.sft_min_reward is None:
                self.sft_min_accuracy = 1.0
        if self.rows is not None:
            self.env = ROWS_ENV
        if self.mode not in MODES:
            raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        check_mode(self.api, self.mode)
        if self.concurrency < 1:
            raise ValueError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"--temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < -1:
            raise ValueError(f"--top-k must be >= 1 (or 0 / -1: all tokens), got {self.top_k}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"--max-tokens must be >= 1, got {self.max_tokens}")
        reserved = () if self.env == ROWS_ENV else tuple(eval_kwargs(self.env))
        for key in (*reserved, "tool_parser", "reasoning_parser"):
            if key in self.env_kwargs:
                raise ValueError(f"env kwarg {key!r} is set by the evaluator itself")

    def meta(self) -> dict[str, Any]:
        """The results file header: the settings that make two runs' results comparable, and provenance."""
        d = asdict(self)
        d.pop("api_key")
        d.pop("progress")
        for key in ("sft_out", "sft_min_accuracy", "sft_min_reward"):  # an extra output, not the results
            d.pop(key)
        d["eval_kwargs"] = {} if self.env == ROWS_ENV else eval_kwargs(self.env)
        return d


@dataclass
class EvalOutcome:
    """What a run did: records now in the file, how many episodes this run added, skipped and lost."""

    output: Path
    records: list[dict[str, Any]]
    ran: int
    skipped: int
    failed: list[tuple[str, int, str]]
    wall_time_s: float
    model_info: ModelInfo | None = None
    usage: UsageCounter | None = None
    sft_rows_written: int = 0  # RFT rows this run added to --sft-out


class EvalAbortedError(RolloutError, RuntimeError):
    """The server went away mid-run; finished episodes are saved, rerun the same command to resume."""


def load_tokenizer(path: str) -> Any:
    """A Hugging Face tokenizer from a local folder (nothing is downloaded)."""
    from transformers import AutoTokenizer

    if not Path(path).expanduser().is_dir():
        raise FileNotFoundError(
            f"tokenizer folder {path!r} not found; pass --tokenizer with a local Hugging Face folder "
            "(the model's own folder works)"
        )
    return AutoTokenizer.from_pretrained(str(Path(path).expanduser()), local_files_only=True)


def episode_turns(result: EpisodeResult) -> list[list[str]]:
    """The policy's text of every generation, grouped by the user turn it answered.

    Only what the policy generated (:attr:`EpisodeResult.generations`): a prompt's worked example (assistant
    and tool turns before the question) and a raw-text env's observations are not the policy's."""
    turns: list[list[str]] = []
    turn = 0
    for i, text in enumerate(result.generations):
        while len(turns) <= turn:
            turns.append([])
        turns[turn].append(text)
        if i < len(result.step_infos) and "turn" in result.step_infos[i]:
            turn = int(result.step_infos[i]["turn"])
    return turns


def build_record(
    test_id: str, sample: int, result: EpisodeResult, category: str, tokens_generated: int | None = None,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> dict[str, Any]:
    """One results-file line for a finished episode (``decoded_calls`` as the env reports them: BFCL's per
    turn and step, the toolcall env's one list of ``{name, arguments}``); ``category`` is used when the env
    reports none (the entry's, :class:`~agent_tune.eval.task_rows.TaskRow`).

    With ``decode`` (the run's tokenizer), the line is also the episode record training keeps
    (:func:`agent_tune.rollout.dump.episode_record`: the conversation with its prompt marked, the loss-mask
    segments, the env's info), under the eval's own keys: where both have a key the eval's stands (``truncated``:
    1.0 when the episode ended before the env said done, as the metric)."""
    info = result.info
    keys = ("category", "accuracy", "num_turns", "force_terminated", "turn_scores", "turn_errors", "decoded_calls",
            "end_reason")
    rec: dict[str, Any] = {"test_id": test_id, "sample": sample}
    if decode is not None:
        episode = episode_record(result, decode)
        rec.update({k: v for k, v in episode.items() if k not in rec})
    rec.update({k: info.get(k) for k in keys})
    rec.update(episode_metrics(result))  # the keys training logs too (agent_tune.rollout.episode_metrics)
    rec["category"] = rec["category"] or category
    rec["accuracy"] = float(rec["accuracy"] or 0.0)
    rec["num_turns"] = rec["num_turns"] or 1
    if rec["end_reason"] is None:  # BFCL's own word (its result files read it); other envs: none
        del rec["end_reason"]
    rec["stop_reason"] = result.stop_reason.value
    rec["reward"] = float(result.reward)
    rec["finish_reasons"] = list(result.finish_reasons)
    rec["prompt_tokens"] = len(result.trajectory.prompt_ids)
    rec["tokens_generated"] = int(
        tokens_generated if tokens_generated is not None else result.trajectory.num_policy_tokens
    )
    rec["responses"] = episode_turns(result)
    rec["timings"] = {k: round(v, 4) for k, v in result.timings.items()}
    return rec


def failed_record(test_id: str, sample: int, reason: StopReason, detail: str, category: str) -> dict[str, Any]:
    """A record for an entry that could not be played at all (its prompt does not fit the context:
    :attr:`StopReason.PROMPT_TOO_LONG`): BFCL fails such an entry (an inference error). ``category``: the
    entry's."""
    return {
        "test_id": test_id, "sample": sample, "category": category, "accuracy": 0.0,
        **{k: 0.0 for k in METRIC_KEYS}, "zero_call": 1.0, "truncated": 1.0, f"stop/{reason.value}": 1.0,
        "num_turns": 1, "force_terminated": False, "turn_scores": [], "turn_errors": [], "decoded_calls": [],
        "end_reason": reason.value, "stop_reason": reason.value, "reward": 0.0, "finish_reasons": [],
        "prompt_tokens": None, "tokens_generated": 0, "responses": [], "error": detail,
    }


class Evaluator:
    """Schedules episodes of the selected entries against one server. Use :meth:`run`."""

    def __init__(self, settings: EvalSettings, tokenizer: Any = None,
                 task_rows: Mapping[str, TaskRow] | None = None) -> None:
        self.settings = settings
        self._tokenizer = tokenizer
        self._renderer: ChatRenderer | None = None
        self.tool_parser = get_tool_parser(settings.tool_parser)
        self.usage = UsageCounter()
        # the entries: an env's catalogue tasks, or training rows (--rows); none given: the env's tasks run() names
        self.task_rows: dict[str, TaskRow] = dict(task_rows or (load_task_rows(settings.rows) if settings.rows else {}))
        self.rft_filter = (
            RFTFilter(settings.sft_min_accuracy, settings.sft_min_reward) if settings.sft_out else None
        )

    @property
    def renderer(self) -> ChatRenderer:
        """The chat renderer, its tokenizer loaded on first use (after the env's start-up check)."""
        if self._renderer is None:
            s = self.settings
            tokenizer = self._tokenizer if self._tokenizer is not None else load_tokenizer(s.tokenizer or s.model)
            self._renderer = ChatRenderer(tokenizer, s.template, s.chat_template_kwargs)
        return self._renderer

    def check_env(self, test_id: str) -> None:
        """The env's start-up check on this run's kwargs (``ValueError`` naming the problem; for tau2 an
        unreachable user server fails here, before any episode)."""
        s = self.settings
        row = self.task_rows[test_id]  # each row names its env: the first row's, built as its episode builds it
        env_cls = get_env_class(row.env)
        if s.mode == "chat" and env_cls.sampler_hints.observation_kind == "tokens":
            raise ValueError(f"env {row.env!r} speaks token ids (its own renderer builds its prompts), which a chat "
                             "server cannot take: use --mode tokens")
        env_cls.check_kwargs(row_env_kwargs(row, s.tool_parser, s.reasoning_parser, s.env_kwargs))

    def _sampling_params(self, sample: int) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
        if s.top_k is not None:
            params["top_k"] = s.top_k
        if s.max_tokens is not None:
            params["max_tokens"] = s.max_tokens
        if s.seed is not None:
            params["seed"] = s.seed + sample
        return params

    async def _episode(self, client: OpenAIClient, policy: Policy | None, limits: RolloutLimits,
                       test_id: str, sample: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The episode's result record and, when it passes the RFT filter, its SFT row (else None)."""
        s = self.settings
        row = self.task_rows.get(test_id)
        if row is None:
            raise ValueError(f"{test_id!r} is not an entry of this run ({s.rows or s.env})")
        env_name = row.env
        env = make_env(env_name, **row_env_kwargs(row, s.tool_parser, s.reasoning_parser, s.env_kwargs))
        category = row.category
        renderer: Any = self.renderer
        tokens = None
        try:
            if s.mode == "chat":
                renderer = MessageLedger(self.renderer)
                chat = ChatCompletionsPolicy(client, s.model, renderer, self.tool_parser,
                                             reasoning_tags=reasoning_tags(s.reasoning_parser), usage=UsageCounter())
                active: Any = chat
            else:
                active = policy
            try:
                result = await run_episode(env, active, renderer, limits, self._sampling_params(sample),
                                           task=row.task)
            except PromptTooLongError as exc:
                return failed_record(test_id, sample, StopReason.PROMPT_TOO_LONG, str(exc), category), None
            if s.mode == "chat":
                tokens = chat.usage.completion_tokens
                for k in ("requests", "prompt_tokens", "completion_tokens"):
                    setattr(self.usage, k, getattr(self.usage, k) + getattr(chat.usage, k))
            rec = build_record(test_id, sample, result, category, tokens, decode=self.renderer.decode)
            rec.update(env.report.record_fields(env, sample))
            sft = None
            if self.rft_filter is not None and self.rft_filter.keep(rec["accuracy"], rec["reward"]):
                sft = rft_row(test_id, sample, result, rec["accuracy"],
                              {"env": env_name, "model": s.model, "template": s.template, "mode": s.mode})
            return rec, sft
        finally:
            env.close()

    async def run(self, test_ids: Sequence[str], output: str | Path) -> EvalOutcome:
        """Evaluate ``test_ids`` (``n`` samples each), appending to ``output``; skip what it already holds.

        ``output`` and ``sft_out`` are locked for the run (:class:`~agent_tune.utils.run_lock.RunLock`): another
        eval appending to either is refused with :class:`~agent_tune.utils.run_lock.RunFolderBusy`."""
        with contextlib.ExitStack() as locks:
            locks.enter_context(RunLock.file(output, elsewhere="choose another --output"))
            if self.settings.sft_out:
                locks.enter_context(RunLock.file(self.settings.sft_out, elsewhere="choose another --sft-out"))
            return await self._run(test_ids, output)

    async def _run(self, test_ids: Sequence[str], output: str | Path) -> EvalOutcome:
        s = self.settings
        started = time.time()
        if not self.task_rows:  # test ids of the env's catalogue
            self.task_rows = catalogue_task_rows(s.env, select_tasks(s.env, ids=list(test_ids)))
        store = ResultStore(output, s.meta())
        tasks = [(t, k) for t in test_ids for k in range(s.n)]
        todo = [(t, k) for t, k in tasks if not store.is_finished(t, k)]
        if todo:
            try:
                self.check_env(todo[0][0])
                self.renderer  # noqa: B018  (the tokenizer loads now: a missing one fails before any request)
            except Exception:
                store.close()
                raise
        skipped = len(tasks) - len(todo)
        failed: list[tuple[str, int, str]] = []
        retry = RetryPolicy(max_retries=s.max_retries)
        api = get_server_api(s.api)
        async with api.client(s.base_url, s.api_key, timeout=s.timeout, retry=retry,
                              max_connections=max(8, s.concurrency * 2)) as client:
            info = await client.check_model(s.model)  # fail fast: server down or wrong model name
            max_len = s.max_model_len or info.max_model_len
            limits = RolloutLimits(
                max_prompt_length=(max_len - 1) if max_len else UNBOUNDED_CONTEXT,
                max_response_length=max_len or UNBOUNDED_CONTEXT,
            )
            policy = None
            if s.mode == "tokens":
                policy = api.token_policy(client, s.model, max_model_len=max_len, usage=self.usage)
            if not todo:
                store.close()
                return EvalOutcome(Path(output), store.records, 0, skipped, [], time.time() - started, info, self.usage)
            run_meta = {"run_id": uuid.uuid4().hex[:12], "run_started": started}
            sem = asyncio.Semaphore(s.concurrency)
            bar = _progress(len(tasks), skipped, s.progress, f"{s.env} eval")
            correct = sum(r["accuracy"] for r in store.records)
            done_count = len(store.records)
            abort: list[BaseException] = []
            writer = RFTWriter(s.sft_out) if s.sft_out else None

            async def one(test_id: str, sample: int) -> None:
                nonlocal correct, done_count
                async with sem:
                    if abort:
                        return
                    t0 = time.time()
                    try:
                        rec, row = await self._episode(client, policy, limits, test_id, sample)
                    except (ServerUnavailableError, TokenIdsUnavailableError) as exc:
                        abort.append(exc)
                        return
                    except RequestError as exc:
                        failed.append((test_id, sample, str(exc)))
                        return
                    rec.update(run_meta, wall_s=round(time.time() - t0, 3), finished_at=time.time())
                    if writer is not None and row is not None:
                        writer.append(row)  # before the record: a finished episode always has its row
                    store.append(rec)
                    correct += rec["accuracy"]
                    done_count += 1
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(acc=f"{correct / done_count:.3f}", refresh=False)

            with store, (writer if writer is not None else contextlib.nullcontext()):
                jobs = [asyncio.ensure_future(one(t, k)) for t, k in todo]
                try:
                    await asyncio.gather(*jobs)
                finally:
                    for j in jobs:
                        j.cancel()
                    if bar is not None:
                        bar.close()
            if abort:
                raise EvalAbortedError(
                    f"{abort[0]}\n{len(store.records)} episodes are saved in {output}; rerun the same command to resume"
                ) from abort[0]
            ran = len(todo) - len(failed)
            return EvalOutcome(
                Path(output), store.records, ran, skipped, failed, time.time() - started, info, self.usage,
                writer.written if writer is not None else 0,
            )


def _progress(total: int, initial: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="ep", desc=desc, file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def evaluate(settings: EvalSettings, test_ids: Sequence[str], output: str | Path, tokenizer: Any = None,
             task_rows: Mapping[str, TaskRow] | None = None) -> EvalOutcome:
    """Synchronous wrapper of :meth:`Evaluator.run` (``task_rows``: the entries, an env's catalogue tasks,
    :func:`agent_tune.eval.task_rows.catalogue_task_rows`; with ``settings.rows``, read from that file)."""
    return asyncio.run(Evaluator(settings, tokenizer, task_rows).run(test_ids, output))
