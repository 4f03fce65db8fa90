"""agent-tune: multi-turn tool-use reinforcement learning for LLMs.

The library layer: environments, parsers, rollout, rewards, tools and evaluation.
It imports and works without verl, Ray or vLLM installed; ``verl_ext`` holds the verl glue.
"""

__version__ = "0.1.0"
