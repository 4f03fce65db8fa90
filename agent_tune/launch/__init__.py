"""The command lines that start verl, and what they do around it: everything here runs in the launcher's
processes, never inside verl's (that code is in ``verl_ext``).

- :mod:`~agent_tune.launch.launcher` - the skeleton ``agent-tune train`` and ``agent-tune sft`` share: the
  command line, the composed config, one ordered start-up pipeline as named phases (also run on each stage of
  a curriculum), the training child with its log file, exit codes;
- :mod:`~agent_tune.launch.run_config` - the typed run description the launchers pass on: the composed config
  and its ``agent_tune`` block, parsed once;
- :mod:`~agent_tune.launch.compose` - composing a Hydra config from ``config/`` (and the ``smollm2`` model
  alias, the data-file check); :mod:`~agent_tune.launch.resolvers` - the resolvers those configs use;
- :mod:`~agent_tune.launch.train` - ``agent-tune train`` (GRPO with verl's PPO trainer) and the training
  child it starts; :mod:`~agent_tune.launch.sft` - ``agent-tune sft`` (verl's SFT trainer under torchrun);
- :mod:`~agent_tune.launch.curriculum` - ``agent-tune curriculum``: training stages, each from the model the
  one before produced;
- :mod:`~agent_tune.launch.console` - what the console shows while a run trains;
  :mod:`~agent_tune.launch.step_metrics` - the per-step ``metrics.jsonl`` the training child writes;
- start-up checks of the composed config: :mod:`~agent_tune.launch.attention` (flash-attention),
  :mod:`~agent_tune.launch.lora` (LoRA keys), :mod:`~agent_tune.launch.cluster` (joining a Ray cluster);
- :mod:`~agent_tune.launch.config_value` - one value of a composed config, for launch scripts.

Importing the package imports nothing else; verl is imported only where a command needs it.
"""
