"""In-process test models: AutoGen `ChatCompletionClient`s whose replies come from a function or a list."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from autogen_core.models import (
    CreateResult,
    LLMMessage,
    RequestUsage,
)

from pse.exceptions import RunFailure
from pse.models import CallOptions, InProcessChatCompletionClient, message_texts
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["FunctionModel", "ReplyFunction", "ScriptedModel"]

ReplyFunction = Callable[[Sequence[LLMMessage]], str | Awaitable[str]]
"""What a `FunctionModel` calls: the request's messages in, the reply's text out (or a coroutine of it)."""


class FunctionModel(InProcessChatCompletionClient):
    """A model whose reply is `fn(messages)`: the whole request in, text out, in process.

    Usage is counted as the scripted client counts a turn without recorded usage: prompt tokens are
    `count_message_tokens` of every message sent, completion tokens `count_tokens` of the reply, so
    the figures are exact and repeatable. An exception `fn` raises reaches the run as it is (a bug in
    a test is a bug); a `pse.exceptions.RunFailure` ends the run as ERROR, as a provider's failure does.

    Args:
        fn: the reply function, sync or async.
        model: the model's name in the trace (`tokens.by_role`, prices).

    Example:
        >>> model = FunctionModel(lambda messages: "<plan>...</plan>")
    """

    def __init__(self, fn: ReplyFunction, *, model: str = "function") -> None:
        self.fn = fn
        self.model = model
        self.requests: list[list[LLMMessage]] = []
        """Every request this model was sent, in order."""
        super().__init__()

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        self.requests.append(list(messages))
        reply = self.fn(messages)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, str):
            raise TypeError(f"{self!r}: the reply function returned {type(reply).__name__}; return the text")
        usage = RequestUsage(count_message_tokens(message_texts(messages)), count_tokens(reply))
        self._add_usage(usage)
        return CreateResult(finish_reason="stop", content=reply, usage=usage, cached=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


class ScriptedModel(FunctionModel):
    """A model that answers with `turns`, one per request, in order: one role's scripted turns in memory.

    For every role's turns at once, give the run `turns=[(role, text), ...]` instead
    (`pse.testing.run_task`): they play through PSE's cassette player, as a cassette file does.

    Raises (from a request after the last turn):
        RunFailure: no turn left; the run ends as ERROR and says which turn was missing.
    """

    def __init__(self, turns: Sequence[str], *, model: str = "scripted") -> None:
        self.turns = list(turns)
        self.position = 0
        """Turns given so far."""
        super().__init__(self._next, model=model)

    @property
    def remaining(self) -> int:
        """Turns not given yet."""
        return len(self.turns) - self.position

    def _next(self, messages: Sequence[LLMMessage]) -> str:
        if self.position >= len(self.turns):
            raise RunFailure(
                f"{self!r} has no turn {self.position + 1} (it holds {len(self.turns)}): add a turn, or "
                "check why the run needed one more"
            )
        self.position += 1
        return self.turns[self.position - 1]
