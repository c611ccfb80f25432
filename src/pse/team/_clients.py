"""Two small ChatCompletionClient wrappers the team needs around the real ones."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

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

from pse.exceptions import RunFailure

__all__ = ["FailureBox", "FailureTrackingClient", "UnusedSelectorClient"]


class FailureBox:
    """Holds the first infrastructure failure of a cycle.

    AutoGen's group chat re-raises an agent's exception as a bare RuntimeError with only its text,
    so the engine learns the typed failure (model unavailable, cassette exhausted, ...) from here.
    """

    def __init__(self) -> None:
        self.failure: RunFailure | None = None

    def record(self, exc: RunFailure) -> None:
        if self.failure is None:
            self.failure = exc


class FailureTrackingClient(ChatCompletionClient):
    """Delegates to `inner` and records any RunFailure it raises in `box` before re-raising it."""

    def __init__(self, inner: ChatCompletionClient, box: FailureBox) -> None:
        self.inner = inner
        self._box = box

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Any = "auto",
        json_output: bool | type[Any] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        try:
            return await self.inner.create(
                messages,
                tools=tools,
                tool_choice=tool_choice,
                json_output=json_output,
                extra_create_args=extra_create_args,
                cancellation_token=cancellation_token,
            )
        except RunFailure as exc:
            self._box.record(exc)
            raise

    def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Any = "auto",
        json_output: bool | type[Any] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        async def stream() -> AsyncGenerator[str | CreateResult, None]:
            try:
                async for item in self.inner.create_stream(
                    messages,
                    tools=tools,
                    tool_choice=tool_choice,
                    json_output=json_output,
                    extra_create_args=extra_create_args,
                    cancellation_token=cancellation_token,
                ):
                    yield item
            except RunFailure as exc:
                self._box.record(exc)
                raise

        return stream()

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self) -> RequestUsage:
        return self.inner.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return self.inner.count_tokens(messages, tools=tools)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return self.inner.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:
        return self.inner.capabilities

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info


class UnusedSelectorClient(FailureTrackingClient):
    """The model client SelectorGroupChat requires. Speaker order is ours, so any call is a bug."""

    def __init__(self) -> None:
        pass

    async def create(self, *args: Any, **kwargs: Any) -> CreateResult:
        raise AssertionError("the speaker selector's model must never be consulted: speaker order is code")

    def create_stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[str | CreateResult, None]:
        raise AssertionError("the speaker selector's model must never be consulted: speaker order is code")

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(prompt_tokens=0, completion_tokens=0)

    def total_usage(self) -> RequestUsage:
        return RequestUsage(prompt_tokens=0, completion_tokens=0)

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return 0

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return 0

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities(vision=False, function_calling=False, json_output=False)

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(
            vision=False, function_calling=False, json_output=False, family="unknown", structured_output=False
        )
