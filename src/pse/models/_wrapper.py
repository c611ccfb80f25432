"""A ChatCompletionClient that delegates everything to another one: the base of every decorating client."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
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

__all__ = ["CONTEXT_WINDOW_TOKENS", "CallOptions", "WrapperChatCompletionClient"]

CONTEXT_WINDOW_TOKENS = 128_000  # what remaining_tokens assumes: most current chat models' window


@dataclass(frozen=True)
class CallOptions:
    """Everything of a `create` / `create_stream` call but the messages, passed on unchanged."""

    tools: Sequence[Tool | ToolSchema] = ()
    tool_choice: Tool | Literal["auto", "required", "none"] = "auto"
    json_output: bool | type[BaseModel] | None = None
    extra_create_args: Mapping[str, Any] = field(default_factory=dict)
    cancellation_token: CancellationToken | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of AutoGen's `ChatCompletionClient.create`."""
        return {
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "json_output": self.json_output,
            "extra_create_args": self.extra_create_args,
            "cancellation_token": self.cancellation_token,
        }


class WrapperChatCompletionClient(ChatCompletionClient):
    """Delegates to `inner`; subclasses override what they decorate (composition, not flags).

    A decorating client overrides `_create` and/or `_create_stream`, which receive the messages and
    the rest of the call as one `CallOptions`, instead of repeating AutoGen's full signature.
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
        options = CallOptions(tools, tool_choice, json_output, extra_create_args, cancellation_token)
        return await self._create(messages, options)

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
        options = CallOptions(tools, tool_choice, json_output, extra_create_args, cancellation_token)
        return self._create_stream(messages, options)

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        """One call; the decoration point of `create`."""
        return await self.inner.create(messages, **options.as_kwargs())

    def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        """One streamed call; the decoration point of `create_stream`."""
        return self.inner.create_stream(messages, **options.as_kwargs())

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
