"""verl glue for agent-tune: what runs inside verl's own processes (its trainer, its Ray workers, torchrun).

- :mod:`verl_ext.agent_loop` - agent-tune's agent loop, registered with verl (``agent_loops.yaml``);
- :mod:`verl_ext.trainers` - verl's trainers by name (main PPO, one-step-off-policy, fully async);
- :mod:`verl_ext.task_weighting` - the task weighting's sampler; :mod:`verl_ext.advantage_weighting` - its
  advantage weights; :mod:`verl_ext.task_weighting_runner` - either plugged into verl's task runner;
  :mod:`verl_ext.sample_records` - reading the agent loop's per-episode records as they are appended;
- :mod:`verl_ext.replay_loop` - the agent loops of the debugging modes (rollout-only recording, replay of a dump);
- :mod:`verl_ext.sft_dataset` - the dataset verl's SFT trainer loads (``data.custom_cls``);
- ``verl_ext.cpu`` - verl's missing CPU platform and the vLLM-on-CPU fixes.

The commands that start verl (``agent-tune train`` / ``sft`` / ``curriculum``) are in :mod:`agent_tune.launch`.
Importing ``verl_ext`` itself imports nothing heavy.
"""
