"""The failure box of a cycle and the client that reports into it, around each role's real client."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.exceptions import RunCancelled, RunFailure
from pse.models import CallOptions, WrapperChatCompletionClient, message_texts, split_reasoning
from pse.tokens import count_message_tokens

__all__ = ["FailureBox", "FailureTrackingClient"]


class FailureBox:
    """Holds the first infrastructure failure of a cycle, and whether the cycle was closed to new calls.

    The engine learns the typed failure of a phase (model unavailable, cassette exhausted, ...) from
    here, whichever exception reached it through AutoGen's agent. Once the engine stops a cycle
    (deadline, budget, cancellation) it closes the box: no model call starts after that, whatever is
    still in flight while the phase winds down.
    """

    def __init__(self, admit: Callable[[int], str | None] | None = None) -> None:
        self.failure: RunFailure | None = None
        self.closed: str | None = None
        self.refused: str | None = None
        """Why a call was refused before it started (a budget that cannot cover its prompt), if one was."""
        self._admit = admit

    def record(self, exc: RunFailure) -> None:
        if self.failure is None:
            self.failure = exc

    def close(self, reason: str) -> None:
        """Refuse every model call from now on, with `reason`."""
        self.closed = self.closed or reason

    def check_open(self, messages: Sequence[LLMMessage] = ()) -> None:
        """Raise RunCancelled when the cycle is closed to new model calls, or the run's budget cannot
        cover this call's prompt (counted with PSE's offline counter); the box then closes."""
        if self.closed is None and self._admit is not None:
            reason = self._admit(count_message_tokens(message_texts(messages)))
            if reason is not None:
                self.refused = reason
                self.close(reason)
        if self.closed is not None:
            raise RunCancelled(f"no model call after the cycle was stopped: {self.closed}")


class FailureTrackingClient(WrapperChatCompletionClient):
    """Delegates to `inner` and records any RunFailure it raises in `box` before re-raising it."""

    def __init__(self, inner: ChatCompletionClient, box: FailureBox) -> None:
        super().__init__(inner)
        self._box = box

    @property
    def box(self) -> FailureBox:
        """The failure box of the phase this client serves (a role's team gets each cycle's)."""
        return self._box

    @box.setter
    def box(self, box: FailureBox) -> None:
        self._box = box

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        self._box.check_open(messages)
        try:
            return split_reasoning(await super()._create(messages, options))
        except RunFailure as exc:
            self._box.record(exc)
            raise

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        self._box.check_open(messages)
        try:
            async for item in super()._create_stream(messages, options):
                yield split_reasoning(item) if isinstance(item, CreateResult) else item
        except RunFailure as exc:
            self._box.record(exc)
            raise
