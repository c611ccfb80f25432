"""Going on with a cycle that stopped while a tool call waited for a person, without a model call repeated.

A run that stops while a call is held (Ctrl-C, a restart of `pse serve`, a killed process) resumes by
running its interrupted cycle again. Each role's first calls of that cycle are answered with the turns
it gave the first time, from the trace, and only the turns after them reach the model: the cassette
positions (or a provider's bill) show that nothing was asked twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, RequestUsage

from pse.models._wrapper import CallOptions, WrapperChatCompletionClient

__all__ = ["ResumedTurnsClient", "Turn"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn a role gave before the run stopped: its text, usage and reasoning, as recorded."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thought: str | None = None


class ResumedTurnsClient(WrapperChatCompletionClient):
    """Answers the first `len(turns)` calls with the recorded turns (marked cached, nothing charged:
    the usage meter sits inside `inner`), then delegates to `inner`. `seen` is told each prompt a
    recorded turn answers (the prefix meter remembers what the provider has cached)."""

    def __init__(
        self,
        inner: ChatCompletionClient,
        turns: Iterable[Turn],
        seen: Callable[[Sequence[LLMMessage]], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self._turns = deque(turns)
        self._seen = seen

    @property
    def pending(self) -> int:
        """Recorded turns not yet given back."""
        return len(self._turns)

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        if not self._turns:
            return await super()._create(messages, options)
        turn = self._turns.popleft()
        if self._seen is not None:
            self._seen(messages)
        return CreateResult(
            finish_reason="stop",
            content=turn.text,
            usage=RequestUsage(prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens),
            cached=True,
            thought=turn.thought,
        )
