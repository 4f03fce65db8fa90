"""Small helpers shared across agent-tune, one module each (no verl, no heavy imports).

``cli_args``: argument types the command lines share. ``config_checks``: checks of the typed option blocks.
``imports``: objects named by ``package.module:name``. ``jsonl``: the one jsonl reader. ``logs``: console logging
for the entry points. ``rows``: writing verl dataset rows (parquet + jsonl).
"""
