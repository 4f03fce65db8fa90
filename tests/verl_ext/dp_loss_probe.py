"""One fixed batch through verl's actor with 1 FSDP rank and with 2 FSDP ranks on gloo; print what they gave.

    python -m tests.verl_ext.dp_loss_probe [--config-name agent_tune_grpo_cpu] [override ...]

The actor is verl's own ``ActorRolloutRefWorker`` (role ``actor``) in a ``RayWorkerGroup``, built from the
``actor_rollout_ref`` section of an agent-tune CPU config, exactly as verl's v1 trainer builds it; the batch
goes through the trainer's own conversion (``DataProto.to_tensordict`` + ``left_right_2_no_padding`` + the
meta-data ``_update_actor`` / ``_compute_old_log_prob`` add). One Ray session serves both world sizes (the
start-up is paid once); each worker group loads the model from the same HF folder, so both start from the
same weights. For each world size the probe records the per-token log-probs (forward only), then one PPO
update: ``actor/pg_loss`` and ``actor/grad_norm`` (the norm of the all-reduced gradient, before clipping).

The batch: 8 sequences of random tokens (seeded) with uneven prompt and response lengths (left/right
padding as the agent loop produces), old log-probs = the 1-rank log-probs plus fixed noise (so the PPO
ratio, and with it the loss, depends on the model), fixed random advantages.

Prints one JSON line ``{"1": {...}, "2": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import numpy as np
import torch

N_SEQ = 8
PROMPT_LEN = 24
RESPONSE_LEN = 24


def fixed_batch(vocab_size: int, seed: int = 0):
    """8 left-padded prompts + right-padded responses of uneven lengths, as a verl ``DataProto``."""
    from verl import DataProto

    gen = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(8, PROMPT_LEN + 1, (N_SEQ,), generator=gen)
    response_lens = torch.randint(4, RESPONSE_LEN + 1, (N_SEQ,), generator=gen)
    prompts = torch.zeros(N_SEQ, PROMPT_LEN, dtype=torch.long)
    responses = torch.zeros(N_SEQ, RESPONSE_LEN, dtype=torch.long)
    prompt_mask = torch.zeros(N_SEQ, PROMPT_LEN, dtype=torch.long)
    response_mask = torch.zeros(N_SEQ, RESPONSE_LEN, dtype=torch.long)
    for i in range(N_SEQ):
        p, r = int(prompt_lens[i]), int(response_lens[i])
        prompts[i, PROMPT_LEN - p:] = torch.randint(100, vocab_size, (p,), generator=gen)
        prompt_mask[i, PROMPT_LEN - p:] = 1
        responses[i, :r] = torch.randint(100, vocab_size, (r,), generator=gen)
        response_mask[i, :r] = 1
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
        "advantages": torch.randn(N_SEQ, 1, generator=gen).expand(N_SEQ, RESPONSE_LEN) * response_mask,
    }
    # the trainer puts the sampling temperature in the batch's meta-info (the workers scale the logits by it)
    batch = DataProto.from_single_dict(tensors, meta_info={"temperature": 1.0})
    return batch, torch.randn(N_SEQ, RESPONSE_LEN, generator=gen) * 0.05


def _as_td(batch, **meta):
    """The trainer's conversion of a padded ``DataProto`` to what the workers take."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(batch.to_tensordict())
    tu.assign_non_tensor(td, **meta)
    return td


def run_world_size(config, world_size: int, batch, noise: torch.Tensor, old_log_probs: torch.Tensor | None) -> dict:
    """Build the actor on ``world_size`` ranks, compute log-probs, run one update; tear the group down.

    The update's old log-probs are ``old_log_probs``, or (when None) this group's own log-probs + ``noise``.
    """
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.utils.padding import no_padding_2_padding

    pool = RayResourcePool(process_on_nodes=[world_size], use_gpu=True, max_colocate_count=1,
                           name_prefix=f"dp{world_size}_")
    cls = RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker), config=config.actor_rollout_ref, role="actor")
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=cls, device_name=config.trainer.device)
    try:
        group.init_model()
        td = _as_td(batch, calculate_entropy=False, calculate_sum_pi_squared=False, compute_loss=False)
        out = group.compute_log_prob(td)
        log_probs = no_padding_2_padding(tu.get(out, "log_probs"), td).float()
        mask = batch.batch["response_mask"]
        old = (log_probs + noise) * mask if old_log_probs is None else old_log_probs
        update = batch.select(deepcopy=True)
        update.batch["old_log_probs"] = old
        mini = int(config.actor_rollout_ref.actor.ppo_mini_batch_size) * int(config.actor_rollout_ref.rollout.n)
        td = _as_td(update, calculate_entropy=False, distillation_use_topk=False, distillation_only=False,
                    global_batch_size=mini, mini_batch_size=mini, epochs=1, seed=1,
                    dataloader_kwargs={"shuffle": False}, compute_loss=True)
        metrics = tu.get(group.update_actor(td), "metrics")
    finally:
        for worker in group.workers:
            ray.kill(worker)
        for pg in pool.get_placement_groups(device_name=config.trainer.device):
            ray.util.remove_placement_group(pg)
    return {
        "log_probs": log_probs[batch.batch["response_mask"].bool()].tolist(),
        "pg_loss": _scalar(_metric(metrics, "pg_loss")),
        "grad_norm": _scalar(_metric(metrics, "grad_norm")),
        "old_log_probs": old,
    }


def _metric(metrics: dict, name: str):
    """``name`` or ``actor/name`` (verl's worker returns the loss's own key, the trainer renames it)."""
    for key in (name, f"actor/{name}"):
        if key in metrics:
            return metrics[key]
    raise KeyError(f"{name} not in the update's metrics: {sorted(metrics)}")


def _scalar(value) -> float:
    """A metric as verl's worker returns it: one value per mini-batch (here one), already reduced over the
    micro-batches and DP ranks, possibly collected once per rank (equal values) -> their mean."""
    if isinstance(value, (list, tuple)):
        return float(np.mean([_scalar(v) for v in value]))
    return float(getattr(value, "value", value))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-name", default="agent_tune_grpo_cpu")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    from agent_tune.launch.compose import compose_config, resolve_model_paths
    from agent_tune.launch.run_config import RunConfig
    from agent_tune.launch.train import MODEL_KEYS

    config = compose_config(args.config_name, args.overrides)
    resolve_model_paths(config, MODEL_KEYS, RunConfig.parse(config).options.model_cache_dir)
    from verl_ext.cpu.launch import enable_cpu_support

    enable_cpu_support(config)
    import ray
    from omegaconf import OmegaConf
    from transformers import AutoConfig

    ray_init = OmegaConf.to_container(config.ray_kwargs.ray_init, resolve=True)
    ray.init(num_cpus=ray_init.get("num_cpus"), num_gpus=2, runtime_env=ray_init.get("runtime_env"),
             include_dashboard=False)
    try:
        vocab = AutoConfig.from_pretrained(config.actor_rollout_ref.model.path).vocab_size
        batch, noise = fixed_batch(vocab)
        one = run_world_size(config, 1, batch, noise, None)
        two = run_world_size(config, 2, batch, noise, one["old_log_probs"])
    finally:
        ray.shutdown()
    for result in (one, two):
        result.pop("old_log_probs")
    print(json.dumps({"1": one, "2": two}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
