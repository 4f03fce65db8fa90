"""Standalone evaluation against an OpenAI-compatible server (``agent-tune eval``): BFCL multi-turn and
single-turn, tau2-bench, or any environment's rows (``--rows``).

The episodes run through the training episode runner (:func:`agent_tune.rollout.run_episode`); this
package adds the server-backed policies, scheduling, resumable results, metrics and reports.
"""

from agent_tune.eval.metrics import pass_at_k, summarize

__all__ = ["pass_at_k", "summarize"]
