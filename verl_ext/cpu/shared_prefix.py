"""Shared-prefix packing: score a GRPO group's samples in one sequence that holds their prompt once.

The samples of a group share their prompt (~85% of each sequence's tokens in the CPU main job). Scoring
them as separate sequences computes the prompt once per sample. Here the samples whose prompt token ids
are identical become one row ``[prompt, response_1, ..., response_k]`` with a block attention mask
(the prompt is causal; response i sees the prompt and, causally, itself) and position ids that restart
after the prompt for every response, so each response token sees exactly the context it has in its own
sequence. The language-model head and the log-softmax run only on the positions whose log-prob a loss
reads: the last prompt token (it predicts each response's first token) and every response token but the
last. The results are scattered back into the flat per-sample layout of verl's nested tensors; the
other positions (prompt tokens, each sequence's last token) hold 0 and are never read.

The math is that of the separate sequences; only the order of floating-point reductions differs
(tests/verl_ext/test_shared_prefix.py measures the gap on SmolLM2).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import torch

ATTENTION = "agent_tune_shared_prefix"  # the attention implementation name registered with transformers


@dataclass
class PackedRow:
    """One model input row: a prompt and the responses of the samples that share it."""

    samples: list[int]  # indices of the samples in the micro batch, in row order
    input_ids: torch.Tensor  # (T,)
    position_ids: torch.Tensor  # (T,)
    attention_mask: Optional[torch.Tensor]  # (1, 1, T, T) bool, True = attend; None: plain causal (one sample)
    head_positions: torch.Tensor  # (N,) row positions whose hidden state feeds the head
    labels: torch.Tensor  # (N,) the token each head position predicts
    targets: torch.Tensor  # (N,) where each log-prob lands in the micro batch's flat (total_nnz,) layout
    lengths: list[int]  # response length per sample: its run of head positions
    prompt_len: int
    spans: list[tuple[int, int]]  # each response's (begin, end) in the row


def shared_prefix_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                            scaling: Optional[float] = None, shared_prefix: Optional[tuple] = None,
                            **kwargs) -> tuple[torch.Tensor, None]:
    """transformers attention for a packed row in two SDPA calls: the prompt's queries causally over the
    prompt (the kernel skips the masked half), then all response queries against the whole row under the
    row's mask (each response sees the prompt and itself). One call under the (T, T) mask would evaluate
    every pair of the row. ``shared_prefix`` is ``(prompt_len, mask)`` with ``mask`` the response rows of
    the row's mask, (R, T) bool; without it this is transformers' SDPA attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if shared_prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    prompt_len, mask = shared_prefix
    gqa = query.shape[1] != key.shape[1]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    prompt = sdpa(query[:, :, :prompt_len], key[:, :, :prompt_len], value[:, :, :prompt_len], scale=scaling,
                  is_causal=True, enable_gqa=gqa)
    responses = sdpa(query[:, :, prompt_len:], key, value, attn_mask=mask, scale=scaling, enable_gqa=gqa)
    return torch.cat([prompt, responses], dim=2).transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Register :func:`shared_prefix_attention` with transformers under :data:`ATTENTION`, with SDPA's mask
    builder (under the switch, a forward without ``shared_prefix`` builds and uses the masks SDPA would).
    Idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, shared_prefix_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


@contextlib.contextmanager
def attention_by_parts(model: torch.nn.Module) -> Iterator[bool]:
    """Switch a model on SDPA to :func:`shared_prefix_attention` while the context is open; re-entrant. Hold
    it over the backward too when the model uses gradient checkpointing: the backward recomputes each layer's
    forward, which must take the same attention path (the engine holds it over a whole
    ``forward_backward_batch``). Other attention implementations keep their own and get the explicit mask.
    Yields whether the model attends by parts."""
    config = getattr(model, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    if implementation == ATTENTION:  # an outer context switched it
        yield True
        return
    if config is None or implementation != "sdpa":
        yield False
        return
    register_attention()
    config._attn_implementation = ATTENTION
    try:
        yield True
    finally:
        config._attn_implementation = "sdpa"


def group_by_prompt(prompts: Sequence[torch.Tensor]) -> list[list[int]]:
    """Indices of samples with identical prompt token ids, in order of first appearance."""
    groups: dict[bytes, list[int]] = {}
    for index, prompt in enumerate(prompts):
        key = prompt.detach().cpu().to(torch.int64).numpy().tobytes()
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def build_row(samples: list[int], sequences: Sequence[torch.Tensor], positions: Sequence[torch.Tensor],
              prompt_lens: Sequence[int], starts: Sequence[int]) -> PackedRow:
    """The packed row of ``samples`` (all with the same prompt).

    ``sequences[i]`` / ``positions[i]`` are sample i's tokens (prompt + response) and position ids,
    ``prompt_lens[i]`` its prompt length, ``starts[i]`` its offset in the micro batch's flat layout.
    """
    first = samples[0]
    prompt_len = int(prompt_lens[first])
    pieces_ids = [sequences[first][:prompt_len]]
    pieces_pos = [positions[first][:prompt_len]]
    head, labels, targets, spans = [], [], [], []
    offset = prompt_len
    for i in samples:
        response = sequences[i][prompt_len:]
        length = int(response.shape[0])
        pieces_ids.append(response)
        pieces_pos.append(positions[i][prompt_len:])
        # response token j is predicted by the previous token: the prompt's last one for j = 0
        head.append(torch.cat([torch.tensor([prompt_len - 1]), torch.arange(offset, offset + length - 1)]))
        labels.append(response)
        targets.append(torch.arange(length) + int(starts[i]) + prompt_len - 1)
        spans.append((offset, offset + length))
        offset += length
    total = offset
    mask = None
    if len(samples) > 1:
        causal = torch.ones(total, total, dtype=torch.bool).tril_()
        mask = torch.zeros(total, total, dtype=torch.bool)
        mask[:prompt_len, :prompt_len] = causal[:prompt_len, :prompt_len]
        for begin, end in spans:
            mask[begin:end, :prompt_len] = True
            mask[begin:end, begin:end] = causal[: end - begin, : end - begin]
        mask = mask[None, None]
    return PackedRow(samples=list(samples), input_ids=torch.cat(pieces_ids), position_ids=torch.cat(pieces_pos),
                     attention_mask=mask, head_positions=torch.cat(head), labels=torch.cat(labels).long(),
                     targets=torch.cat(targets), lengths=[int(sequences[i].shape[0]) - prompt_len for i in samples],
                     prompt_len=prompt_len, spans=spans)


def plan_rows(sequences: Sequence[torch.Tensor], positions: Sequence[torch.Tensor],
              prompt_lens: Sequence[int]) -> list[PackedRow]:
    """Rows for a micro batch: one per distinct prompt (a sample alone in its group gets a causal row).

    Raises:
        ValueError: a sample whose tokens do not start with its prompt's length of tokens, or a response
            of length 0.
    """
    starts, total = [], 0
    for sequence in sequences:
        starts.append(total)
        total += int(sequence.shape[0])
    prompts = []
    for i, sequence in enumerate(sequences):
        if not 0 < int(prompt_lens[i]) < int(sequence.shape[0]):
            raise ValueError(f"sample {i}: prompt length {int(prompt_lens[i])} of a {sequence.shape[0]}-token "
                             "sequence leaves no response token")
        prompts.append(sequence[: int(prompt_lens[i])])
    return [build_row(group, sequences, positions, prompt_lens, starts) for group in group_by_prompt(prompts)]


def score_rows(model: Callable[..., object], rows: Sequence[PackedRow], total: int, temperature: torch.Tensor,
               log_prob_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
               entropy_fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
               ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Per-token log-probs (and entropies) of every row, in the flat (total,) layout.

    ``model`` is a Hugging Face causal LM (FSDP-wrapped or not) that takes ``logits_to_keep`` as a tensor of
    positions; ``temperature`` is per sample (logits are divided by it before the softmax, as verl does).
    """
    log_probs, entropies, targets = [], [], []
    for row in rows:
        inputs = dict(input_ids=row.input_ids[None], position_ids=row.position_ids[None],
                      attention_mask=row.attention_mask, logits_to_keep=row.head_positions, use_cache=False)
        if row.attention_mask is None:
            output = model(**inputs)
        else:
            with attention_by_parts(model) as by_parts:
                if by_parts:
                    inputs["shared_prefix"] = (row.prompt_len, row.attention_mask[0, 0, row.prompt_len:])
                output = model(**inputs)
        logits = output.logits[0]  # (N, vocab)
        scale = torch.repeat_interleave(temperature[row.samples].to(torch.float32), torch.tensor(row.lengths))
        logits = logits.div(scale.to(logits.dtype).unsqueeze(-1))
        log_probs.append(log_prob_fn(logits, row.labels.to(logits.device)))
        if entropy_fn is not None:
            entropies.append(entropy_fn(logits))
        targets.append(row.targets)
    index = torch.cat(targets).to(log_probs[0].device)
    flat = log_probs[0].new_zeros(total).index_copy(0, index, torch.cat(log_probs).to(log_probs[0].dtype))
    entropy = None
    if entropy_fn is not None:
        entropy = entropies[0].new_zeros(total).index_copy(0, index, torch.cat(entropies).to(entropies[0].dtype))
    return flat, entropy

