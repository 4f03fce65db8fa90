"""T3RL's debugging modes (``agent_tune.debug``, docs/debugging.md), set up for verl by ``agent-tune train``.

Both run verl's own v1 sync trainer loop; :func:`prepare_debug` checks the config and sets what the mode needs:

- ``rollout_only``: the training rows' agent loop becomes :class:`verl_ext.replay_loop.RecordingLoop` (agent-tune's
  loop, every sample also written to the step dump ``agent_tune.debug.dump_dir``); ``trainer.critic_warmup`` is
  set past any step, so verl's step skips the actor update (it runs everything before: rewards, the actor's
  log-probs, advantages); ``trainer.save_freq=-1`` (weights never change); without a KL reward,
  ``actor.use_kl_loss=false``, so no reference policy is built or run. A critic (``algorithm.adv_estimator``
  needing one) is refused: verl would train it.
- ``replay`` (of ``replay_dir``): the training rows' agent loop becomes :class:`verl_ext.replay_loop.ReplayLoop`
  (the dumped sample of the same step, row and sample number, nothing generated) and verl's agent loop manager
  :class:`verl_ext.replay_loop.ReplayAgentLoopManager` (a step whose samples are not all dumped stops the run,
  naming them). Validation is refused (its rows were never dumped).

The agent loops go to ``<trainer.default_local_dir>/agent_loops_<mode>.yaml``: agent-tune's registrations
(``verl_ext/agent_loops.yaml``) with ``agent_tune`` pointing to the mode's loop, and both loops under their own
names (``agent_tune_record``, ``agent_tune_replay``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import OmegaConf, open_dict

import verl_ext
from agent_tune.errors import ConfigError
from agent_tune.launch.run_config import RunConfig
from agent_tune.options import DebugModes
from agent_tune.rollout.dump import dumped_steps

logger = logging.getLogger(__name__)

BASE_LOOPS = Path(verl_ext.__file__).resolve().with_name("agent_loops.yaml")
LOOP_NAME = "agent_tune"
RECORD_NAME, REPLAY_NAME = "agent_tune_record", "agent_tune_replay"  # verl_ext.replay_loop's own names
ROLLOUT_ONLY, REPLAY = "rollout_only", "replay"
LOOP_CLASSES = {ROLLOUT_ONLY: "verl_ext.replay_loop.RecordingLoop", REPLAY: "verl_ext.replay_loop.ReplayLoop"}
REPLAY_MANAGER = "verl_ext.replay_loop.ReplayAgentLoopManager"
LOOPS_KEY = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
MANAGER_KEY = "actor_rollout_ref.rollout.agent.agent_loop_manager_class"
# trainer.critic_warmup in rollout-only mode: verl updates the actor from this step on, which no run reaches
NO_UPDATE_BEFORE = 10**9


def mode(debug: DebugModes) -> str | None:
    """``rollout_only``, ``replay`` or ``None``."""
    return ROLLOUT_ONLY if debug.rollout_only else REPLAY if debug.replay else None


def check_debug(run: RunConfig) -> None:
    """The checks of :func:`prepare_debug`, without changing the config. Raises :class:`ConfigError` naming the key:
    a trainer other than verl's v1 ``sync`` one, the task weighting or validation on, another agent loop file or
    manager, rollout-only with a critic or into a folder holding a dump, replay of a folder with no step dump or
    of more steps than it holds."""
    from agent_tune.launch.batch_split import need_critic
    from verl_ext.trainers import MAIN_PPO

    config, debug = run.config, run.options.debug
    trainer = run.options.trainer or MAIN_PPO
    which = mode(debug)
    if which is None:
        return
    key = f"agent_tune.debug.{which}"
    trainer_mode = OmegaConf.select(config, "trainer.v1.trainer_mode", default="sync")
    if trainer != MAIN_PPO or not OmegaConf.select(config, "trainer.use_v1", default=False) \
            or trainer_mode != "sync":
        raise ConfigError(f"config key '{key}': needs verl's v1 sync trainer (agent_tune.trainer main_ppo, "
                          f"trainer.use_v1=true, trainer.v1.trainer_mode=sync: its rows carry the step and sample "
                          f"number the dump is keyed by); got agent_tune.trainer={trainer}, "
                          f"use_v1={OmegaConf.select(config, 'trainer.use_v1', default=None)}, "
                          f"trainer_mode={trainer_mode}")
    if run.options.task_weighting.enable:
        raise ConfigError(f"config key 'agent_tune.task_weighting.enable': not with {key} (the task weighting may draw "
                          "a row twice in a step, and a replay's draws would not follow the dump)")
    # validation rows would play through the mode's loop too: dumped among a step's samples, or never dumped
    if OmegaConf.select(config, "trainer.val_before_train", default=True):
        raise ConfigError(f"config key 'trainer.val_before_train': set false with {key} (the training rows are "
                          f"the ones dumped and replayed; +debug={which} sets it)")
    test_freq = OmegaConf.select(config, "trainer.test_freq", default=-1)
    if isinstance(test_freq, int) and test_freq > 0:
        raise ConfigError(f"config key 'trainer.test_freq': set -1 with {key} (the training rows are the ones "
                          f"dumped and replayed; +debug={which} sets it)")
    loops = OmegaConf.select(config, LOOPS_KEY, default=None)
    if loops and Path(str(loops)).expanduser().resolve() != BASE_LOOPS:
        raise ConfigError(f"config key '{LOOPS_KEY}': {key} replaces agent-tune's agent loop file; leave it unset "
                          f"(got {loops})")
    if which == ROLLOUT_ONLY:
        if need_critic(config):
            raise ConfigError(f"config key 'algorithm.adv_estimator': {key} skips the update, but verl would "
                              "still train the critic; use an estimator without one (grpo)")
        dump_dir = debug.dump_dir or str(run.run_dir / "rollout_dump")
        held = dumped_steps(Path(dump_dir).expanduser())
        if held:
            raise ConfigError(f"config key 'agent_tune.debug.dump_dir': {dump_dir} already holds the dump of steps "
                              f"{held}; remove it or dump elsewhere")
        return
    steps = dumped_steps(Path(str(debug.replay_dir)).expanduser())
    if not steps:
        raise ConfigError(f"config key 'agent_tune.debug.replay_dir': no step dump (step_<N>/ folders) in "
                          f"{debug.replay_dir}; give the "
                          "agent_tune.debug.dump_dir of a rollout-only run")
    total = OmegaConf.select(config, "trainer.total_training_steps", default=None)
    if isinstance(total, int) and total > steps[-1]:
        raise ConfigError(f"config key 'trainer.total_training_steps': {total}, but {debug.replay_dir} holds steps "
                          f"{steps[0]}..{steps[-1]}")
    manager = OmegaConf.select(config, MANAGER_KEY, default=None)
    if manager not in (None, REPLAY_MANAGER):
        raise ConfigError(f"config key '{MANAGER_KEY}': {key} uses {REPLAY_MANAGER}; got {manager}")


def prepare_debug(run: RunConfig) -> RunConfig:
    """Check ``agent_tune.debug`` (:func:`check_debug`) and set the keys its mode needs (module docstring);
    the run unchanged when no mode is on. Part of :func:`agent_tune.launch.train.prepare`."""
    config, debug = run.config, run.options.debug
    which = mode(debug)
    if which is None:
        return run
    check_debug(run)
    out = run.run_dir
    loops = [dict(entry) for entry in OmegaConf.to_container(OmegaConf.load(BASE_LOOPS), resolve=True)]
    named = {RECORD_NAME: LOOP_CLASSES[ROLLOUT_ONLY], REPLAY_NAME: LOOP_CLASSES[REPLAY], LOOP_NAME: LOOP_CLASSES[which]}
    loops = [e for e in loops if e.get("name") not in named] + [{"name": k, "_target_": v} for k, v in named.items()]
    loops_file = out / f"agent_loops_{which}.yaml"
    loops_file.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(loops), loops_file)
    with open_dict(config):
        OmegaConf.update(config, LOOPS_KEY, str(loops_file))
        if which == ROLLOUT_ONLY:
            dump_dir = Path(debug.dump_dir).expanduser().resolve() if debug.dump_dir else out / "rollout_dump"
            debug = debug.model_copy(update={"dump_dir": str(dump_dir)})
            OmegaConf.update(config, "trainer.critic_warmup", NO_UPDATE_BEFORE)
            OmegaConf.update(config, "trainer.save_freq", -1)
            if not OmegaConf.select(config, "algorithm.use_kl_in_reward", default=False):
                OmegaConf.update(config, "actor_rollout_ref.actor.use_kl_loss", False)
            logger.info("rollout-only: no update; every sample dumped to %s", dump_dir)
        else:
            replay_dir = Path(str(debug.replay_dir)).expanduser().resolve()
            debug = debug.model_copy(update={"replay_dir": str(replay_dir)})
            OmegaConf.update(config, MANAGER_KEY, REPLAY_MANAGER, force_add=True)
            logger.info("replay: each step trains on the samples dumped in %s", replay_dir)
    return run.set_options(debug=debug)
