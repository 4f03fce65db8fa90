"""An OpenAI-compatible endpoint's config checks and start-up check (the simulated user's, tau2's judge's).

The check itself is :func:`agent_tune.openai_client.check_model` (aiohttp; the client the eval and the user
use): ``GET <base_url>/models`` answers and lists the model. Here its failure becomes a ``ValueError`` (a bad
config, found at start-up).
"""

from __future__ import annotations

import os
from typing import Any

from agent_tune.errors import EnvError
from agent_tune.openai_client import ServerError, check_model


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


def check_endpoint_options(prefix: str, options: Any) -> None:
    """Raise ``ValueError`` naming ``<prefix>.<key>`` for the first invalid client option of an endpoint config
    (``base_url``, ``temperature``, ``timeout_s``, ``max_retries``, ``backoff_s``, ``api_key_env``)."""
    if not options.base_url.startswith(("http://", "https://")):
        raise ValueError(f"{prefix}.base_url must start with http:// or https:// (got {options.base_url!r})")
    if not 0.0 <= float(options.temperature) <= 2.0:
        raise ValueError(f"{prefix}.temperature must be in [0, 2] (got {options.temperature})")
    if float(options.timeout_s) <= 0:
        raise ValueError(f"{prefix}.timeout_s must be > 0 (got {options.timeout_s})")
    if int(options.max_retries) < 0:
        raise ValueError(f"{prefix}.max_retries must be >= 0 (got {options.max_retries})")
    if float(options.backoff_s) < 0:
        raise ValueError(f"{prefix}.backoff_s must be >= 0 (got {options.backoff_s})")
    if options.api_key_env is not None and options.api_key_env not in os.environ:
        raise ValueError(f"{prefix}.api_key_env names {options.api_key_env!r}, which is not set in the environment")
