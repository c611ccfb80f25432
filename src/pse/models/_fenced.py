"""The fenced write format as a decorating client: file blocks with the model, DSML with everyone else.

```
AssistantAgent of a role          its own turns and the ToolAgent's answers, in DSML
   │
FencedWritesClient   request:  the role's own earlier turns: each `write_file` invoke shown as a file
   │                           block (`protocol.calls_as_files`); a write PSE withholds, not at all
   │                 response: each file block → a `<tool_calls>` block of one `write_file` invoke
   │                           (`protocol.files_as_calls`), in place
provider client (constrained: its grammar allows file blocks for this role)
```

So the ToolAgent parses, decides, audits and budgets a file block exactly as a DSML write, under the
same policy, and the engine, the trace and a recording see one format. The translation is pure and
deterministic both ways: the same run sends the same requests, which strict replay needs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from autogen_core.models import AssistantMessage, ChatCompletionClient, CreateResult, LLMMessage

from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import calls_as_files, files_as_calls
from pse.tools import WITHHELD

__all__ = ["FencedWritesClient"]


class FencedWritesClient(WrapperChatCompletionClient):
    """Shows the role its writes as file blocks and reads its file blocks as `write_file` requests.

    Args:
        inner: the client below (constrained, resilient, the provider's).
        role: the role whose own turns are shown as file blocks (its assistant messages).
    """

    def __init__(self, inner: ChatCompletionClient, role: str) -> None:
        super().__init__(inner)
        self.role = role

    @staticmethod
    def _shown(messages: Sequence[LLMMessage]) -> list[LLMMessage]:
        return [
            message.model_copy(update={"content": calls_as_files(message.content, withheld=WITHHELD)})
            if isinstance(message, AssistantMessage) and isinstance(message.content, str)
            else message
            for message in messages
        ]

    @staticmethod
    def _read(result: CreateResult) -> CreateResult:
        if not isinstance(result.content, str):
            return result
        return result.model_copy(update={"content": files_as_calls(result.content)})

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        return self._read(await self.inner.create(self._shown(messages), **options.as_kwargs()))

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        async for item in self.inner.create_stream(self._shown(messages), **options.as_kwargs()):
            yield self._read(item) if isinstance(item, CreateResult) else item
