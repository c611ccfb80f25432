"""A ChatCompletionClient that delegates everything to another one: the base of every decorating client."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelInfo,
    RequestUsage,
)

from pse.models._client import BaseChatCompletionClient, CallOptions

__all__ = ["CallOptions", "WrapperChatCompletionClient"]


class WrapperChatCompletionClient(BaseChatCompletionClient):
    """Delegates to `inner`; subclasses override what they decorate (composition, not flags).

    A decorating client overrides `_create` and/or `_create_stream` (see `BaseChatCompletionClient`,
    which also counts its tokens).
    """

    def __init__(self, inner: ChatCompletionClient) -> None:
        self.inner = inner

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

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info
