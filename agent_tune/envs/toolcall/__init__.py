"""The ``toolcall`` env: single-turn function calling rewarded by ToolRL's reward and its variants (:mod:`.env`),
its tasks from BFCL's single-turn entries, ToolRL's rlla data, a jsonl file or synthetic arithmetic
(:mod:`.tasks`, :mod:`.rlla`)."""
