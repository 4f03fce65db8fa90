"""Shared-prefix packing (verl_ext/cpu/shared_prefix.py) computes what separate sequences compute.

The layout tests are pure; the model tests run the real SmolLM2-135M (skipped where the converted model is
not cached) on short sequences: fp32 log-probs, entropies and gradients of the packed rows against one
forward per sample with full logits, and the bf16-autocast gap (printed; bounded loosely).
"""

from __future__ import annotations

import pytest
import torch

from verl_ext.cpu.shared_prefix import attention_by_parts, group_by_prompt, plan_rows, score_rows


def _flat(sequences):
    return [torch.arange(len(s)) for s in sequences]


def test_rows_group_identical_prompts_wherever_they_sit():
    p, q = torch.tensor([5, 6, 7]), torch.tensor([5, 6, 8])
    sequences = [torch.cat([p, torch.tensor([1, 2])]), torch.cat([q, torch.tensor([3])]),
                 torch.cat([p, torch.tensor([4, 4, 4])])]
    assert group_by_prompt([p, q, p]) == [[0, 2], [1]]
    rows = plan_rows(sequences, _flat(sequences), [3, 3, 3])
    first, second = rows
    assert first.samples == [0, 2] and second.samples == [1]
    assert first.input_ids.tolist() == [5, 6, 7, 1, 2, 4, 4, 4]
    # positions restart after the prompt for each response
    assert first.position_ids.tolist() == [0, 1, 2, 3, 4, 3, 4, 5]
    # the last prompt token predicts each response's first token, then each response's own tokens
    assert first.head_positions.tolist() == [2, 3, 2, 5, 6]
    assert first.labels.tolist() == [1, 2, 4, 4, 4]
    # flat layout: sample 0 at 0..4, sample 1 at 5..8, sample 2 at 9..14; log-probs land at start + prompt - 1 + j
    assert first.targets.tolist() == [2, 3, 11, 12, 13]
    mask = first.attention_mask[0, 0]
    assert mask[5].tolist() == [True, True, True, False, False, True, False, False]  # 2nd response sees the prompt
    assert mask[4].tolist() == [True, True, True, True, True, False, False, False]
    assert not mask[1, 2]  # the prompt stays causal
    assert second.attention_mask is None  # alone: a plain causal sequence


def test_rows_refuse_a_sample_without_response():
    with pytest.raises(ValueError, match="no response token"):
        plan_rows([torch.tensor([1, 2, 3])], [torch.arange(3)], [3])


@pytest.fixture(scope="module")
def smollm2():
    from agent_tune.models.smollm2 import DEFAULT_CACHE_DIR, is_converted

    folder = DEFAULT_CACHE_DIR.expanduser()
    if not is_converted(folder):
        pytest.skip("the converted SmolLM2-135M is not cached")
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="sdpa")


def _batch(seed: int = 0):
    """Two groups (prompts of 90 and 70 tokens, 3 and 2 responses of different lengths) and a sample alone,
    interleaved as verl's ordering may leave them."""
    g = torch.Generator().manual_seed(seed)
    p1, p2, p3 = (torch.randint(100, 20000, (n,), generator=g) for n in (90, 70, 40))

    def resp(n):
        return torch.randint(100, 20000, (n,), generator=g)

    sequences = [torch.cat([p1, resp(17)]), torch.cat([p2, resp(9)]), torch.cat([p1, resp(30)]),
                 torch.cat([p3, resp(5)]), torch.cat([p1, resp(1)]), torch.cat([p2, resp(22)])]
    prompt_lens = [90, 70, 90, 40, 90, 70]
    return sequences, prompt_lens


def _separate(model, sequences, prompt_lens, temperature):
    """One forward per sample, full logits: verl's path. Log-probs and entropies in the flat layout (0 where
    no loss reads them)."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    lps, ents = [], []
    for seq, p in zip(sequences, prompt_lens):
        logits = model(input_ids=seq[None], use_cache=False).logits[0].div(temperature)
        lp = logprobs_from_logits(logits, torch.roll(seq, -1))
        ent = entropy_from_logits(logits)
        keep = torch.zeros(len(seq), dtype=torch.bool)
        keep[p - 1:-1] = True
        lps.append(torch.where(keep, lp, 0.0))
        ents.append(torch.where(keep, ent, 0.0))
    return torch.cat(lps), torch.cat(ents)


def _packed(model, sequences, prompt_lens, temperature):
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    rows = plan_rows(sequences, _flat(sequences), prompt_lens)
    temps = torch.full((len(sequences),), temperature)
    total = sum(len(s) for s in sequences)
    return score_rows(model, rows, total, temps, logprobs_from_logits, entropy_from_logits)


def _run(model, fn, sequences, prompt_lens, autocast: bool):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        lp, ent = fn(model, sequences, prompt_lens, 0.7)
        loss = -(lp.float().sum() + 1e-3 * ent.float().sum()) / lp.numel()
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return lp.detach().float(), ent.detach().float(), grads


def test_packed_matches_separate_sequences_in_fp32(smollm2):
    sequences, prompt_lens = _batch()
    lp_ref, ent_ref, g_ref = _run(smollm2, _separate, sequences, prompt_lens, autocast=False)
    lp, ent, g = _run(smollm2, _packed, sequences, prompt_lens, autocast=False)
    assert (lp_ref != 0).sum() == sum(len(s) - p for s, p in zip(sequences, prompt_lens))
    assert torch.equal(lp == 0, lp_ref == 0)  # the same positions carry values
    assert (lp - lp_ref).abs().max() < 2e-4
    assert (ent - ent_ref).abs().max() < 2e-4
    assert (g - g_ref).norm() / g_ref.norm() < 1e-4


def test_packed_bf16_gap_is_bf16_rounding(smollm2):
    """Under bf16 autocast the packed and separate paths differ only by reduction order: the gap is of the
    size of bf16 noise, far below a token's log-prob spread."""
    sequences, prompt_lens = _batch(seed=1)
    lp32, _, g32 = _run(smollm2, _separate, sequences, prompt_lens, autocast=False)
    lp_ref, _, g_ref = _run(smollm2, _separate, sequences, prompt_lens, autocast=True)
    lp, _, g = _run(smollm2, _packed, sequences, prompt_lens, autocast=True)
    gap = (lp - lp_ref).abs().max().item()
    noise = (lp_ref - lp32).abs().max().item()  # what bf16 itself costs against fp32
    grad_gap = ((g - g_ref).norm() / g_ref.norm()).item()
    print(f"bf16: packed vs separate max |dlogp| {gap:.4f}, separate bf16 vs fp32 {noise:.4f}; "
          f"gradient relative gap {grad_gap:.4f} (bf16 vs fp32 {((g_ref - g32).norm() / g32.norm()).item():.4f})")
    assert gap < 2 * noise + 1e-3
    assert grad_gap < 0.1


def test_packed_under_gradient_checkpointing_matches_without(smollm2):
    """The backward recomputes each checkpointed layer's forward: held over forward and backward (as the engine
    holds it over a micro-batch loop), the attention switch gives the gradients of the run without
    checkpointing. Released after the forward, the recomputation took SDPA's path and torch refused it."""
    sequences, prompt_lens = _batch(seed=2)
    _, _, g_ref = _run(smollm2, _packed, sequences, prompt_lens, autocast=False)
    smollm2.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    smollm2.train()
    try:
        with attention_by_parts(smollm2) as by_parts:
            _, _, g = _run(smollm2, _packed, sequences, prompt_lens, autocast=False)
    finally:
        smollm2.gradient_checkpointing_disable()
        smollm2.eval()
    assert by_parts and smollm2.config._attn_implementation == "sdpa"  # switched back on leaving
    assert (g - g_ref).norm() / g_ref.norm() < 1e-5


def test_unpacked_batches_attend_as_sdpa_under_the_switch(smollm2):
    """verl's own path runs inside the switch too: a padded batch (2D mask) gives SDPA's logits exactly."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(100, 20000, (2, 24), generator=g)
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, 16:] = 0
    with torch.no_grad():
        plain = smollm2(input_ids=ids, attention_mask=mask, use_cache=False).logits
        with attention_by_parts(smollm2):
            switched = smollm2(input_ids=ids, attention_mask=mask, use_cache=False).logits
    assert torch.equal(plain[0], switched[0]) and torch.equal(plain[1, :16], switched[1, :16])
