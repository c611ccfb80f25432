"""The bases of PSE's ChatCompletionClients: offline token counts, and an in-process model's bookkeeping."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelFamily,
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from pse.models._digest import message_texts
from pse.tokens import count_message_tokens

__all__ = [
    "CONTEXT_WINDOW_TOKENS",
    "SCRIPTED_MODEL_INFO",
    "BaseChatCompletionClient",
    "CallOptions",
    "InProcessChatCompletionClient",
]

CONTEXT_WINDOW_TOKENS = 128_000  # what remaining_tokens assumes: most current chat models' window

SCRIPTED_MODEL_INFO: ModelInfo = {
    "vision": False,
    "function_calling": False,
    "json_output": False,
    "family": ModelFamily.UNKNOWN,
    "structured_output": False,
    "multiple_system_messages": True,
}
"""What an in-process model says it can do: text in, text out."""


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


class BaseChatCompletionClient(ChatCompletionClient):
    """The base of every PSE client: tokens counted by PSE's offline counter (`pse.tokens`), never a
    provider's tokenizer (it needs no download and agrees with the figures of scripted runs), and the
    capabilities read from `model_info`.

    A subclass implements `_create` and `_create_stream`, which receive the messages and the rest of
    the call as one `CallOptions`, instead of repeating AutoGen's full signature.
    """

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

    @abstractmethod
    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        """One call."""

    @abstractmethod
    def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        """One streamed call."""

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


class InProcessChatCompletionClient(BaseChatCompletionClient):
    """A model that answers in this process (a cassette, a function): no provider to close, its usage
    summed here as it answers (`_add_usage`), and its stream the whole reply at once.

    A subclass implements `_create`; a stream is the reply's text, then the result.
    """

    def __init__(self) -> None:
        self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)

    def _add_usage(self, usage: RequestUsage) -> None:
        self._usage = RequestUsage(
            self._usage.prompt_tokens + usage.prompt_tokens,
            self._usage.completion_tokens + usage.completion_tokens,
        )

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        result = await self.create(messages, **options.as_kwargs())
        if isinstance(result.content, str):
            yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return self._usage

    def total_usage(self) -> RequestUsage:
        return self._usage

    @property
    def model_info(self) -> ModelInfo:
        return SCRIPTED_MODEL_INFO
