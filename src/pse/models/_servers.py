"""Which model servers answered in this process, and what PSE knows of those it started itself.

A llama-cpp-python server dies outright on a grammar its llama.cpp refuses (a repetition over its limit):
the next call finds nothing listening, and "connection refused" says nothing of why. A server that
answered earlier in the process and then stops answering has crashed, and the message says so; when
PSE started it (`pse.local.LocalServer`), the server's own exit status and last log line come with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["crash_note", "note_answered", "note_started_server"]

_LOCK = threading.Lock()
_ANSWERED: set[str] = set()
_STARTED: dict[str, Callable[[], str | None]] = {}


def _key(url: str) -> str:
    return url.rstrip("/")


def note_started_server(base_url: str, last_words: Callable[[], str | None]) -> Callable[[], None]:
    """Register a server PSE started at `base_url`; `last_words()` says how it ended (None: still up).

    Returns the function that forgets it (call it when the server is stopped on purpose).
    """
    key = _key(base_url)
    with _LOCK:
        _STARTED[key] = last_words

    def forget() -> None:
        with _LOCK:
            if _STARTED.get(key) is last_words:
                del _STARTED[key]

    return forget


def note_answered(base_url: str) -> None:
    """A server at `base_url` answered a call."""
    with _LOCK:
        _ANSWERED.add(_key(base_url))


def crash_note(base_url: str) -> str | None:
    """Why calls to `base_url` now fail to connect, when it looks like a crash; None otherwise.

    A server that answered in this process and now refuses connections crashed; one PSE started says
    how it ended. A server never reached before may just be down or misnamed: None.
    """
    key = _key(base_url)
    with _LOCK:
        answered, last_words = key in _ANSWERED, _STARTED.get(key)
    ended = last_words() if last_words is not None else None
    if ended is not None:
        return f"the server crashed (grammar rejected?): {ended}"
    if answered:
        return (
            "the server crashed (grammar rejected?): it answered earlier in this run and now accepts no "
            "connection"
        )
    return None
