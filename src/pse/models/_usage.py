"""What a model call costs, from `settings.prices` (per million tokens)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pse.config import Settings
from pse.events import Cost, ProbeRecord

__all__ = ["SETTLE_S", "CallUsage", "Cost", "UsageMeter", "UsageSink", "price_of"]

SETTLE_S = 1.0
"""Longest a stopped run waits for the calls it stopped while their provider was answering (`settle`)."""


def price_of(
    settings: Settings, model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> Cost:
    """Cost of one call (or of a sum of calls) of `model`.

    The price is looked up by exact model name, then by the name without a
    `provider/` prefix or an Ollama `:tag`. A model with no price costs 0 and is listed in
    `unpriced_models`, so a trace can say "unpriced" instead of claiming it was free. The prompt
    tokens the provider served from its cache (`cached_tokens`, part of `prompt_tokens`) cost the
    price's `cached_input`, when it has one.
    """
    price = settings.prices.get(model)
    if price is None:
        for candidate in (model.rsplit("/", 1)[-1], model.split(":", 1)[0]):
            price = settings.prices.get(candidate)
            if price is not None:
                break
    if price is None:
        return Cost(amount=0.0, unpriced_models=[model])
    cached = min(cached_tokens, prompt_tokens)
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = prompt_tokens - cached
    amount = (fresh * price.input + cached * cached_price + completion_tokens * price.output) / 1_000_000
    return Cost(amount=amount, currency=price.currency)


@dataclass(frozen=True)
class CallUsage:
    """What one model call cost, as the client saw it.

    Attributes:
        role: whose call it was.
        prompt / completion: tokens, as the provider reported them, or estimated (`estimated`).
        estimated: the provider reported nothing (the call timed out or was cancelled): PSE's counter
            estimated the prompt, and the completion is unknown (0).
        text: the reply, when the call produced one (a reply the run never saw is kept as a late message).
        note: why the usage is estimated, or what became of the call.
        cached: prompt tokens the provider said it served from its prompt cache (part of `prompt`).
        waited_s: seconds the call waited before its attempts, on the shared rate limit or on a
            provider's Retry-After (not model latency; the ordinary retry backoff is not counted).
        retry_after_pauses: times a provider's Retry-After paused the call.
        calls: 1, or 0 for a report of waiting only (the call then failed or was cancelled before it was
            sent): no tokens, no call to count.
        finish_reason: why the model stopped, as the client said (stop, length, function_calls…).
        model_ms: milliseconds the answering attempt took (model time: no waiting, no failed attempt).
        probe: the call was PSE's own probe of the server, no turn of the role (its reply is no message).
    """

    role: str
    prompt: int
    completion: int
    estimated: bool = False
    text: str | None = None
    note: str = ""
    cached: int = 0
    waited_s: float = 0.0
    retry_after_pauses: int = 0
    calls: int = 1
    finish_reason: str | None = None
    model_ms: int | None = None
    probe: ProbeRecord | None = None


UsageSink = Callable[[CallUsage], None]
"""Receives the usage of every model call of a run."""


class UsageMeter:
    """Where every model call of a run reports its usage, as it happens: answered, retried, timed out,
    cancelled. The run's ledger attaches to it; what is reported before that is held and handed over."""

    def __init__(self) -> None:
        self._sink: UsageSink | None = None
        self._held: list[CallUsage] = []
        self._stopped: list[tuple[asyncio.Future[Any], Callable[[Any], None], Callable[[], None]]] = []

    def attach(self, sink: UsageSink) -> None:
        """From now on, every report goes to `sink` (held ones first)."""
        self._sink = sink
        held, self._held = self._held, []
        for usage in held:
            sink(usage)

    def __call__(self, usage: CallUsage) -> None:
        if self._sink is None:
            self._held.append(usage)
        else:
            self._sink(usage)

    def stopped(
        self, request: asyncio.Future[Any], answered: Callable[[Any], None], cut: Callable[[], None]
    ) -> None:
        """A call the run stopped while its provider was answering: `request` goes on until `settle`, which
        books it with `answered(result)` when the answer came by then, else cancels it and books `cut()`
        (the estimate)."""
        self._stopped.append((request, answered, cut))

    async def settle(self, grace_s: float = SETTLE_S) -> None:
        """Book every stopped call: in full when its answer came within `grace_s` (the server served it:
        every token counts), as an estimate when it is still in flight (then it is cancelled)."""
        stopped, self._stopped = self._stopped, []
        if not stopped:
            return
        pending = [request for request, _, _ in stopped if not request.done()]
        if pending and grace_s > 0:
            await asyncio.wait(pending, timeout=grace_s)
        for request, answered, cut in stopped:
            if not request.done():
                request.cancel()
                cut()
            elif request.cancelled() or request.exception() is not None:
                cut()
            else:
                answered(request.result())
