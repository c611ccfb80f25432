"""A ChatCompletionClient that delegates everything to another one: the base of every decorating client."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
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

from pse.models._digest import message_texts
from pse.tokens import count_message_tokens

__all__ = ["CONTEXT_WINDOW_TOKENS", "WrapperChatCompletionClient"]

CONTEXT_WINDOW_TOKENS = 128_000  # what remaining_tokens assumes: most current chat models' window


class WrapperChatCompletionClient(ChatCompletionClient):
    """Delegates to `inner`; subclasses override what they decorate (composition, not flags).

    Token counting always uses PSE's offline counter (`pse.tokens`), never a provider's
    tokenizer: it needs no download and agrees with the figures of scripted runs.
    """

    def __init__(self, inner: ChatCompletionClient) -> None:
        self.inner = inner

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
        return await self.inner.create(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )

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
        return self.inner.create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self) -> RequestUsage:
        return self.inner.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return count_message_tokens(message_texts(messages))

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        # Providers' context windows are unknown for arbitrary model names; assume a common one.
        return CONTEXT_WINDOW_TOKENS - self.count_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:
        info = self.model_info
        return {
            "vision": info["vision"],
            "function_calling": info["function_calling"],
            "json_output": info["json_output"],
        }

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info
