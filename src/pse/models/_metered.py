"""A client given for a role (pse.testing's models, a user's own AutoGen client) told to the run's meter."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.models._digest import message_texts
from pse.models._usage import CallUsage, UsageSink
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["MeteredChatCompletionClient"]


class MeteredChatCompletionClient(WrapperChatCompletionClient):
    """Tells `meter` the usage of every answer of `inner`, as the run's own clients do, so a given client
    counts against the run's token budget and shows in the trace's tokens.

    The usage is the one `inner` reports; a client that reports none is counted with PSE's offline
    counter (`pse.tokens`) and the call is marked estimated. Errors pass through unchanged: a given
    client is code of the caller's, not a provider to retry.

    Args:
        inner: the given client.
        role: whose calls they are.
        meter: the run's usage sink.
    """

    def __init__(self, inner: ChatCompletionClient, role: str, meter: UsageSink) -> None:
        super().__init__(inner)
        self.role = role
        self.meter = meter

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        started = time.perf_counter()
        result = await self.inner.create(messages, **options.as_kwargs())
        self._told(result, messages, round((time.perf_counter() - started) * 1000))
        return result

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        started = time.perf_counter()
        async for item in self.inner.create_stream(messages, **options.as_kwargs()):
            if isinstance(item, CreateResult):
                self._told(item, messages, round((time.perf_counter() - started) * 1000))
            yield item

    def _told(self, result: CreateResult, messages: Sequence[LLMMessage], model_ms: int) -> None:
        text = result.content if isinstance(result.content, str) else str(result.content)
        prompt, completion = result.usage.prompt_tokens, result.usage.completion_tokens
        estimated = not (prompt or completion)
        if estimated:
            prompt, completion = count_message_tokens(message_texts(messages)), count_tokens(text)
        self.meter(
            CallUsage(
                self.role,
                prompt,
                completion,
                estimated,
                text=text,
                note="the client reported no usage: counted by PSE's counter" if estimated else "",
                finish_reason=result.finish_reason,
                model_ms=model_ms,
            )
        )
