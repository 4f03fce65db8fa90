"""The start-up check of an OpenAI-compatible endpoint: it answers ``GET <base_url>/models`` and lists the model."""

from __future__ import annotations

import os
from typing import Any

import httpx


class EndpointUnavailableError(ValueError):
    """An endpoint failed its start-up check (the message names what it is for and its URL)."""


def check_endpoint(base_url: str, model: str, headers: dict[str, str], timeout_s: float, what: str) -> None:
    """``GET <base_url>/models``; raise :class:`EndpointUnavailableError` naming ``what`` and the URL unless it
    answers as an OpenAI-compatible server and lists ``model``."""
    url = f"{base_url.rstrip('/')}/models"
    try:
        response = httpx.get(url, headers=headers, timeout=min(timeout_s, 10.0))
        response.raise_for_status()
        listed = [m.get("id") for m in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError, TypeError) as exc:
        raise EndpointUnavailableError(
            f"{what} at {base_url.rstrip('/')} is unreachable or not OpenAI-compatible "
            f"(GET {url}: {type(exc).__name__}: {exc})") from None
    if model not in listed:
        raise EndpointUnavailableError(
            f"{what} at {base_url.rstrip('/')} does not serve model {model!r} (it lists {listed})")


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
