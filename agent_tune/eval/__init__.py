"""Standalone evaluation against an OpenAI-compatible server or SGLang's native API (``agent-tune eval``): any
env's task catalogue (BFCL multi-turn and single-turn, tau2-bench, ReTool, plug-ins) or any env's training rows
(``--rows``); the server's API is :mod:`agent_tune.eval.servers`' choice (``--api``).

The episodes run through the training episode runner (:func:`agent_tune.rollout.run_episode`); this
package adds the server-backed policies, scheduling, resumable results, metrics and reports. What is particular
to an env (its tasks, its report sections, its official results format) is the env's own
(:class:`agent_tune.envs.base.BaseToolEnv`); nothing here names an env.
"""

from agent_tune.eval.metrics import pass_at_k, summarize

__all__ = ["pass_at_k", "summarize"]
