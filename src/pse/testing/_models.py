"""In-process test models: AutoGen `ChatCompletionClient`s whose replies come from a function or a list."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from pse.exceptions import RunFailure
from pse.models import SCRIPTED_MODEL_INFO, message_texts
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["FunctionModel", "ReplyFunction", "ScriptedModel"]

_WINDOW_TOKENS = 128_000  # what remaining_tokens assumes, as for the scripted client

ReplyFunction = Callable[[Sequence[LLMMessage]], str | Awaitable[str]]
"""What a `FunctionModel` calls: the request's messages in, the reply's text out (or a coroutine of it)."""


class FunctionModel(ChatCompletionClient):
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
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        self.requests.append(list(messages))
        reply = self.fn(messages)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, str):
            raise TypeError(f"{self!r}: the reply function returned {type(reply).__name__}; return the text")
        usage = RequestUsage(count_message_tokens(message_texts(messages)), count_tokens(reply))
        self._total = RequestUsage(
            self._total.prompt_tokens + usage.prompt_tokens,
            self._total.completion_tokens + usage.completion_tokens,
        )
        return CreateResult(finish_reason="stop", content=reply, usage=usage, cached=False)

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        result = await self.create(messages)
        assert isinstance(result.content, str)  # create always answers with text
        yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return self._total

    def total_usage(self) -> RequestUsage:
        return self._total

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return count_message_tokens(message_texts(messages))

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return _WINDOW_TOKENS - self.count_tokens(messages)

    @property
    def capabilities(self) -> ModelCapabilities:
        return {"vision": False, "function_calling": False, "json_output": False}

    @property
    def model_info(self) -> ModelInfo:
        return SCRIPTED_MODEL_INFO

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
