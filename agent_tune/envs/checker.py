"""``check_env``: does an environment keep the :class:`~agent_tune.envs.base.BaseToolEnv` contract?

In the spirit of gymnasium's ``env_checker``: it plays a few short episodes and fails with a message
naming the broken rule. Run it on your own environment before training with it::

    from agent_tune.envs import check_env
    check_env(lambda: MyToolEnv(), task={"question": "..."}, valid_response="<tool_call>...</tool_call>",
              malformed_response="<tool_call>\\n{oops\\n</tool_call>")

An env without tools (a verifiers ``MultiTurnEnv`` with none, a SkyRL text env) may have no response that counts a
format error: pass ``malformed_response=None`` and the checks of rule 4 are skipped, the returned
:class:`CheckReport` saying so (its ``skipped``). An env that parses its own text and raises on what it cannot
use (a SkyRL env raising in ``step``) has one: pass a response it rejects.

What it checks:

1. ``step`` before ``reset`` raises :class:`~agent_tune.envs.base.EnvStateError` (not a crash elsewhere);
2. ``reset(**task)`` returns an :class:`~agent_tune.envs.base.Observation` with chat messages (or text)
   and tools in the OpenAI form;
3. a valid step returns a :class:`~agent_tune.envs.base.StepResult` with no format error; if the episode
   goes on, the observation is not empty (the policy must have something to read); a step that ends the
   episode carries its :class:`~agent_tune.envs.base.EpisodeInfo` (``StepResult.episode``), whose fields its
   ``info`` shows too, its :class:`~agent_tune.envs.base.StopReason` included;
4. a malformed step does not raise, counts a format error and either ends the episode or answers with an
   observation the policy can read; a step's ``format_errors`` is that step's own, the episode's total is in
   its ``EpisodeInfo``;
5. ``finalize(reason)`` ends a running episode with its ``EpisodeInfo``, stopped for ``reason``;
6. ``step`` after the episode ended raises ``EnvStateError``;
7. ``batch_step`` steps several episodes and returns one result each, in order;
8. ``close`` can be called twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from agent_tune.envs.base import BaseToolEnv, EnvStateError, EpisodeInfo, Observation, StepResult, StopReason
from agent_tune.errors import EnvError

EPISODE_INFO_KEYS: tuple[str, ...] = EpisodeInfo.CORE_KEYS


class EnvCheckError(EnvError, AssertionError):
    """An environment broke the contract; the message says which rule and what was seen."""


NO_MALFORMED = ("rule 4 (a malformed step counts a format error) skipped: malformed_response=None, the env has no "
                "response that counts one (a tool-less env)")


@dataclass(frozen=True)
class CheckReport:
    """What :func:`check_env` checked: ``skipped`` lists the rules it did not check, each with its reason."""

    skipped: list[str] = field(default_factory=list)


def _require(ok: bool, rule: str, seen: Any = None) -> None:
    if not ok:
        raise EnvCheckError(rule if seen is None else f"{rule} (got {seen!r})")


def _check_observation(obs: Any, where: str) -> None:
    _require(isinstance(obs, Observation), f"{where} must return an Observation", type(obs).__name__)
    _require(isinstance(obs.messages, list), f"{where}: Observation.messages must be a list", obs.messages)
    for m in obs.messages:
        _require(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m,
                 f"{where}: every message needs a 'role' and a 'content'", m)
    _require(obs.text is None or isinstance(obs.text, str),
             f"{where}: Observation.text must be a str or None", obs.text)
    if obs.tools is not None:
        for tool in obs.tools:
            _require(isinstance(tool, dict) and tool.get("type") == "function" and "name" in tool.get("function", {}),
                     f"{where}: tools must be OpenAI-style {{'type': 'function', 'function': {{'name', ...}}}}", tool)


def _check_step(result: Any, where: str) -> StepResult:
    _require(isinstance(result, StepResult), f"{where} must return a StepResult", type(result).__name__)
    _check_observation(result.observation, where)
    _require(isinstance(result.reward, (int, float)) and not isinstance(result.reward, bool),
             f"{where}: reward must be a number", result.reward)
    _require(isinstance(result.done, bool), f"{where}: done must be a bool", result.done)
    _require(isinstance(result.info, dict), f"{where}: info must be a dict", type(result.info).__name__)
    if result.done:
        _require(isinstance(result.episode, EpisodeInfo), f"{where}: the step that ends the episode must carry its "
                 "EpisodeInfo (StepResult.episode)", type(result.episode).__name__)
        missing = [k for k in EPISODE_INFO_KEYS if k not in result.info]
        _require(not missing, f"{where}: the final info must show the EpisodeInfo keys; missing {missing}")
        _require(isinstance(result.episode.stop_reason, StopReason), f"{where}: the episode's stop_reason must be a "
                 "StopReason", result.episode.stop_reason)
        _require(result.info.get("stop_reason") == result.episode.stop_reason.value,
                 f"{where}: the final info must show the episode's stop_reason", result.info.get("stop_reason"))
    return result


def _expect_state_error(call: Callable[[], Any], rule: str) -> None:
    try:
        call()
    except EnvStateError:
        return
    except Exception as exc:  # a crash of another kind is not a clear error
        raise EnvCheckError(f"{rule}: raised {type(exc).__name__}: {exc}, not EnvStateError") from exc
    raise EnvCheckError(f"{rule}: nothing was raised")


def check_env(
    make: Callable[[], BaseToolEnv],
    task: Mapping[str, Any],
    valid_response: str,
    malformed_response: str | None,
) -> CheckReport:
    """Check the environment built by ``make()`` against the contract; raises :class:`EnvCheckError`.

    ``task`` is what ``reset`` receives; ``valid_response`` a first response that makes a correct call
    (no format error); ``malformed_response`` one whose call block is broken, or ``None`` for an env that has
    no response counting a format error (a tool-less env): rule 4 is then skipped, and the report says so.
    """
    env = make()
    _require(isinstance(env, BaseToolEnv), "make() must build a BaseToolEnv", type(env).__name__)
    _expect_state_error(lambda: env.step(valid_response), "step() before reset() must raise EnvStateError")

    _check_observation(env.reset(**task), "reset()")
    valid = _check_step(env.step(valid_response), "step(valid_response)")
    _require(int(valid.info.get("format_errors", 0)) == 0, "a valid step must count no format error",
             valid.info.get("format_errors"))
    if not valid.done:
        _require(not valid.observation.is_empty, "a step that does not end the episode must answer with an observation")
        final = _check_step(env.finalize(StopReason.TOKEN_BUDGET), "finalize()")
        _require(final.done, "finalize() must end the episode", final.done)
        _require(final.episode.stop_reason is StopReason.TOKEN_BUDGET, "finalize(reason) must end the episode "
                 "with that stop reason", final.episode.stop_reason)
    _expect_state_error(lambda: env.step(valid_response), "step() after the episode ended must raise EnvStateError")

    skipped: list[str] = []
    if malformed_response is None:
        skipped.append(NO_MALFORMED)
        env.close()
        env.close()
        _check_batch(make, task, valid_response, None)
        return CheckReport(skipped)
    _check_observation(env.reset(**task), "reset() of a second episode")
    try:
        bad = _check_step(env.step(malformed_response), "step(malformed_response)")
    except EnvCheckError:
        raise
    except Exception as exc:
        raise EnvCheckError(f"step(malformed_response) raised {type(exc).__name__}: {exc}; an environment never "
                            "raises on model output") from exc
    _require(int(bad.info.get("format_errors", 0)) >= 1, "a malformed call must count a format error (an env "
             "with no response that counts one, a tool-less env, passes malformed_response=None)",
             bad.info.get("format_errors"))
    _require(bad.done or not bad.observation.is_empty,
             "a malformed call must be answered with an observation (or end the episode)")
    if not bad.done:
        after = _check_step(env.step(valid_response), "step(valid_response) after a malformed one")
        errors = int(after.info.get("format_errors", 0))
        _require(errors == 0, "a step's format_errors counts that step's own errors, not the episode's", errors)
        if after.done:
            assert after.episode is not None
            _require(after.episode.format_errors >= 1, "the EpisodeInfo counts the episode's format errors",
                     after.episode.format_errors)

    env.close()
    env.close()
    _check_batch(make, task, valid_response, malformed_response)
    return CheckReport(skipped)


def _check_batch(make: Callable[[], BaseToolEnv], task: Mapping[str, Any], valid_response: str,
                 malformed_response: str | None) -> None:
    """Rule 7 (``batch_step``) and rule 8 (``close`` twice)."""
    envs = [make() for _ in range(2)]
    for e in envs:
        e.reset(**task)
    second = valid_response if malformed_response is None else malformed_response
    results = type(envs[0]).batch_step(envs, [valid_response, second])
    _require(isinstance(results, list) and len(results) == 2, "batch_step must return one result per env", results)
    _check_step(results[0], "batch_step()[0]")
    _check_step(results[1], "batch_step()[1]")
    if malformed_response is not None:
        _require(int(results[1].info.get("format_errors", 0)) >= 1,
                 "batch_step must step envs[i] with raw_responses[i] (the malformed one counted no format error)")
    for e in envs:
        e.close()
        e.close()
