"""The ``retool`` env: math reasoning with a sandboxed Python interpreter in raw text (:mod:`.env`), its tasks
from a local file or a Hub dataset (:mod:`.tasks`)."""
