"""A shared model rate limit: per provider and base URL, requests, tokens and calls in flight.

Every real model call of a process (every run, every role) asks the limiter of its endpoint before
each attempt. An endpoint is a `LimitKey`, `(provider, public base URL)`: two roles on one server
share its limit, a second server has its own. The limits are `PSE_MODEL_RPM`, `PSE_MODEL_TPM` and
`PSE_MODEL_MAX_CONCURRENCY`; with none set there is no limiter at all (`limiter_for` is None).

The math (`LimitState`, pure and synchronous; every method takes the time `now`):

- **Requests** are spaced evenly: a request starts no sooner than `60 / rpm` s after the previous one
  to that endpoint (a token bucket that holds one request and refills at `rpm / 60` per second). Any
  half-open 60 s window then holds at most `rpm` requests, and any 1 s window at most
  `ceil(rpm / 60)`. A bucket with room for a burst of `b` could not promise both: some 60 s window
  would hold `rpm + b - 1` (and providers that quantize per-minute limits to seconds refuse bursts).
- **Tokens** are held to a sliding window: the tokens of the calls started in the last 60 s, plus the
  new call's, never exceed `tpm`. A call reserves its prompt (PSE's offline count) plus its
  completion limit (`PSE_MODEL_MAX_TOKENS`; without one the completion is counted only once it is
  known) and is settled with the usage the provider reported, so only a reservation that was too
  small can take a window over. A call larger than `tpm` waits for an empty window and goes alone.
- **Calls in flight** are at most `max_concurrency`, from admission until release.
- **A pause** (a provider's `Retry-After`) holds every call to the endpoint until it ends.

Each request carries its own `Limits` (the settings of its run); one endpoint's state is shared.

The seam for other executors (a Ray cluster, one named actor): the process-wide backend is a
`LimiterBackend`, three coroutines::

    async def acquire(key: LimitKey, limits: Limits, tokens: int) -> Grant
    async def release(grant: Grant, used_tokens: int | None) -> None
    async def pause(key: LimitKey, seconds: float) -> None

`LocalLimiter` is the default: a `LimitState` behind asyncio waits. A worker of a cluster calls
`install_limiter_backend(backend)` before its runs start, with a backend that forwards the three calls
to one shared actor, which holds a `LocalLimiter` of its own (so waits happen on the actor's clock;
only durations cross machines). Every argument and result is a plain frozen value (picklable).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pse.config import Settings

__all__ = [
    "WINDOW_S",
    "Admission",
    "Grant",
    "LimitKey",
    "LimitState",
    "LimiterBackend",
    "Limits",
    "LocalLimiter",
    "RateLimiter",
    "install_limiter_backend",
    "limiter_backend",
    "limiter_for",
]

WINDOW_S = 60.0
"""The window of the per-minute limits, seconds."""
_RELEASE_POLL_S = 0.05  # a call held by the concurrency limit also looks again this often (other loops)

LimitKey = tuple[str, str]
"""An endpoint: (provider, public base URL, as `public_url` gives it)."""


@dataclass(frozen=True)
class Limits:
    """The limits one call is held to (0: no limit of that kind)."""

    rpm: int = 0
    tpm: int = 0
    concurrency: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits of `PSE_MODEL_RPM`, `PSE_MODEL_TPM` and `PSE_MODEL_MAX_CONCURRENCY`."""
        return cls(settings.model_rpm, settings.model_tpm, settings.model_max_concurrency)

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return bool(self.rpm or self.tpm or self.concurrency)


@dataclass(frozen=True)
class Grant:
    """A call admitted: release it with its ticket when the attempt is over.

    Attributes:
        key: the endpoint.
        ticket: which admission this is (unique within the state that issued it).
        waited_s: how long the call waited to be admitted (0.0 when it was admitted at once).
    """

    key: LimitKey
    ticket: int
    waited_s: float = 0.0


@dataclass(frozen=True)
class Admission:
    """What `LimitState.admit` decided: a ticket, or how long to wait before asking again.

    Attributes:
        ticket: the admission, or None when the call must wait.
        wait_s: seconds until the time-bound limits (requests, tokens, a pause) can admit the call.
        full: the concurrency limit holds it: only a release can admit it.
    """

    ticket: int | None
    wait_s: float = 0.0
    full: bool = False


@dataclass
class _Endpoint:
    last_start: float | None = None
    paused_until: float = -math.inf
    window: dict[int, tuple[float, int]] = field(default_factory=dict)
    """ticket -> (start, tokens) of the calls started in the last 60 s, in the order they started."""
    in_flight: set[int] = field(default_factory=set)

    def expire(self, now: float) -> None:
        while self.window:
            ticket, (start, _) = next(iter(self.window.items()))
            if start > now - WINDOW_S:
                return
            del self.window[ticket]

    def tokens_wait(self, now: float, need: int, tpm: int) -> float:
        """Seconds until `need` more tokens fit in the window."""
        excess = sum(tokens for _, tokens in self.window.values()) + need - tpm
        for start, tokens in self.window.values():
            if excess <= 0:
                break
            excess -= tokens
            if excess <= 0:
                return start + WINDOW_S - now
        return 0.0


class LimitState:
    """The limits of every endpoint, as plain data: deterministic, synchronous, never sleeps.

    Not thread-safe by itself (`LocalLimiter` holds a lock around it). `now` is any monotonic clock,
    the same for every call of one state.
    """

    def __init__(self) -> None:
        self._endpoints: dict[LimitKey, _Endpoint] = {}
        self._tickets = itertools.count(1)

    def admit(self, key: LimitKey, now: float, limits: Limits, tokens: int = 0) -> Admission:
        """Admit a call of about `tokens` tokens at `now`, or say how long it must wait."""
        ep = self._endpoints.setdefault(key, _Endpoint())
        ep.expire(now)
        wait = ep.paused_until - now
        if limits.rpm and ep.last_start is not None:
            wait = max(wait, ep.last_start + WINDOW_S / limits.rpm - now)
        if limits.tpm:
            wait = max(wait, ep.tokens_wait(now, min(tokens, limits.tpm), limits.tpm))
        full = bool(limits.concurrency) and len(ep.in_flight) >= limits.concurrency
        if wait > 0 or full:
            return Admission(None, max(wait, 0.0), full)
        ticket = next(self._tickets)
        ep.last_start = now
        ep.window[ticket] = (now, tokens)
        ep.in_flight.add(ticket)
        return Admission(ticket)

    def settle(self, key: LimitKey, ticket: int, used_tokens: int | None = None) -> None:
        """The call of `ticket` is over: it leaves the calls in flight, and its tokens become
        `used_tokens` (None: its reservation stands)."""
        ep = self._endpoints.get(key)
        if ep is None:
            return
        ep.in_flight.discard(ticket)
        if used_tokens is not None and ticket in ep.window:
            ep.window[ticket] = (ep.window[ticket][0], used_tokens)

    def pause(self, key: LimitKey, now: float, seconds: float) -> float:
        """Hold every call to `key` for `seconds` from `now` (a longer pause already set stays);
        returns when the pause ends."""
        ep = self._endpoints.setdefault(key, _Endpoint())
        ep.paused_until = max(ep.paused_until, now + seconds)
        return ep.paused_until

    def pause_left(self, key: LimitKey, now: float) -> float:
        """Seconds the pause of `key` still holds calls (0.0: none)."""
        ep = self._endpoints.get(key)
        return max(0.0, ep.paused_until - now) if ep is not None else 0.0

    def in_flight(self, key: LimitKey) -> int:
        """Calls to `key` admitted and not yet released."""
        ep = self._endpoints.get(key)
        return len(ep.in_flight) if ep is not None else 0

    def window_tokens(self, key: LimitKey, now: float) -> int:
        """Tokens of the calls to `key` started in the 60 s before `now`."""
        ep = self._endpoints.get(key)
        if ep is None:
            return 0
        ep.expire(now)
        return sum(tokens for _, tokens in ep.window.values())


class LimiterBackend(Protocol):
    """Where limited calls are admitted: this process (`LocalLimiter`) or a shared service."""

    async def acquire(self, key: LimitKey, limits: Limits, tokens: int) -> Grant:
        """Wait until a call of about `tokens` tokens to `key` is admitted under `limits`."""
        ...

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        """The admitted call is over; it used `used_tokens` (None: as reserved)."""
        ...

    async def pause(self, key: LimitKey, seconds: float) -> None:
        """Hold every call to `key` for `seconds` (a provider's Retry-After)."""
        ...


@dataclass
class _LoopWaits:
    turns: dict[LimitKey, asyncio.Lock] = field(default_factory=dict)
    released: dict[LimitKey, asyncio.Event] = field(default_factory=dict)


class LocalLimiter:
    """The limits of this process: one `LimitState` behind asyncio waits.

    Calls to one endpoint wait their turn first come, first served (within one event loop); the state
    is behind a lock, so runs on other threads' loops share it too (a release there is seen within
    50 ms). A cancelled wait takes nothing.

    Args:
        clock: the monotonic clock of the state.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = LimitState()
        self.clock = clock
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaits] = (
            weakref.WeakKeyDictionary()
        )

    def _waits(self) -> _LoopWaits:
        loop = asyncio.get_running_loop()
        with self._lock:
            return self._loops.setdefault(loop, _LoopWaits())

    async def acquire(self, key: LimitKey, limits: Limits, tokens: int) -> Grant:
        waits = self._waits()
        turn = waits.turns.setdefault(key, asyncio.Lock())
        released = waits.released.setdefault(key, asyncio.Event())
        started, held = self.clock(), turn.locked()
        async with turn:
            while True:
                released.clear()
                with self._lock:
                    admission = self.state.admit(key, self.clock(), limits, tokens)
                if admission.ticket is not None:
                    return Grant(key, admission.ticket, self.clock() - started if held else 0.0)
                held = True
                if not admission.full:
                    await asyncio.sleep(admission.wait_s)
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(released.wait(), admission.wait_s or _RELEASE_POLL_S)

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        with self._lock:
            self.state.settle(grant.key, grant.ticket, used_tokens)
        released = self._waits().released.get(grant.key)
        if released is not None:
            released.set()

    async def pause(self, key: LimitKey, seconds: float) -> None:
        with self._lock:
            self.state.pause(key, self.clock(), seconds)


_backend: LimiterBackend | None = None
_backend_lock = threading.Lock()


def limiter_backend() -> LimiterBackend:
    """The backend every limited call of this process uses (a `LocalLimiter` unless one was installed)."""
    global _backend
    with _backend_lock:
        if _backend is None:
            _backend = LocalLimiter()
        return _backend


def install_limiter_backend(backend: LimiterBackend | None) -> LimiterBackend | None:
    """Admit every limited model call of this process through `backend` from now on.

    Install it before runs start: a call admitted by one backend is released to the backend installed
    when it ends. None goes back to a fresh `LocalLimiter` (made on first use).

    Returns:
        The backend it replaces (None if there was none yet), so a caller can put it back.
    """
    global _backend
    with _backend_lock:
        previous, _backend = _backend, backend
    return previous


@dataclass(frozen=True)
class RateLimiter:
    """What a model client holds: its run's limits, and how many completion tokens a call reserves.

    Every call goes to the backend installed at that moment (`limiter_backend`).
    """

    limits: Limits
    completion_tokens: int = 0
    """Tokens reserved for each answer before it is known (`PSE_MODEL_MAX_TOKENS`, else 0)."""

    async def acquire(self, key: LimitKey, prompt_tokens: int) -> Grant:
        """Wait until a call with a prompt of `prompt_tokens` to `key` may start."""
        return await limiter_backend().acquire(key, self.limits, prompt_tokens + self.completion_tokens)

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        """The call is over; it used `used_tokens` (None: unknown, its reservation stands)."""
        await limiter_backend().release(grant, used_tokens)

    async def pause(self, key: LimitKey, seconds: float) -> None:
        """Hold every call to `key`, in every run, for `seconds`."""
        await limiter_backend().pause(key, seconds)


def limiter_for(settings: Settings) -> RateLimiter | None:
    """The limiter of the model clients of `settings`, or None when no limit is set (no overhead)."""
    limits = Limits.of(settings)
    if not limits.active:
        return None
    return RateLimiter(limits, settings.model_max_tokens or 0)
