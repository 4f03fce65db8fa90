"""agent-tune: multi-turn tool-use reinforcement learning for LLMs.

The library layer: environments, parsers, rollout, rewards, tools and evaluation; it imports and works
without verl, Ray or vLLM installed. ``agent_tune.launch`` holds the commands that start verl (``agent-tune
train`` / ``sft`` / ``curriculum``, run in the launcher's processes); ``verl_ext`` the code that runs inside
verl's processes.
"""

__version__ = "0.1.0"
