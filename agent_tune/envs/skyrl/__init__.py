"""The ``skyrl`` adapter: any SkyRL-gym text env played through agent-tune's runner (:mod:`.env`)."""
