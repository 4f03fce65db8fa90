"""The ``verl_tools`` env: verl's own tools (the ``BaseTool`` s of a verl tool-config YAML and ``@function_tool``
functions), loaded by verl's loader (:mod:`.loader`), called as verl's ``ToolAgentLoop`` calls them, each call bounded
in time (:mod:`.calls`), the reward from their ``calc_reward`` or a reward function (:mod:`.reward`), played as an
agent-tune environment (:mod:`.env`)."""
