"""The ``agent_r1`` adapter: any Agent-R1 tool env with its tools, played through agent-tune's runner (:mod:`.env`)."""
