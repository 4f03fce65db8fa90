"""Looking at a run: ``agent-tune plot`` (:mod:`agent_tune.view.plot`: per-step metrics as a PNG, or verl's step
log as a table). The viewer of episode records and metrics of a run, eval or dump will live here too."""
