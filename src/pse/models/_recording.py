"""Recording: a client that wraps any provider and writes each exchange into a cassette."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from pse.models._digest import recorded_request, scrub_secrets
from pse.models._format import Cassette, CassetteTurn, TurnUsage
from pse.models._wrapper import WrapperChatCompletionClient

__all__ = ["CassetteRecorder", "RecordingChatCompletionClient"]


class CassetteRecorder:
    """Collects turns in call order and writes them as one cassette.

    Args:
        path: the cassette file `save()` writes (atomically).
        secrets: values that must never reach the file (API keys); anything shaped like a key is
            scrubbed as well.
    """

    def __init__(self, path: str | os.PathLike[str], *, secrets: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.secrets = [s for s in secrets if s]
        self.cassette = Cassette()

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Also scrub these values (the factory passes each role's API key)."""
        self.secrets.extend(s for s in secrets if s and s not in self.secrets)

    def append(self, role: str, messages: Sequence[LLMMessage], result: CreateResult) -> CassetteTurn:
        """Record one exchange: the reply (secrets scrubbed), its real usage and the request's digest."""
        content = result.content if isinstance(result.content, str) else str(result.content)
        turn = CassetteTurn(
            role=role,
            content=scrub_secrets(content, self.secrets),
            usage=TurnUsage(
                prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens
            ),
            request=recorded_request(messages, self.secrets),
        )
        self.cassette.turns.append(turn)
        return turn

    def save(self) -> Path:
        """Write the cassette (atomically) and return its path."""
        self.cassette.to_file(self.path)
        return self.path


class RecordingChatCompletionClient(WrapperChatCompletionClient):
    """Passes each call to `inner` and records the successful exchange as `role`'s next turn."""

    def __init__(self, inner: ChatCompletionClient, recorder: CassetteRecorder, role: str) -> None:
        super().__init__(inner)
        self.recorder = recorder
        self.role = role

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
        result = await super().create(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )
        self.recorder.append(self.role, messages, result)
        return result

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
        stream = super().create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )
        async for item in stream:
            if isinstance(item, CreateResult):
                self.recorder.append(self.role, messages, item)
            yield item
