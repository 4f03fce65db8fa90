"""verl glue for agent-tune: the only package that imports verl.

Sub-packages: ``verl_ext.cpu`` (verl's missing CPU platform and the vLLM-on-CPU fixes) and ``verl_ext.train``
(the Hydra entry point behind ``agent-tune train``). Importing ``verl_ext`` itself imports nothing heavy.
"""
