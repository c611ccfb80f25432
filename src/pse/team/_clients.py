"""The failure box of a cycle and the client that reports into it, around each role's real client."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.exceptions import RunCancelled, RunFailure
from pse.models import CallOptions, WrapperChatCompletionClient

__all__ = ["FailureBox", "FailureTrackingClient"]


class FailureBox:
    """Holds the first infrastructure failure of a cycle, and whether the cycle was closed to new calls.

    AutoGen's group chat re-raises an agent's exception as a bare RuntimeError with only its text,
    so the engine learns the typed failure (model unavailable, cassette exhausted, ...) from here.
    Once the engine stops a cycle (deadline, budget, cancellation) it closes the box: no model call
    starts after that, whatever AutoGen's group chat still schedules while it winds down.
    """

    def __init__(self) -> None:
        self.failure: RunFailure | None = None
        self.closed: str | None = None

    def record(self, exc: RunFailure) -> None:
        if self.failure is None:
            self.failure = exc

    def close(self, reason: str) -> None:
        """Refuse every model call from now on, with `reason`."""
        self.closed = self.closed or reason

    def check_open(self) -> None:
        """Raise RunCancelled when the cycle is closed to new model calls."""
        if self.closed is not None:
            raise RunCancelled(f"no model call after the cycle was stopped: {self.closed}")


class FailureTrackingClient(WrapperChatCompletionClient):
    """Delegates to `inner` and records any RunFailure it raises in `box` before re-raising it."""

    def __init__(self, inner: ChatCompletionClient, box: FailureBox) -> None:
        super().__init__(inner)
        self._box = box

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        self._box.check_open()
        try:
            return await super()._create(messages, options)
        except RunFailure as exc:
            self._box.record(exc)
            raise

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        self._box.check_open()
        try:
            async for item in super()._create_stream(messages, options):
                yield item
        except RunFailure as exc:
            self._box.record(exc)
            raise
