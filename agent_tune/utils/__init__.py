"""Small helpers shared across agent-tune, one module each (no verl, no heavy imports).

``cli_args``: argument types the command lines share. ``imports``: objects named by ``package.module:name``.
``jsonl``: the one jsonl reader. ``logs``: console logging for the entry points. ``rows``: writing verl dataset
rows (parquet + jsonl). ``typed_config``: the one typed-configuration mechanism every option block is built with
(``ConfigModel``, ``OptionError``).
"""
