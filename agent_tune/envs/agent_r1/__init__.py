"""The ``agent_r1`` adapter: any Agent-R1 tool env (``BaseToolEnv`` with its tools) played through agent-tune's
runner unchanged (:mod:`.env`); :mod:`.loading` resolves and builds what it is pointed at, every call into it
bounded by the time-limit rule (:mod:`agent_tune.envs.time_limits`)."""
