"""The ``verl_tools`` env: verl's own tools played as an agent-tune environment (:mod:`.env`)."""
