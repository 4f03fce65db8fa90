"""An OpenAI-compatible endpoint's options and start-up check (the simulated user's, tau2's judge's).

The check itself is :func:`agent_tune.openai_client.check_model` (aiohttp; the client the eval and the user
use): ``GET <base_url>/models`` answers and lists the model. Here its failure becomes a ``ValueError`` (a bad
config, found at start-up). :class:`EndpointOptions` are the client options both blocks have.
"""

from __future__ import annotations

import os

from agent_tune.errors import EnvError
from agent_tune.openai_client import ServerError, check_model
from agent_tune.utils.typed_config import ConfigModel, OptionError


class EndpointUnavailableError(EnvError, ValueError):
    """An endpoint failed its start-up check (the message names what it is for and its URL)."""


def check_endpoint(base_url: str, model: str, api_key: str | None, timeout_s: float, what: str) -> None:
    """``GET <base_url>/models`` (waiting at most ``min(timeout_s, 10)`` s); raise
    :class:`EndpointUnavailableError` naming ``what`` and the URL unless it answers as an OpenAI-compatible
    server and lists ``model``."""
    try:
        check_model(base_url, model, api_key, min(float(timeout_s), 10.0), what)
    except ServerError as exc:
        raise EndpointUnavailableError(str(exc)) from None


class EndpointOptions(ConfigModel):
    """The client options of an OpenAI-compatible endpoint, shared by the simulated user's and tau2's judge's
    blocks: ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``) serving ``model``, sampled with ``temperature``;
    ``api_key_env`` names the environment variable holding the API key (``None``: no key is sent). A request
    waits ``timeout_s``; a failed or unusable answer is retried ``max_retries`` times, waiting ``backoff_s``,
    then twice as long each time, between tries."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0

    def check_endpoint_options(self) -> None:
        """For a block that uses its endpoint: raise :class:`OptionError` naming the first invalid client option
        (relative key, as a validator raises it)."""
        if not (self.base_url or "").startswith(("http://", "https://")):
            raise OptionError("base_url", f"must start with http:// or https:// (got {self.base_url!r})")
        if not 0.0 <= self.temperature <= 2.0:
            raise OptionError("temperature", f"must be in [0, 2] (got {self.temperature})")
        if self.timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0 (got {self.timeout_s})")
        if self.max_retries < 0:
            raise OptionError("max_retries", f"must be >= 0 (got {self.max_retries})")
        if self.backoff_s < 0:
            raise OptionError("backoff_s", f"must be >= 0 (got {self.backoff_s})")
        if self.api_key_env is not None and self.api_key_env not in os.environ:
            raise OptionError("api_key_env", f"names {self.api_key_env!r}, which is not set in the environment")
