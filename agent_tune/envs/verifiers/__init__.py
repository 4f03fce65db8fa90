"""The ``verifiers`` adapter: a verifiers ``MultiTurnEnv`` / ``ToolEnv`` with its dataset and rubric (:mod:`.env`)."""
