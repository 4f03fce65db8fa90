"""Run BFCL entries against an OpenAI-compatible server with the shared episode runner.

Multi-turn entries are played by the ``bfcl`` env in eval mode, single-turn ones by the ``toolcall`` env
(``test_id``: BFCL's AST checker), tau2-bench tasks by the ``tau2`` env (its simulated user from the env
kwargs; each record keeps tau2's ``SimulationRun``, :mod:`agent_tune.eval.tau2_results`);
:mod:`agent_tune.eval.targets` says which. Before the first episode the env's own start-up check runs on
the run's kwargs (``check_kwargs``: for tau2, the user server's health check). Every episode goes through
:func:`agent_tune.rollout.run_episode`, the loop training uses; this module only schedules episodes (a
concurrency limit), feeds them a server-backed policy, and appends one record per finished episode to the
results file (:class:`~agent_tune.eval.store.ResultStore`), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_tune.envs import get_env_class, make_env
from agent_tune.eval.client import ModelInfo, OpenAIClient, RequestError, RetryPolicy, ServerUnavailableError
from agent_tune.eval.policies import (
    ChatCompletionsPolicy,
    CompletionsPolicy,
    MessageLedger,
    TokenIdsUnavailableError,
    UsageCounter,
)
from agent_tune.eval.rft import RFTFilter, RFTWriter, rft_row
from agent_tune.eval.store import ResultStore
from agent_tune.eval.targets import category_of, env_kwargs, num_turns
from agent_tune.eval.task_rows import TaskRow, load_task_rows, row_env_kwargs
from agent_tune.eval.tau2_results import episode_fields
from agent_tune.parsing import get_tool_parser
from agent_tune.rollout import ChatRenderer, EpisodeResult, PromptTooLongError, RolloutLimits, run_episode
from agent_tune.rollout.episode_metrics import METRIC_KEYS, episode_metrics

MODES = ("tokens", "chat")
ROWS_ENV = "rows"  # EvalSettings.env of a run on training rows: each row names its own env
# Without a known context length (a server that does not report one and no --max-model-len).
UNBOUNDED_CONTEXT = 1 << 20


@dataclass
class EvalSettings:
    """Everything that defines an evaluation run (CLI flags map onto these fields one to one)."""

    base_url: str
    model: str
    env: str = "bfcl"  # bfcl: multi-turn entries; toolcall: single-turn entries; tau2: tau2-bench tasks
    mode: str = "tokens"
    tokenizer: str | None = None
    template: str = "tokenizer"
    tool_parser: str = "hermes"
    reasoning_parser: str = "none"
    concurrency: int = 16
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
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
        if self.concurrency < 1:
            raise ValueError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"--temperature must be >= 0, got {self.temperature}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"--max-tokens must be >= 1, got {self.max_tokens}")
        reserved = {"tau2": ("domain", "task_id"), "bfcl": ("test_id", "eval_mode"), "toolcall": ("test_id",)}
        for key in (*reserved.get(self.env, ()), "tool_parser", "reasoning_parser"):
            if key in self.env_kwargs:
                raise ValueError(f"env kwarg {key!r} is set by the evaluator itself")

    def meta(self) -> dict[str, Any]:
        """The results file header: the settings that make two runs' results comparable, and provenance."""
        d = asdict(self)
        d.pop("api_key")
        d.pop("progress")
        for key in ("sft_out", "sft_min_accuracy", "sft_min_reward"):  # an extra output, not the results
            d.pop(key)
        d["eval_mode"] = self.env == "bfcl"
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


class EvalAbortedError(RuntimeError):
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
    """The policy's text of every stepped generation, grouped by the user turn it answered."""
    texts = [m["content"] for m in result.messages if m.get("role") == "assistant"]
    turns: list[list[str]] = []
    turn = 0
    for i, text in enumerate(texts):
        while len(turns) <= turn:
            turns.append([])
        turns[turn].append(text)
        if i < len(result.step_infos) and "turn" in result.step_infos[i]:
            turn = int(result.step_infos[i]["turn"])
    return turns


def build_record(
    test_id: str, sample: int, result: EpisodeResult, tokens_generated: int | None = None,
    category: str | None = None,
) -> dict[str, Any]:
    """One results-file line for a finished episode (``decoded_calls`` as the env reports them: BFCL's per
    turn and step, the toolcall env's one list of ``{name, arguments}``); ``category`` is used when the env
    reports none (else the BFCL category of ``test_id``; a training row's: :mod:`agent_tune.eval.task_rows`)."""
    info = result.info
    keys = ("category", "accuracy", "num_turns", "force_terminated", "turn_scores", "turn_errors", "decoded_calls",
            "end_reason")
    rec: dict[str, Any] = {"test_id": test_id, "sample": sample}
    rec.update({k: info.get(k) for k in keys})
    rec.update(episode_metrics(result))  # the keys training logs too (agent_tune.rollout.episode_metrics)
    rec["category"] = rec["category"] or category or category_of(test_id)
    rec["accuracy"] = float(rec["accuracy"] or 0.0)
    rec["num_turns"] = rec["num_turns"] or (1 if category is not None else num_turns(test_id))
    if rec["end_reason"] is None:  # envs without their own (single-turn): how the runner ended it
        rec["end_reason"] = "completed" if result.termination == "done" else result.termination
    rec["termination"] = result.termination
    rec["reward"] = float(result.reward)
    rec["stop_reasons"] = list(result.stop_reasons)
    rec["prompt_tokens"] = len(result.trajectory.prompt_ids)
    rec["tokens_generated"] = int(
        tokens_generated if tokens_generated is not None else result.trajectory.num_policy_tokens
    )
    rec["responses"] = episode_turns(result)
    rec["timings"] = {k: round(v, 4) for k, v in result.timings.items()}
    return rec


def failed_record(test_id: str, sample: int, reason: str, detail: str, category: str | None = None) -> dict[str, Any]:
    """A record for an entry that could not be played at all (its prompt does not fit the context):
    BFCL fails such an entry (an inference error). ``category``: as in :func:`build_record`."""
    return {
        "test_id": test_id, "sample": sample, "category": category or category_of(test_id), "accuracy": 0.0,
        **{k: 0.0 for k in METRIC_KEYS}, "zero_call": 1.0, "truncated": 1.0,
        "num_turns": 1 if category is not None else num_turns(test_id),
        "force_terminated": False, "turn_scores": [], "turn_errors": [], "decoded_calls": [],
        "end_reason": reason, "termination": reason, "reward": 0.0, "stop_reasons": [],
        "prompt_tokens": None, "tokens_generated": 0, "responses": [], "error": detail,
    }


class Evaluator:
    """Schedules episodes of the selected entries against one server. Use :meth:`run`."""

    def __init__(self, settings: EvalSettings, tokenizer: Any = None,
                 task_rows: Mapping[str, TaskRow] | None = None) -> None:
        self.settings = settings
        if tokenizer is None:
            tok_path = settings.tokenizer or settings.model
            tokenizer = load_tokenizer(tok_path)
        self.renderer = ChatRenderer(tokenizer, settings.template, settings.chat_template_kwargs)
        self.tool_parser = get_tool_parser(settings.tool_parser)
        self.usage = UsageCounter()
        # the entries when they are not BFCL / tau2 ids: training rows (--rows) or an env's catalogue tasks
        self.task_rows: dict[str, TaskRow] = dict(task_rows or (load_task_rows(settings.rows) if settings.rows else {}))
        self.rft_filter = (
            RFTFilter(settings.sft_min_accuracy, settings.sft_min_reward) if settings.sft_out else None
        )

    def check_env(self, test_id: str) -> None:
        """The env's start-up check on this run's kwargs (``ValueError`` naming the problem; for tau2 an
        unreachable user server fails here, before any episode)."""
        s = self.settings
        if self.task_rows:  # each row names its env: the first row's, built as its episode builds it
            row = self.task_rows[test_id]
            get_env_class(row.env).check_kwargs(row_env_kwargs(row, s.tool_parser, s.reasoning_parser, s.env_kwargs))
            return
        kwargs = {**env_kwargs(s.env, test_id), "tool_parser": s.tool_parser, "reasoning_parser": s.reasoning_parser,
                  **s.env_kwargs}
        get_env_class(s.env).check_kwargs(kwargs)

    def _sampling_params(self, sample: int) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
        if s.max_tokens is not None:
            params["max_tokens"] = s.max_tokens
        if s.seed is not None:
            params["seed"] = s.seed + sample
        return params

    async def _episode(self, client: OpenAIClient, policy: CompletionsPolicy | None, limits: RolloutLimits,
                       test_id: str, sample: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The episode's result record and, when it passes the RFT filter, its SFT row (else None)."""
        s = self.settings
        row = self.task_rows.get(test_id) if self.task_rows else None
        if self.task_rows:
            if row is None:
                raise ValueError(f"{test_id!r} is not an entry of this run ({s.rows or s.env})")
            env_name = row.env
            env = make_env(env_name, **row_env_kwargs(row, s.tool_parser, s.reasoning_parser, s.env_kwargs))
            task: dict[str, Any] = row.task
        else:
            env_name = s.env
            env = make_env(s.env, **env_kwargs(s.env, test_id), tool_parser=s.tool_parser,
                           reasoning_parser=s.reasoning_parser, **s.env_kwargs)
            task = {"test_id": test_id}
        category = row.category if row is not None else None
        renderer: Any = self.renderer
        tokens = None
        try:
            if s.mode == "chat":
                renderer = MessageLedger(self.renderer)
                chat = ChatCompletionsPolicy(client, s.model, renderer, self.tool_parser,
                                             keep_reasoning=s.reasoning_parser != "none", usage=UsageCounter())
                active: Any = chat
            else:
                active = policy
            try:
                result = await run_episode(env, active, renderer, limits, self._sampling_params(sample), task=task)
            except PromptTooLongError as exc:
                return failed_record(test_id, sample, "prompt_too_long", str(exc), category), None
            if s.mode == "chat":
                tokens = chat.usage.completion_tokens
                for k in ("requests", "prompt_tokens", "completion_tokens"):
                    setattr(self.usage, k, getattr(self.usage, k) + getattr(chat.usage, k))
            rec = build_record(test_id, sample, result, tokens, category)
            if env_name == "tau2":
                rec.update(episode_fields(env, sample))
                if result.info.get("user_error"):
                    rec["user_error"] = result.info["user_error"]
            sft = None
            if self.rft_filter is not None and self.rft_filter.keep(rec["accuracy"], rec["reward"]):
                sft = rft_row(test_id, sample, result, rec["accuracy"],
                              {"env": env_name, "model": s.model, "template": s.template, "mode": s.mode})
            return rec, sft
        finally:
            env.close()

    async def run(self, test_ids: Sequence[str], output: str | Path) -> EvalOutcome:
        """Evaluate ``test_ids`` (``n`` samples each), appending to ``output``; skip what it already holds."""
        s = self.settings
        started = time.time()
        store = ResultStore(output, s.meta())
        tasks = [(t, k) for t in test_ids for k in range(s.n)]
        todo = [(t, k) for t, k in tasks if not store.is_finished(t, k)]
        if todo:
            try:
                self.check_env(todo[0][0])
            except Exception:
                store.close()
                raise
        skipped = len(tasks) - len(todo)
        failed: list[tuple[str, int, str]] = []
        retry = RetryPolicy(max_retries=s.max_retries)
        async with OpenAIClient(s.base_url, s.api_key, timeout=s.timeout, retry=retry,
                                max_connections=max(8, s.concurrency * 2)) as client:
            info = await client.check_model(s.model)  # fail fast: server down or wrong model name
            max_len = s.max_model_len or info.max_model_len
            limits = RolloutLimits(
                max_prompt_length=(max_len - 1) if max_len else UNBOUNDED_CONTEXT,
                max_response_length=max_len or UNBOUNDED_CONTEXT,
            )
            policy = None
            if s.mode == "tokens":
                policy = CompletionsPolicy(client, s.model, max_model_len=max_len, usage=self.usage)
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


def _progress(total: int, initial: int, enabled: bool, desc: str = "bfcl eval"):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="ep", desc=desc, file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def evaluate(settings: EvalSettings, test_ids: Sequence[str], output: str | Path, tokenizer: Any = None,
             task_rows: Mapping[str, TaskRow] | None = None) -> EvalOutcome:
    """Synchronous wrapper of :meth:`Evaluator.run` (``task_rows``: the entries, when they are an env's catalogue
    tasks, :func:`agent_tune.eval.task_rows.catalogue_task_rows`)."""
    return asyncio.run(Evaluator(settings, tokenizer, task_rows).run(test_ids, output))
