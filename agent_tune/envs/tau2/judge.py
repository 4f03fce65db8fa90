"""tau2's NL-assertion judge, sent to a configured OpenAI-compatible endpoint (``judge:`` in the env's kwargs).

tau2's evaluator checks a task's natural-language assertions (``evaluation_criteria.nl_assertions``, counted
in the reward when the task's ``reward_basis`` has ``NL_ASSERTION``) with ``NLAssertionsEvaluator``: tau2's
prompt, tau2's parsing of the verdicts, tau2's combination with the other components
(``evaluate_simulation(..., EvaluationType.ALL_WITH_NL_ASSERTIONS)``). It asks its LLM through
``tau2.utils.llm_utils.generate`` (litellm) with a model fixed in tau2's config (``gpt-4o-mini``). Here that
one call is routed to the judge of the episode being scored: :func:`judged` sets the judge in a context
variable (per thread, so concurrent episodes with different judges never mix) and the NL evaluator's
``generate`` is wrapped once, at import, so that inside :func:`judged` it asks ``openai/<model>`` at
``base_url`` (litellm's OpenAI-compatible route) with the judge's key, temperature and timeout; outside it,
tau2's own call runs unchanged.

A judge answer that tau2 cannot use (not JSON, a missing field, a transport error, or fewer verdicts than the
task has assertions) is retried ``max_retries`` times with exponential backoff; every failed try's reason is
kept, and when all fail the episode's reward is 0 with the reason recorded (never an exception).
"""

from __future__ import annotations

import os
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import model_validator
from tau2.data_model.simulation import RewardInfo, SimulationRun
from tau2.data_model.tasks import RewardType, Task
from tau2.evaluator import evaluator_nl_assertions
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

from agent_tune.users.endpoint import EndpointOptions, check_endpoint
from agent_tune.utils.typed_config import OptionError

NO_KEY = "EMPTY"  # what litellm's OpenAI client sends when the judge has no API key (it requires one)


class JudgeConfig(EndpointOptions):
    """An OpenAI-compatible endpoint for tau2's NL-assertion judge (the env's ``judge`` block; the options:
    :class:`~agent_tune.users.endpoint.EndpointOptions`); ``temperature`` is tau2's default for its judge (0.0).
    ``base_url: null`` (the default) means no judge: :func:`configured_judge` is then ``None``."""

    unknown_key_problem = "judge: unknown key(s) {key} (known: {known})"

    max_retries: int = 2

    @model_validator(mode="after")
    def _usable(self) -> JudgeConfig:
        if self.base_url is None:  # no judge
            return self
        if not self.model:
            raise OptionError("", f"judge.model is required when judge.base_url is set (got {self.model!r})")
        self.check_endpoint_options()
        return self

    def api_key(self) -> str | None:
        return os.environ[self.api_key_env] if self.api_key_env else None

    def health_check(self) -> None:
        """Start-up: ``GET <base_url>/models`` must answer and list ``model`` (``ValueError`` names the URL;
        :mod:`agent_tune.openai_client`, the client the eval and the simulated user use)."""
        check_endpoint(self.base_url, self.model, self.api_key(), self.timeout_s, "NL-assertion judge")


def configured_judge(raw: Any, key: str = "judge") -> JudgeConfig | None:
    """The ``judge`` block (a mapping, a :class:`JudgeConfig` or ``None``) checked, or ``None`` when it configures
    no judge (``None``, ``{}``, ``base_url: null``); :class:`OptionError` names ``<key>.<option>``."""
    config = JudgeConfig.parse(raw, key)
    return None if config.base_url is None else config


def needs_judge(task: Task) -> bool:
    """Whether ``task``'s reward counts its NL assertions (``NL_ASSERTION`` in its ``reward_basis``)."""
    criteria = task.evaluation_criteria
    return criteria is not None and RewardType.NL_ASSERTION in set(criteria.reward_basis or ())


@dataclass
class _Route:
    config: JudgeConfig
    calls: int = 0


_ROUTE: ContextVar[_Route | None] = ContextVar("agent_tune_tau2_judge", default=None)
_tau2_generate = getattr(evaluator_nl_assertions, "_agent_tune_tau2_generate", evaluator_nl_assertions.generate)


def _routed_generate(model: str, messages: Any, tools: Any = None, tool_choice: Any = None, **kwargs: Any) -> Any:
    """tau2's ``generate``, aimed at the judge of the current context (unchanged when there is none)."""
    route = _ROUTE.get()
    if route is None:
        return _tau2_generate(model, messages, tools=tools, tool_choice=tool_choice, **kwargs)
    route.calls += 1
    c = route.config
    kwargs.update(api_base=c.base_url, api_key=c.api_key() or NO_KEY, temperature=float(c.temperature),
                  timeout=float(c.timeout_s), num_retries=0)  # retries are judged()'s, with backoff
    return _tau2_generate(f"openai/{c.model}", messages, tools=tools, tool_choice=tool_choice, **kwargs)


evaluator_nl_assertions._agent_tune_tau2_generate = _tau2_generate  # tau2's own, kept across a reload
evaluator_nl_assertions.generate = _routed_generate


@dataclass
class Judged:
    """The outcome of :func:`judged`: tau2's ``RewardInfo`` (or ``None`` and ``error``), and the reasons of
    the judge's failed tries (retried ones included)."""

    info: RewardInfo | None
    error: str | None = None
    failures: list[str] = field(default_factory=list)


def judged(simulation: SimulationRun, task: Task, domain: str, judge: JudgeConfig) -> Judged:
    """tau2's ``evaluate_simulation`` with NL assertions, the judge being ``judge``; retried on a judge failure."""
    expected = len(task.evaluation_criteria.nl_assertions or ()) if task.evaluation_criteria else 0
    out = Judged(None)
    for attempt in range(int(judge.max_retries) + 1):
        if attempt:
            time.sleep(float(judge.backoff_s) * 2 ** (attempt - 1))
        route = _Route(judge)
        token = _ROUTE.set(route)
        try:
            info = evaluate_simulation(simulation=simulation, task=task, solo_mode=False, domain=domain,
                                       evaluation_type=EvaluationType.ALL_WITH_NL_ASSERTIONS)
        except Exception as exc:  # noqa: BLE001 - a bad verdict is retried, then recorded; never raised
            if route.calls == 0:  # not the judge's doing (the other evaluators): no retry
                out.error = f"{type(exc).__name__}: {exc}"
                return out
            out.failures.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            continue
        finally:
            _ROUTE.reset(token)
        got = len(info.nl_assertions or ())
        if route.calls and got != expected:  # tau2 counts a verdict list with assertions missing as all met
            out.failures.append(f"the judge gave {got} verdicts for {expected} NL assertions")
            continue
        out.info = info
        return out
    out.error = (f"NL-assertion judge at {judge.base_url} failed {len(out.failures)} times; "
                 f"last: {out.failures[-1]}")
    return out
