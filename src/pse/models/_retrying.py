"""When a provider call is retried: the retry policy, each failure judged retry, auth, context or fatal."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Literal

import httpx
import ollama
import openai

from pse.models._context import is_context_overflow
from pse.models._ratelimit import retry_after_s

__all__ = ["FailureKind", "RetryPolicy", "classify_failure", "lost_connection", "retry_after", "short_text"]

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
