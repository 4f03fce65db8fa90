"""verl's FSDP language-model engine for device ``cpu``, scoring a micro batch with shared-prefix packing.

:class:`SharedPrefixFSDPEngine` is verl 0.9.1's ``FSDPEngineWithLMHead`` with one change, switched by
``fsdp_config.shared_prefix`` (:class:`CPUFSDPEngineConfig`, set from ``agent_tune.cpu_shared_prefix`` in
config/device/cpu.yaml): its ``forward_step`` packs the samples of a micro batch that share a prompt into
one row and computes the language-model head only where the loss reads it
(:mod:`verl_ext.cpu.shared_prefix`). The log-probs (and entropies) come back in verl's per-sample nested
layout, so verl's loss, its log-prob and reference passes and its metrics read them unchanged. Micro
batches the packing does not cover (fused kernels, distillation, sum-pi-squared, multimodal inputs, sequence
parallelism) take verl's own path.

A forward-only model (the reference policy of a KL penalty) is built without verl's CPU offload: verl offloads it
to host memory with pinned pages to spare accelerator memory, and pinning needs an accelerator; on CPU the model
is in host memory already.

It also sets torch's thread count (``fsdp_config.torch_threads``, from ``agent_tune.cpu_threads``) before
building the model: Ray starts an actor that asks for no CPUs with ``OMP_NUM_THREADS=1``, and verl's workers
ask only for (logical) GPUs, so without this the update computes on one core of the machine.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

import torch
from verl.utils import tensordict_utils as tu
from verl.utils.device import get_device_id
from verl.utils.model import extract_multi_modal_inputs
from verl.utils.torch_functional import logprobs_from_logits
from verl.workers.config import FSDPEngineConfig
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
from verl.workers.engine.utils import detach_tree

from verl_ext.cpu.shared_prefix import attention_by_parts, plan_rows, score_rows

logger = logging.getLogger(__name__)


@dataclass
class CPUFSDPEngineConfig(FSDPEngineConfig):
    """verl's FSDP engine config plus ``shared_prefix``: score a group's shared prompt once per micro batch."""

    shared_prefix: bool = False
    torch_threads: int = 0  # torch's intra-op threads in the worker; 0: every core the process may run on


def torch_threads(setting: int) -> int:
    """The thread count ``setting`` asks for: itself when positive, else the cores this process may run on.

    Raises:
        ValueError: a negative setting (the message names the key).
    """
    if setting < 0:
        raise ValueError(f"config key 'agent_tune.cpu_threads' (fsdp_config.torch_threads): {setting} is negative")
    if setting:
        return setting
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this OS
        return os.cpu_count() or 1


def _packable(engine: FSDPEngineWithLMHead, micro_batch) -> bool:
    """Whether the micro batch is one the packed path computes exactly as verl's own path would."""
    if not getattr(engine.engine_config, "shared_prefix", False) or engine.use_ulysses_sp:
        return False
    for key in ("use_fused_kernels", "distillation_use_topk", "distillation_only", "calculate_sum_pi_squared"):
        if tu.get_non_tensor_data(data=micro_batch, key=key, default=False):
            return False
    # verl's agent loop gives every sample a multi_modal_inputs entry, empty for text: read it as verl does
    if extract_multi_modal_inputs(micro_batch.get("multi_modal_inputs", [])) or micro_batch["position_ids"].dim() != 2:
        return False
    return micro_batch["input_ids"].is_nested and "prompts" in micro_batch.keys()


def _prompt_lengths(micro_batch) -> list[int]:
    """Each sample's prompt length (the same rule as verl's ``no_padding_2_padding``)."""
    prompts = micro_batch["prompts"]
    if prompts.is_nested:
        return prompts.offsets().diff().tolist()
    return micro_batch["attention_mask"][:, : prompts.shape[1]].sum(dim=1).tolist()


class SharedPrefixFSDPEngine(FSDPEngineWithLMHead):
    """``FSDPEngineWithLMHead`` whose forward scores shared prompts once, computing on the configured
    threads (see the module docstring)."""

    def initialize(self):
        threads = torch_threads(int(getattr(self.engine_config, "torch_threads", 0)))
        if torch.get_num_threads() != threads:
            logger.warning("torch threads in the %s worker: %d -> %d", type(self).__name__,
                           torch.get_num_threads(), threads)
            torch.set_num_threads(threads)
        return super().initialize()

    def _build_fsdp_module(self, module):
        if not self.engine_config.forward_only:
            return super()._build_fsdp_module(module)
        # verl reads forward_only here only to choose the offload (pinned host memory, which needs an
        # accelerator); the model is built as any other, sharded on the CPU mesh
        config = self.engine_config
        self.engine_config = dataclasses.replace(config, forward_only=False)
        try:
            return super()._build_fsdp_module(module)
        finally:
            self.engine_config = config

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        if not getattr(self.engine_config, "shared_prefix", False):
            return super().forward_backward_batch(data, loss_function, forward_only)
        # the attention switch spans the backward: with gradient checkpointing it recomputes each layer's
        # forward, which must take the packed forward's attention path (a micro batch that is not packed
        # attends exactly as under SDPA)
        with attention_by_parts(self.module):
            return super().forward_backward_batch(data, loss_function, forward_only)

    def forward_step(self, micro_batch, loss_function, forward_only):
        if not _packable(self, micro_batch):
            return super().forward_step(micro_batch, loss_function, forward_only)
        micro_batch = micro_batch.to(get_device_id())
        input_ids = micro_batch["input_ids"]
        sequences = list(input_ids.unbind())
        positions = list(micro_batch["position_ids"].unbind())
        rows = plan_rows(sequences, positions, _prompt_lengths(micro_batch))
        if not getattr(self, "_told_packing", False):  # once per process: the run's log shows the packing works
            self._told_packing = True
            logger.warning("shared-prefix packing: %d samples scored in %d rows of %s tokens on %d threads",
                           len(sequences), len(rows), [int(r.input_ids.shape[0]) for r in rows],
                           torch.get_num_threads())
        temperature = micro_batch["temperature"]
        if not isinstance(temperature, torch.Tensor) or temperature.dim() == 0:
            temperature = torch.full((len(sequences),), float(temperature))
        calculate_entropy = tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False)
        autocast_dtype = getattr(self, "_autocast_dtype", torch.bfloat16)
        with torch.autocast(device_type="cpu", dtype=autocast_dtype, enabled=autocast_dtype != torch.float32):
            log_probs, entropy = score_rows(
                self.module, rows, int(input_ids.values().shape[0]), temperature.to(torch.float32),
                lambda logits, labels: logprobs_from_logits(logits, labels, inplace_backward=not calculate_entropy),
                self.compute_entropy_from_logits if calculate_entropy else None)
            offsets = input_ids.offsets()
            model_output: dict[str, Any] = {"log_probs": torch.nested.nested_tensor_from_jagged(log_probs, offsets)}
            if entropy is not None:
                model_output["entropy"] = torch.nested.nested_tensor_from_jagged(entropy, offsets)
            if loss_function is not None:
                loss, metrics = loss_function(model_output=model_output, data=micro_batch,
                                              dp_group=self.get_data_parallel_group())
            else:
                assert forward_only, "forward_only must be True when loss_function is None"
                loss, metrics = torch.tensor(1.0), {}
        return loss, {"model_output": detach_tree(model_output), "loss": loss.detach().item(), "metrics": metrics}
