"""Cached prompt tokens: what a provider served from its prompt cache, read from the raw HTTP answer.

AutoGen's clients keep only prompt and completion tokens; the figure a cache discount applies to is in
the provider's own usage object, under one of two names:

- OpenAI (and most compatible servers): `usage.prompt_tokens_details.cached_tokens`;
- DeepSeek: `usage.prompt_cache_hit_tokens`.

The OpenAI client is given an HTTP client whose response hook reads that figure from each JSON
answer into the slot of the call being made (`cached_slot`), a context variable the resilient client
sets around each attempt, so concurrent calls of 50 runs never mix their figures.
"""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any

import httpx

__all__ = ["CachedSlot", "cached_slot", "cached_tokens_of", "http_client_reading_cache"]

log = logging.getLogger("pse.models")


class CachedSlot:
    """Where the cached-token figure of one call lands (None: the provider reported none)."""

    def __init__(self) -> None:
        self.tokens: int | None = None


cached_slot: contextvars.ContextVar[CachedSlot | None] = contextvars.ContextVar(
    "pse_cached_slot", default=None
)


def cached_tokens_of(usage: Any) -> int | None:
    """The cached prompt tokens in a provider's usage object, in either shape; None when absent."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    found = details.get("cached_tokens") if isinstance(details, dict) else None
    if found is None:
        found = usage.get("prompt_cache_hit_tokens")
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        return None
    return found


async def _read_cached(response: httpx.Response) -> None:
    slot = cached_slot.get()
    if slot is None or response.status_code != 200:
        return
    if "application/json" not in response.headers.get("content-type", ""):
        return  # a stream: its usage comes in the last event, which AutoGen reads itself
    await response.aread()
    try:
        usage = json.loads(response.content).get("usage")
    except (ValueError, AttributeError):
        return
    found = cached_tokens_of(usage)
    if found is not None:
        slot.tokens = found


def http_client_reading_cache(timeout_s: float) -> httpx.AsyncClient:
    """An HTTP client for the OpenAI SDK that notes each answer's cached prompt tokens."""
    return httpx.AsyncClient(timeout=timeout_s, event_hooks={"response": [_read_cached]})
