"""The ``agent_r1`` adapter: any Agent-R1 tool env (``BaseToolEnv`` with its tools) played through agent-tune's
runner unchanged (:mod:`.env`); :mod:`.loading` resolves and builds what it is pointed at, :mod:`.bounded` bounds
every call into it in time."""
