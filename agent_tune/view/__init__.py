"""Looking at a run: ``agent-tune plot`` (:mod:`agent_tune.view.plot`: per-step metrics as a PNG, or verl's step
log as a table) and ``agent-tune view`` (:mod:`agent_tune.view.cli`: a run, a curriculum, an eval output or a
rollout dump as one self-contained HTML page: :mod:`~agent_tune.view.sources` reads them,
:mod:`~agent_tune.view.table` holds the episodes, :mod:`~agent_tune.view.page` writes the page from ``static/``,
:mod:`~agent_tune.view.serve` serves it while a run trains)."""
