"""Start-up check that a step's batch splits evenly over the trainer's data-parallel ranks.

verl 0.9.1 splits every step's samples (``data.train_batch_size x actor_rollout_ref.rollout.n``) equally over
the actor's data-parallel ranks: the v0 trainer's ``_balance_batch`` asserts it
(``verl/utils/seqlen_balancing.py``); the v1 trainer pads the batch up to a multiple with dummy sequences.
Each PPO mini-batch (``ppo_mini_batch_size x rollout.n`` samples) must split too: the engine worker's
``train_mini_batch`` asserts ``mini_batch_size % dp_size == 0`` (``verl/workers/engine_workers.py``), and, without
dynamic batch size, a rank's share into micro-batches of ``ppo_micro_batch_size_per_gpu``
(``verl/workers/engine/utils.py``).
verl's own ``validate_config`` checks none of this with ``use_dynamic_bsz`` on (the GPU configs), so a
batch that does not divide fails at the first update, after the models loaded and a whole rollout ran.
:func:`check_batch_split` fails at start-up instead, naming the keys and their values.

The data-parallel size is what verl's engine reports for the role (``get_data_parallel_size``): the
role's GPUs (``trainer.n_gpus_per_node x trainer.nnodes``, the pool every role shares) divided by its
sequence-parallel size (FSDP, VeOmni) or tensor x pipeline x context parallel sizes (Megatron).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from agent_tune.errors import ConfigError

FSDP_STRATEGIES = ("fsdp", "fsdp2")


@dataclass(frozen=True)
class DataParallel:
    """A role's data-parallel size and how it follows from the config (for messages)."""

    size: int
    how: str


def _int(config: DictConfig, key: str, default: int = 1) -> int:
    """``key`` as an int (``default`` when absent or null)."""
    value = OmegaConf.select(config, key, default=None)
    return default if value is None else int(value)


def world_size(config: DictConfig) -> tuple[int, str]:
    """The GPUs the actor (and critic) train on: ``trainer.n_gpus_per_node x trainer.nnodes``, with a text
    naming the keys."""
    per_node, nnodes = _int(config, "trainer.n_gpus_per_node"), _int(config, "trainer.nnodes")
    return per_node * nnodes, f"trainer.n_gpus_per_node={per_node} x trainer.nnodes={nnodes}"


def data_parallel(config: DictConfig, role: str) -> DataParallel:
    """The data-parallel size of ``role`` (``actor_rollout_ref.actor`` or ``critic``) as verl's engine for its
    ``strategy`` computes it.

    Raises:
        ConfigError: the role's GPUs do not divide by its model-parallel size (naming the keys).
    """
    world, world_how = world_size(config)
    strategy = str(OmegaConf.select(config, f"{role}.strategy", default="fsdp"))
    if strategy in FSDP_STRATEGIES:
        # the FSDP engine: world // ulysses_sequence_parallel_size of its engine config; the actor's deprecated
        # top-level key replaces fsdp_config's when > 1 (FSDPActorConfig.__post_init__)
        engine = "fsdp_config" if role != "critic" else "fsdp"
        parts = [(f"{role}.{engine}.ulysses_sequence_parallel_size",
                  _int(config, f"{role}.{engine}.ulysses_sequence_parallel_size"))]
        if role != "critic" and _int(config, f"{role}.ulysses_sequence_parallel_size") > 1:
            parts = [(f"{role}.ulysses_sequence_parallel_size",
                      _int(config, f"{role}.ulysses_sequence_parallel_size"))]
    elif strategy == "megatron":
        if OmegaConf.select(config, f"{role}.megatron.dynamic_context_parallel", default=False):
            return DataParallel(1, f"{role}.megatron.dynamic_context_parallel=true (verl uses dp 1)")
        parts = [(f"{role}.megatron.{key}", _int(config, f"{role}.megatron.{key}"))
                 for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")]
    elif strategy == "veomni":
        parts = [(f"{role}.veomni.ulysses_parallel_size", _int(config, f"{role}.veomni.ulysses_parallel_size"))]
    elif strategy == "torchtitan":
        shard = _int(config, f"{role}.torchtitan.data_parallel_shard_size")
        replicate = _int(config, f"{role}.torchtitan.data_parallel_replicate_size")
        return DataParallel(shard * replicate, f"{role}.torchtitan.data_parallel_shard_size={shard} x "
                                               f"data_parallel_replicate_size={replicate}")
    else:  # an engine whose mesh this check does not know: every GPU a data-parallel rank
        parts = []
    model_parallel = 1
    for _, size in parts:
        model_parallel *= size
    divisors = "".join(f" / {key}={size}" for key, size in parts if size != 1)
    if model_parallel < 1 or world % model_parallel:
        raise ConfigError(f"config keys {world_how}{divisors}: the {world} GPUs do not divide into groups of "
                          f"{model_parallel}")
    return DataParallel(world // model_parallel, f"{world_how}{divisors}")


def need_critic(config: DictConfig) -> bool:
    """Whether verl builds a critic for ``config`` (its own ``need_critic``), without its warning: verl warns
    "Disabled critic as algorithm.adv_estimator != gae" on every call, which is GRPO's normal case."""
    from verl.trainer.ppo.utils import need_critic as verl_need_critic

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Disabled critic", category=UserWarning)
        return bool(verl_need_critic(config))


def check_batch_split(config: DictConfig, use_critic: bool | None = None) -> None:
    """Fail when a step's samples or a PPO mini-batch's do not divide by the data-parallel size.

    Checks ``data.train_batch_size x actor_rollout_ref.rollout.n`` and
    ``actor_rollout_ref.actor.ppo_mini_batch_size x rollout.n`` against the actor's data-parallel size, and
    ``critic.ppo_mini_batch_size x rollout.n`` against the critic's when a critic is used (``use_critic``;
    None asks verl's ``need_critic``). Runs whatever ``use_dynamic_bsz`` says: the split is by samples.

    Raises:
        ConfigError: naming the batch keys, their values, and the keys the data-parallel size comes from.
    """
    n = _int(config, "actor_rollout_ref.rollout.n")
    checks = [("actor_rollout_ref.actor", "data.train_batch_size"),
              ("actor_rollout_ref.actor", "actor_rollout_ref.actor.ppo_mini_batch_size")]
    if use_critic if use_critic is not None else need_critic(config):
        checks.append(("critic", "critic.ppo_mini_batch_size"))
    for role, key in checks:
        value = OmegaConf.select(config, key, default=None)
        if value is None:
            continue
        dp = data_parallel(config, role)
        samples = int(value) * n
        if samples % dp.size:
            raise ConfigError(
                f"config key '{key}'={value} x 'actor_rollout_ref.rollout.n'={n} = {samples} samples do not split "
                f"evenly over {dp.size} data-parallel ranks ({dp.how}); verl needs an equal share per rank: make "
                f"{key} x rollout.n a multiple of {dp.size}, or change the GPU count")
    _check_micro_batch(config, n)


def _check_micro_batch(config: DictConfig, n: int) -> None:
    """Without dynamic batch size, a rank's share of a PPO mini-batch splits into micro-batches of
    ``actor.ppo_micro_batch_size_per_gpu`` (verl's ``prepare_micro_batches`` asserts it divides)."""
    actor = "actor_rollout_ref.actor"
    micro, mini = (OmegaConf.select(config, f"{actor}.{k}", default=None)
                   for k in ("ppo_micro_batch_size_per_gpu", "ppo_mini_batch_size"))
    if micro is None or mini is None or OmegaConf.select(config, f"{actor}.use_dynamic_bsz", default=False):
        return
    dp = data_parallel(config, actor)
    share = int(mini) * n // dp.size
    if int(micro) < 1 or share % int(micro):
        raise ConfigError(
            f"config key '{actor}.ppo_micro_batch_size_per_gpu'={micro}: a rank's share of a PPO mini-batch "
            f"({actor}.ppo_mini_batch_size={mini} x rollout.n={n} / {dp.size} ranks = {share} samples) does not "
            f"split into micro-batches of {micro}; verl asserts it does (use_dynamic_bsz is off)")
