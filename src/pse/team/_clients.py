"""Two small ChatCompletionClients the team needs around the real ones."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, ModelInfo, RequestUsage
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from pse.exceptions import RunFailure
from pse.models import GENERIC_MODEL_INFO, WrapperChatCompletionClient

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


class FailureTrackingClient(WrapperChatCompletionClient):
    """Delegates to `inner` and records any RunFailure it raises in `box` before re-raising it."""

    def __init__(self, inner: ChatCompletionClient, box: FailureBox) -> None:
        super().__init__(inner)
        self._box = box

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
        try:
            return await super().create(
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
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        inner = super().create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )

        async def stream() -> AsyncGenerator[str | CreateResult, None]:
            try:
                async for item in inner:
                    yield item
            except RunFailure as exc:
                self._box.record(exc)
                raise

        return stream()


class UnusedSelectorClient(WrapperChatCompletionClient):
    """The model client SelectorGroupChat requires. Speaker order is ours, so any call is a bug."""

    def __init__(self) -> None:
        super().__init__(self)  # never delegates: every model call below fails loudly

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

    @property
    def model_info(self) -> ModelInfo:
        return GENERIC_MODEL_INFO
