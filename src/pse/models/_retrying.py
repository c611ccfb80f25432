"""When a provider call is retried: the retry policy, each failure judged retry, auth, context or fatal."""

from __future__ import annotations

import email.utils
import logging
import math
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import httpx
import ollama
import openai

from pse.models._context import is_context_overflow

__all__ = [
    "RETRY_AFTER_CAP_S",
    "FailureKind",
    "RetryPolicy",
    "classify_failure",
    "lost_connection",
    "retry_after",
    "retry_after_s",
    "short_text",
]

log = logging.getLogger("pse.models")

RETRY_AFTER_CAP_S = 120.0
"""The longest a provider's Retry-After makes PSE wait."""


_RETRY_STATUS = frozenset({408, 409, 425, 429})
_BACKOFF_CAP_S = 60.0
_OPENAI_PREFIX = re.compile(r"^Error code: \d+ - ")  # the SDK's own prefix; we say "HTTP <status>" already


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one call: a timeout per attempt, retries after the first, first backoff delay."""

    timeout_s: float
    max_retries: int
    backoff_s: float

    def delay(self, retry: int) -> float:
        """Delay before retry number `retry` (1-based): exponential, with ±50 % jitter."""
        base: float = min(_BACKOFF_CAP_S, self.backoff_s * 2.0 ** (retry - 1))
        return base * (0.5 + random.random())


FailureKind = Literal["retry", "auth", "context", "fatal"]


def classify_failure(exc: BaseException) -> tuple[FailureKind, str] | None:
    """How to treat a provider exception; None when it is no provider failure (a bug: let it propagate)."""
    if isinstance(exc, TimeoutError):
        return "retry", "no answer within the timeout"
    if isinstance(exc, openai.APIStatusError):
        return _by_status(exc.status_code, short_text(_OPENAI_PREFIX.sub("", exc.message)))
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return "retry", f"connection failed: {short_text(str(exc.__cause__ or exc))}"
    if isinstance(exc, ollama.ResponseError):
        return _by_status(exc.status_code, short_text(str(exc.error)))
    if isinstance(
        exc, ConnectionError | httpx.TransportError
    ):  # ollama raises the builtin on refused connects
        return "retry", f"connection failed: {short_text(str(exc) or type(exc).__name__)}"
    if isinstance(exc, openai.OpenAIError | ollama.RequestError | httpx.HTTPError):
        return "fatal", short_text(str(exc) or type(exc).__name__)
    return None


def lost_connection(exc: BaseException) -> bool:
    """The server was not there (or hung up): a refused or dropped connection, not a timeout or an HTTP
    error."""
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return False
    return isinstance(exc, openai.APIConnectionError | ConnectionError | httpx.TransportError)


def _by_status(status: int, message: str) -> tuple[FailureKind, str]:
    text = f"HTTP {status}: {message}"
    if status in (401, 403):
        return "auth", text
    if status in (400, 413, 422) and is_context_overflow(message):
        return "context", text
    if status in _RETRY_STATUS or status >= 500:
        return "retry", text
    return "fatal", text


def retry_after(exc: BaseException) -> float | None:
    """The Retry-After of a provider's HTTP error, seconds, capped (None: none, or "now"; Ollama's
    errors carry no headers)."""
    if isinstance(exc, openai.APIStatusError):
        return retry_after_s(exc.response.headers, time.time()) or None
    return None


def short_text(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """How long a response's `retry-after-ms` or `Retry-After` header asks to wait, in seconds.

    `Retry-After` is seconds or an HTTP date (compared with `now`, seconds since the epoch). None when
    neither header is there or readable; a date in the past is 0.0. More than `RETRY_AFTER_CAP_S` is
    cut to it, with a warning (`pse.models` logger): an hour's pause would outlast most runs.
    """
    asked = _asked_wait(headers, now)
    if asked is not None and asked > RETRY_AFTER_CAP_S:
        log.warning(
            "a model server asked to wait %.0f s (Retry-After); PSE waits at most %.0f s (RETRY_AFTER_CAP_S)",
            asked,
            RETRY_AFTER_CAP_S,
        )
        return RETRY_AFTER_CAP_S
    return asked


def _asked_wait(headers: Mapping[str, str], now: float) -> float | None:
    lowered = {name.lower(): value for name, value in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name, "").strip()
        if not value:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            if scale != 1.0:
                continue
            try:
                date = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            if date.tzinfo is None:
                continue
            seconds = date.timestamp() - now
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None
