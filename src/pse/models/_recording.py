"""Recording: a client that wraps any provider and writes each exchange into a cassette."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Iterable, Sequence
from pathlib import Path

from autogen_core import FunctionCall
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.models._digest import recorded_request, scrub_secrets
from pse.models._format import Cassette, CassetteToolCall, CassetteTurn, TurnUsage
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient

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
        """Record one exchange: the reply (secrets scrubbed), its real usage and the request's digest.

        A reply of native function calls is recorded as such: its calls as `tool_calls`, the text
        beside them as `content`.
        """
        calls = None if isinstance(result.content, str) else [self._call(c) for c in result.content]
        content = result.content if isinstance(result.content, str) else result.thought or ""
        turn = CassetteTurn(
            role=role,
            content=scrub_secrets(content, self.secrets),
            tool_calls=calls,
            usage=TurnUsage(
                prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens
            ),
            request=recorded_request(messages, self.secrets),
        )
        self.cassette.turns.append(turn)
        return turn

    def _call(self, call: FunctionCall) -> CassetteToolCall:
        raw = scrub_secrets(call.arguments, self.secrets)
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError:
            arguments = raw
        return CassetteToolCall(name=call.name, arguments=arguments if isinstance(arguments, dict) else raw)

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

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        result = await super()._create(messages, options)
        self.recorder.append(self.role, messages, result)
        return result

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        async for item in super()._create_stream(messages, options):
            if isinstance(item, CreateResult):
                self.recorder.append(self.role, messages, item)
            yield item
