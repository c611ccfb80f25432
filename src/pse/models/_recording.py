"""Recording: a client that wraps any provider and writes each exchange into a cassette, and the tool runs."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import AsyncGenerator, Iterable, Sequence
from pathlib import Path

from autogen_core import FunctionCall
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.events import ToolCallRecord
from pse.exceptions import UnscrubbedSecretWarning
from pse.models._digest import recorded_request
from pse.models._format import Cassette, CassetteToolCall, CassetteTurn, TurnUsage
from pse.models._scrub import Scrubber
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.toolagent import MIN_SECRET_CHARS

__all__ = ["CassetteRecorder", "RecordingChatCompletionClient"]


class CassetteRecorder:
    """Collects turns and tool runs in call order and writes them as one cassette.

    No HTTP header is recorded. Every text that goes in (replies, request excerpts, tool output, tool
    runs) passes the recorder's `Scrubber`: the configured secrets, whole, wherever they occur, and
    anything shaped like a key. A configured secret shorter than `MIN_SECRET_CHARS` is not scrubbed
    (it would match ordinary text); the recorder warns of each such one once.

    Args:
        path: the cassette file `save()` writes (atomically).
        secrets: NAME → value pairs that must never reach the file (`Settings.secrets()`).
    """

    def __init__(self, path: str | os.PathLike[str], *, secrets: Iterable[tuple[str, str]] = ()) -> None:
        self.path = Path(path)
        self.scrubber = Scrubber()
        self.cassette = Cassette()
        self._kept: set[str] = set()  # digests of the tool-output texts the cassette holds whole
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Iterable[tuple[str, str]]) -> None:
        """Also scrub these NAME → value pairs (the factory passes the configured ones)."""
        for name in self.scrubber.add(secrets):
            warnings.warn(
                UnscrubbedSecretWarning(
                    f"{name} is shorter than {MIN_SECRET_CHARS} characters, so the recording {self.path} "
                    "keeps it as it is: a value that short would match ordinary text. A real key is longer; "
                    "if this one is real, check the cassette before you share it."
                ),
                stacklevel=2,
            )

    def append(
        self, role: str, messages: Sequence[LLMMessage], result: CreateResult, *, step: str | None = None
    ) -> CassetteTurn:
        """Record one exchange: the reply (secrets scrubbed), its real usage and the request's digest.

        A reply of native function calls is recorded as such: its calls as `tool_calls`, the text
        beside them as `content`.
        """
        calls = None if isinstance(result.content, str) else [self._call(c) for c in result.content]
        content = result.content if isinstance(result.content, str) else result.thought or ""
        turn = CassetteTurn(
            role=role,
            step=step,
            content=self.scrubber.text(content),
            tool_calls=calls,
            usage=TurnUsage(
                prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens
            ),
            request=recorded_request(messages, self.scrubber, kept=self._kept),
        )
        self.cassette.turns.append(turn)
        return turn

    def _call(self, call: FunctionCall) -> CassetteToolCall:
        raw = self.scrubber.text(call.arguments)
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError:
            arguments = raw
        return CassetteToolCall(name=call.name, arguments=arguments if isinstance(arguments, dict) else raw)

    def add_tool_run(self, record: ToolCallRecord) -> None:
        """Record one executed tool call (its audit record, scrubbed), for `--replay-tools`."""
        self.cassette.tool_runs.append(ToolCallRecord.model_validate(self.scrubber.data(record.model_dump())))

    def save(self) -> Path:
        """Write the cassette (atomically) and return its path."""
        self.cassette.to_file(self.path)
        return self.path


class RecordingChatCompletionClient(WrapperChatCompletionClient):
    """Passes each call to `inner` and records the successful exchange as `role`'s next turn."""

    def __init__(
        self, inner: ChatCompletionClient, recorder: CassetteRecorder, role: str, step: str | None = None
    ) -> None:
        super().__init__(inner)
        self.recorder = recorder
        self.role = role
        self.step = step

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        result = await super()._create(messages, options)
        self.recorder.append(self.role, messages, result, step=self.step)
        return result

    async def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        async for item in super()._create_stream(messages, options):
            if isinstance(item, CreateResult):
                self.recorder.append(self.role, messages, item, step=self.step)
            yield item
