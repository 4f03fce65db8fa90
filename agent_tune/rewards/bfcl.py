"""Every BFCL reward formula, as plain functions (the BFCL env computes its rewards here and nowhere else).

Episode rewards (the env's ``reward`` option picks one; the curriculum's stages use them in this order):

* ``syntax`` (stage 1, format first): per generation a graded validity of its tool-call blocks
  (:func:`syntax_grade_of`), averaged over the episode's generations (:func:`syntax`). A generation
  without a call block scores 0; each block earns

  ======================================================  =====
  the block is present but does not decode to a call       0.25
  it decodes to a call (JSON object with a name)          0.5
  ... naming a tool visible now                           0.75
  ... whose arguments satisfy the tool's schema            1.0
  ======================================================  =====

  and a generation's grade is the mean over its blocks. A generation without any block that closes a user
  turn in which a call already ran (the answer to the user) is not graded (:func:`closes_acted_turn`):
  paying it 0 would teach the policy never to end a turn. Why graded, and why these values: SmolLM2-135M on
  BFCL base (measured: 8 entries x 8 samples, with and without worked examples, two temperatures) attempts
  a ``<tool_call>`` in at most ~1 response in 8 and never makes a valid call, so a reward that pays only
  valid calls is 0 for every sample and every GRPO group has zero variance. Each rung of the ladder is a
  step those attempts can climb (they invent function names and break JSON), so two samples that differ in
  how well-formed their calls are get different rewards. GRPO normalises advantages by the group's standard
  deviation, so in the typical group (one attempt among zeros) the attempt's advantage is the same whatever
  its grade; the values matter only when a group holds several grades, and equal steps make each rung worth
  the same.
* ``progress`` (Environment Tuning's fine-grained reward): passed / scoreable turns of the entry, turns
  never reached counting as failed (:func:`progress`).
* ``accuracy``: 1 iff BFCL would count the entry correct (:func:`accuracy`).
* ``progress_format``: progress minus ``format_penalty`` per format error, at most
  ``max_penalized_format_errors`` of them penalised (:func:`progress_format`).
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Mapping, Sequence, get_args

from agent_tune.parsing.types import ParsedResponse

# The env's ``reward`` option (the constructor's annotation, checked at launch); EPISODE_REWARDS below holds the
# function of each, and the module refuses to import if the two name different rewards.
RewardKind = Literal["progress", "accuracy", "progress_format", "syntax"]
REWARD_KINDS: tuple[str, ...] = get_args(RewardKind)

# The syntax ladder, per call block (see the module docstring).
GRADE_NO_CALL = 0.0
GRADE_BLOCK = 0.25  # a call block that does not decode to a call
GRADE_JSON = 0.5  # decodes to a call whose name is not a visible tool
GRADE_VISIBLE = 0.75  # names a visible tool; the arguments break its schema
GRADE_VALID = 1.0  # a call the strict training env runs


def syntax_grade_of(undecodable_blocks: int, call_checks: Sequence[Sequence[str] | None]) -> float:
    """The graded validity of one generation's call blocks (0 without any), from the checks made on them: the
    number of blocks that did not decode, and per decoded call ``None`` (no visible tool of that name) or the
    schema errors of its arguments (:func:`agent_tune.envs.bfcl.schema.syntax_grade` checks and grades)."""
    if not undecodable_blocks and len(call_checks) == 1:  # the usual generation, one call: its grade (no list)
        errors = call_checks[0]
        return GRADE_JSON if errors is None else GRADE_VISIBLE if errors else GRADE_VALID
    grades = [GRADE_BLOCK] * undecodable_blocks
    for errors in call_checks:
        grades.append(GRADE_JSON if errors is None else GRADE_VISIBLE if errors else GRADE_VALID)
    return sum(grades) / len(grades) if grades else GRADE_NO_CALL


def closes_acted_turn(parsed: ParsedResponse, turn_acted: bool) -> bool:
    """True for a generation with no call block after a call of the same user turn ran: it answers the
    user, so the syntax reward leaves it out of the average."""
    return turn_acted and not parsed.calls and not parsed.errors


def syntax(grades: Sequence[float]) -> float:
    """The stage-1 episode reward: the mean of the per-generation grades (0 for no generation)."""
    return sum(grades) / len(grades) if grades else 0.0


def accuracy(
    turn_scores: Sequence[float | None],
    required_turns: Sequence[bool],
    force_terminated: bool = False,
    forced_turns: int = 0,
) -> float:
    """1.0 iff BFCL counts the entry correct: every turn played, every turn with ground truth
    (``required_turns[t]``) passed, no force termination and no turn cut by the step limit.

    ``turn_scores`` holds one value per played turn (1.0 passed, 0.0 failed, None unscored).
    """
    completed = len(turn_scores) == len(required_turns)
    all_passed = True  # = all(s != 0.0 for t, s in enumerate(turn_scores) if required_turns[t]), without a generator
    for t, s in enumerate(turn_scores):
        if required_turns[t] and not s != 0.0:
            all_passed = False
            break
    return float(completed and all_passed and not force_terminated and not forced_turns)


def progress(turn_scores: Sequence[float | None], scoreable_turns: Sequence[bool]) -> float:
    """Passed turns / scoreable turns of the entry (unplayed turns count as failed).

    An entry with no scoreable turn scores 1.0 once every turn is played, else 0.0.
    """
    scoreable = sum(map(bool, scoreable_turns))
    if not scoreable:
        return float(len(turn_scores) == len(scoreable_turns))
    passed = 0  # = sum(1 for s in turn_scores if s == 1.0), without a generator (once per episode)
    for s in turn_scores:
        if s == 1.0:
            passed += 1
    return passed / scoreable


def progress_format(progress_value: float, format_errors: int, format_penalty: float = 0.1,
                    max_penalized_format_errors: int = 5) -> float:
    """Progress minus ``format_penalty`` per format error, at most ``max_penalized_format_errors`` penalised."""
    return progress_value - format_penalty * min(format_errors, max_penalized_format_errors)


# reward kind -> f(final info, format_penalty, max_penalized_format_errors): ONE entry per RewardKind
EPISODE_REWARDS: dict[str, Callable[[Mapping[str, Any], float, int], float]] = {
    "progress": lambda info, penalty, cap: float(info["progress"]),
    "accuracy": lambda info, penalty, cap: float(info["accuracy"]),
    "progress_format": lambda info, penalty, cap: progress_format(float(info["progress"]), int(info["format_errors"]),
                                                                  penalty, cap),
    "syntax": lambda info, penalty, cap: syntax(info["syntax_grades"]),
}
if tuple(EPISODE_REWARDS) != REWARD_KINDS:  # not an assert: it must hold under python -O too
    raise TypeError(f"agent_tune.rewards.bfcl: RewardKind {REWARD_KINDS} and EPISODE_REWARDS {tuple(EPISODE_REWARDS)} "
                    "must name the same rewards, in the same order")


def episode_reward(kind: str, info: Mapping[str, Any], format_penalty: float = 0.1,
                   max_penalized_format_errors: int = 5) -> float:
    """The reward ``kind`` (:data:`RewardKind`, its function in :data:`EPISODE_REWARDS`) of a finished episode from
    the env's final info (``progress``, ``accuracy``, ``format_errors``, ``syntax_grades``)."""
    reward = EPISODE_REWARDS.get(kind)
    if reward is None:
        raise ValueError(f"bfcl reward {kind!r} is not one of {', '.join(REWARD_KINDS)}")
    return reward(info, format_penalty, max_penalized_format_errors)
