"""The provider adapter: per-call timeout, bounded retries, error translation, no silent empty turns.

Every real provider client (OpenAI-compatible, Ollama) is wrapped in
`ResilientChatCompletionClient`. It is where third-party exceptions stop: openai,
ollama and httpx errors become `ModelAuthError` (401/403, never retried) or
`ModelUnavailableError` (after the retries, or at once for an error retrying cannot
fix), raised `from` the original.

Reasoning models: when a reply has no content, it is never passed on silently.
If the reasoning text (`thought`) holds one of PSE's protocol blocks
(`<tool_calls>`, `<plan>`, `<verdict`, `<blocked`), the reasoning text becomes the
content (some servers route everything into `reasoning_content`); otherwise a
`ModelUnavailableError` says what happened (e.g. the max-tokens limit was spent on
reasoning: raise or unset `PSE_MODEL_MAX_TOKENS`).

Rate limits: with a `RateLimiter` (`PSE_MODEL_RPM`, `_TPM`, `_MAX_CONCURRENCY`), every attempt first
waits for its endpoint's turn (`pse.models._ratelimit`); that wait counts neither against the
attempt's timeout nor as model latency, but as `CallUsage.waited_s`. A retried HTTP error with a
`Retry-After` (or `retry-after-ms`) header pauses the endpoint for every run of the process, and the
call's own retry waits at least that long instead of its shorter backoff (a Retry-After over
`RETRY_AFTER_CAP_S` is cut to it, with a warning; the retry limit still ends the call).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, RequestUsage

from pse.config import ModelSpec
from pse.exceptions import ModelAuthError, ModelUnavailableError
from pse.models._cached import CachedSlot, cached_slot
from pse.models._context import context_window_error
from pse.models._digest import message_texts
from pse.models._ratelimit import Grant, LimitKey, RateLimiter
from pse.models._retrying import FailureKind, RetryPolicy, classify_failure, lost_connection, retry_after
from pse.models._servers import crash_note, note_answered
from pse.models._usage import CallUsage, UsageMeter, UsageSink
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["ResilientChatCompletionClient", "public_url"]

_PROTOCOL_TAGS = ("<tool_calls>", "<plan>", "<verdict", "<blocked")


def public_url(url: str | None, provider: str) -> str:
    """`url` without user info, query or fragment (where secrets hide), or the provider's default."""
    if not url:
        return {"openai": "https://api.openai.com/v1", "ollama": "Ollama's default host"}.get(provider, "-")
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass
class _Waits:
    """What one call waited and has not reported yet."""

    seconds: float = 0.0
    pauses: int = 0

    def take(self) -> tuple[float, int]:
        taken, self.seconds, self.pauses = (self.seconds, self.pauses), 0.0, 0
        return taken


def _used(result: CreateResult) -> int | None:
    """Tokens the provider reported for an answer (None: it reported none)."""
    return (result.usage.prompt_tokens + result.usage.completion_tokens) or None


class ResilientChatCompletionClient(WrapperChatCompletionClient):
    """Wraps a real provider client with a timeout, retries with backoff and typed errors.

    Args:
        inner: the provider's client.
        spec: the role's resolved model settings (for messages; the key is never shown).
        policy: timeout, retries and backoff.
        meter: told the usage of every call as it happens.
        limiter: the shared rate limit of the endpoint (None: no limit is set).
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        spec: ModelSpec,
        policy: RetryPolicy,
        meter: UsageSink | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        super().__init__(inner)
        self.spec = spec
        self.policy = policy
        self.meter = meter
        self.limiter = limiter
        self.key: LimitKey = (spec.provider, public_url(spec.base_url, spec.provider))
        """The endpoint whose limit the calls share."""
        self.attempts = 0  # provider calls made, retries included (for tests and diagnostics)

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        retry, waits = 0, _Waits()
        try:
            while True:
                grant = await self._admit(messages, waits)  # cancelled here: nothing was sent
                self.attempts += 1
                slot = CachedSlot()  # the HTTP client notes the provider's cached prompt tokens here
                reset = cached_slot.set(slot)
                used: int | None = None
                failure: Exception | None = None
                asked = time.monotonic()
                # The run's stop (its token, or the task being cancelled) stops the wait, not the request:
                # an answer that comes while the run settles is booked in full (`_stopped`).
                unlinked = dataclasses.replace(options, cancellation_token=None)
                request = asyncio.ensure_future(
                    asyncio.wait_for(
                        self.inner.create(messages, **unlinked.as_kwargs()), timeout=self.policy.timeout_s
                    )
                )
                waiter = asyncio.shield(request)
                if options.cancellation_token is not None:
                    options.cancellation_token.link_future(waiter)
                try:
                    result = await waiter
                    model_ms = round((time.monotonic() - asked) * 1000)
                    used = _used(result)
                    if self.spec.base_url:
                        note_answered(self.spec.base_url)
                except asyncio.CancelledError:
                    self._stopped(request, messages, waits, slot, asked)
                    raise
                except Exception as exc:
                    if isinstance(exc, TimeoutError):
                        self._estimate(messages, f"no answer within {self.policy.timeout_s:g} s", waits)
                    failure = exc
                finally:
                    cached_slot.reset(reset)
                    await self._release(grant, used)
                if failure is not None:
                    retry = await self._after_failure(failure, retry, waits)
                    continue
                return self._answered(result, messages, slot.tokens or 0, waits, model_ms)
        finally:
            self._report_waits(waits)

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        # Retries happen only before the first chunk: once text has gone out it cannot be taken back.
        # The timeout bounds the whole stream of one attempt (not the wait for the rate limit before it).
        retry, waits = 0, _Waits()
        try:
            while True:
                grant = await self._admit(messages, waits)
                self.attempts += 1
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.policy.timeout_s
                stream = self.inner.create_stream(messages, **options.as_kwargs())
                started, used, asked = False, None, time.monotonic()
                try:
                    while True:
                        remaining = max(0.0, deadline - loop.time())
                        try:
                            item = await asyncio.wait_for(anext(stream), timeout=remaining)
                        except StopAsyncIteration:
                            return
                        if isinstance(item, CreateResult):
                            used = _used(item)
                            ms = round((time.monotonic() - asked) * 1000)
                            item = self._answered(item, messages, waits=waits, model_ms=ms)
                        started = True
                        yield item
                except Exception as exc:
                    if started:
                        kind = classify_failure(exc)
                        if kind is None:
                            raise
                        self._raise(
                            kind[0] if kind[0] == "auth" else "fatal", f"stream broke off: {kind[1]}", exc
                        )
                    failure = exc
                finally:
                    await stream.aclose()
                    await self._release(grant, used)
                retry = await self._after_failure(failure, retry, waits)
        finally:
            self._report_waits(waits)

    async def _admit(self, messages: Sequence[LLMMessage], waits: _Waits) -> Grant | None:
        """Wait for the endpoint's rate limit (no limiter: at once); the wait is the call's."""
        if self.limiter is None:
            return None
        started = time.monotonic()
        try:
            grant = await self.limiter.acquire(self.key, count_message_tokens(message_texts(messages)))
        except asyncio.CancelledError:
            waits.seconds += time.monotonic() - started  # the run stopped it while it waited
            raise
        waits.seconds += grant.waited_s
        return grant

    async def _release(self, grant: Grant | None, used: int | None) -> None:
        if grant is not None and self.limiter is not None:
            await self.limiter.release(grant, used)

    async def _after_failure(self, exc: Exception, retry: int, waits: _Waits) -> int:
        """Sleep before the next attempt and return its retry number, or raise the translated error.

        A retried HTTP error's Retry-After pauses the endpoint for every run (with a limiter), even when
        no retry is left, and this call's retry waits at least that long.
        """
        verdict = classify_failure(exc)
        if verdict is None:
            raise exc
        kind, detail = verdict
        pause = retry_after(exc) if kind == "retry" else None
        if pause is not None and self.limiter is not None:
            await self.limiter.pause(self.key, pause)
        if kind != "retry" or retry >= self.policy.max_retries:
            self._raise(kind, detail, exc)
        retry += 1
        delay = self.policy.delay(retry)
        if pause is not None:
            delay = max(delay, pause)
            waits.seconds += delay
            waits.pauses += 1
        await asyncio.sleep(delay)
        return retry

    def _report_waits(self, waits: _Waits) -> None:
        """Report waiting no usage report carried (the call failed or was cancelled after it)."""
        seconds, pauses = waits.take()
        if self.meter is not None and (seconds > 0 or pauses):
            note = "waited on the rate limit; the call then failed or was cancelled"
            self.meter(
                CallUsage(
                    self.spec.role, 0, 0, note=note, waited_s=seconds, retry_after_pauses=pauses, calls=0
                )
            )

    def _where(self) -> str:
        spec = self.spec
        where = public_url(spec.base_url, spec.provider)
        return f"{spec.role}'s model {spec.model!r} ({spec.provider} at {where})"

    def _raise(self, kind: FailureKind, detail: str, exc: Exception) -> NoReturn:
        role = self.spec.role.upper()
        if kind == "context":
            raise context_window_error(
                self.spec.role, self.spec.model, f"the provider refused it ({detail})"
            ) from exc
        if kind == "auth":
            raise ModelAuthError(
                f"{self._where()} refused the credentials ({detail}). Set a valid key in "
                f"PSE_{role}_API_KEY or PSE_API_KEY (or OPENAI_API_KEY); not retried."
            ) from exc
        tries = self.attempts
        crashed = crash_note(self.spec.base_url) if lost_connection(exc) and self.spec.base_url else None
        if crashed is not None:
            raise ModelUnavailableError(
                f"{self._where()}: {crashed}; last error: {detail}. A grammar llama.cpp refuses kills "
                "llama-cpp-python's server: `pse doctor` sends the largest grammar a run sends; lower "
                f"PSE_MODEL_MAX_TOKENS or set PSE_{role}_CONSTRAIN=off, and start the server again."
            ) from exc
        raise ModelUnavailableError(
            f"{self._where()} gave no usable answer after {tries} attempt(s); last error: {detail}. "
            f"Check that the server is up and the base URL and model name are right (PSE_{role}_BASE_URL, "
            f"PSE_{role}_MODEL), or raise PSE_MODEL_TIMEOUT_S / PSE_MODEL_MAX_RETRIES."
        ) from exc

    def _answered(
        self,
        result: CreateResult,
        messages: Sequence[LLMMessage],
        cached: int = 0,
        waits: _Waits | None = None,
        model_ms: int | None = None,
    ) -> CreateResult:
        """Check an answer, count what it cost (estimated if the provider said nothing), pass it on."""
        reported = result.usage.prompt_tokens or result.usage.completion_tokens
        result = self._checked(result, messages)
        if self.meter is not None:
            text = result.content if isinstance(result.content, str) else str(result.content)
            usage = result.usage
            note = "" if reported else "the provider reported no usage: estimated by PSE's counter"
            waited, pauses = waits.take() if waits is not None else (0.0, 0)
            self.meter(
                CallUsage(
                    self.spec.role,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    not reported,
                    text,
                    note,
                    cached=cached if reported else 0,
                    waited_s=waited,
                    retry_after_pauses=pauses,
                    finish_reason=result.finish_reason,
                    model_ms=model_ms,
                )
            )
        return result

    def _stopped(
        self,
        request: asyncio.Future[CreateResult],
        messages: Sequence[LLMMessage],
        waits: _Waits,
        slot: CachedSlot,
        asked: float,
    ) -> None:
        """The run stopped this call while the provider answered it. The request goes on: the meter
        settles it when the run ends, in full if the answer came by then (the provider served it), else
        as the estimate of a call really in flight."""
        note = "cancelled while the provider was answering"
        waited, pauses = waits.take()
        cut_waits = _Waits(waited, pauses)

        def cut() -> None:
            self._estimate(messages, note, cut_waits)

        def answered(result: CreateResult) -> None:
            if self.spec.base_url:
                note_answered(self.spec.base_url)
            ms = round((time.monotonic() - asked) * 1000)
            try:
                self._answered(result, messages, slot.tokens or 0, cut_waits, ms)
            except ModelUnavailableError:  # an empty answer: nothing was served but the prompt
                cut()

        if not isinstance(self.meter, UsageMeter):  # no run settles it: estimated now, as before
            request.cancel()
            cut()
            return
        self.meter.stopped(request, answered, cut)

    def _estimate(self, messages: Sequence[LLMMessage], note: str, waits: _Waits) -> None:
        """A call the provider may have worked on but never answered: its prompt, estimated, counts."""
        if self.meter is not None:
            prompt = count_message_tokens(message_texts(messages))
            waited, pauses = waits.take()
            usage = CallUsage(
                self.spec.role, prompt, 0, True, note=note, waited_s=waited, retry_after_pauses=pauses
            )
            self.meter(usage)

    def _checked(self, result: CreateResult, messages: Sequence[LLMMessage]) -> CreateResult:
        """Refuse a silently empty reply and fill in usage the provider did not report."""
        content = result.content
        if isinstance(content, str) and not content.strip():
            thought = result.thought or ""
            if any(tag in thought for tag in _PROTOCOL_TAGS):
                result = result.model_copy(update={"content": thought})
            elif result.finish_reason == "length":
                raise ModelUnavailableError(
                    f"{self._where()} hit its max-tokens limit before writing any answer"
                    + (" (the reasoning used it up)" if thought else "")
                    + ": raise PSE_MODEL_MAX_TOKENS, or unset it to use the provider's limit."
                )
            else:
                raise ModelUnavailableError(
                    f"{self._where()} returned an empty answer"
                    + (
                        f" with only reasoning text ({len(thought)} chars, no protocol tags)"
                        if thought
                        else ""
                    )
                    + f" (finish reason {result.finish_reason!r}); a reasoning model may need more "
                    "max tokens, or try another model."
                )
        if result.usage.prompt_tokens == 0 and result.usage.completion_tokens == 0:
            text = result.content if isinstance(result.content, str) else str(result.content)
            usage = RequestUsage(count_message_tokens(message_texts(messages)), count_tokens(text))
            result = result.model_copy(update={"usage": usage})
        return result
