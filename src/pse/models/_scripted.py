"""The scripted provider: a deterministic offline ChatCompletionClient that replays a cassette.

One `CassettePlayer` per run is shared by the three roles' clients. Each role
consumes its own turns in cassette order, independent of the others and across
every cycle of the run. `positions` (turns consumed per role) is what a trace saves
to resume a run.

Strict replay (`strict=True`, PSE_REPLAY_STRICT's default) compares what PSE authored in each
request with the recording and fails on a difference; tool output that differs is *drift*: kept in
`drifts` and handed to `on_drift` (the run's event sink), and the run goes on. `strict="tools"`
fails on drift too; `strict=False` compares nothing (see `pse.models._compare`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from autogen_core import FunctionCall
from autogen_core.models import (
    CreateResult,
    LLMMessage,
    RequestUsage,
)

from pse.events import DriftRecord
from pse.exceptions import CassetteError, CassetteExhaustedError, ReplayMismatchError
from pse.models._client import CallOptions, InProcessChatCompletionClient
from pse.models._compare import MessageChange, RequestDifference, compare_request
from pse.models._digest import message_texts
from pse.models._format import Cassette, CassetteTurn
from pse.models._scrub import Scrubber
from pse.models._usage import CallUsage, UsageSink
from pse.roles import ALL_ROLES, ROLES, SINGLE_AGENT
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["CassettePlayer", "ScriptedChatCompletionClient"]

_DSML_TAGS = ("<tool_calls>", "<plan>", "<report>", "<verdict", "<blocked")


class CassettePlayer:
    """Hands out each role's cassette turns in order and keeps what every role was asked.

    Args:
        cassette: the validated cassette.
        strict: True: compare what PSE authored in each request with the recorded one, record tool
            output that differs as drift; "tools": tool output must match too; False: compare nothing.
        positions: turns already consumed per role (to resume a run); missing roles start at 0.
        source: where the cassette came from, for messages.
        scrubber: scrubs incoming requests as the recorder scrubbed them (digests are of scrubbed text).
        on_drift: called with each drift as it is found (the runner passes `RunEvents.drift`).
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        strict: bool | Literal["tools"] = True,
        positions: Mapping[str, int] | None = None,
        source: str = "<in-memory cassette>",
        scrubber: Scrubber | None = None,
        on_drift: Callable[[DriftRecord], None] | None = None,
    ) -> None:
        self.cassette = cassette
        self.strict = strict
        self.source = source
        self.scrubber = scrubber or Scrubber()
        self.on_drift = on_drift
        self.latency_s = 0.0
        """Seconds each reply waits before it is given: a simulated model latency (benchmarks, tests)."""
        self.drifts: list[DriftRecord] = []
        """Every drift found so far, in order (each difference once, however often it is sent again)."""
        self._drifted: set[tuple[str, str]] = set()
        self._texts = {
            m.digest: m.text
            for turn in cassette.turns
            if turn.request is not None
            for m in turn.request.messages
            if m.text is not None
        }
        # The single team's Agent is counted only in a cassette that scripts it (positions stay the three
        # roles' for every other cassette, as traces have always saved them).
        speakers = [*(ALL_ROLES if cassette.turns_of(SINGLE_AGENT) else ROLES), *cassette.step_keys()]
        self._turns = {role: cassette.turns_of(role) for role in speakers}
        self._positions = dict.fromkeys(speakers, 0)
        self.requests: dict[str, list[list[LLMMessage]]] = {role: [] for role in speakers}
        for role, position in (positions or {}).items():
            if role not in self._turns or not 0 <= position <= len(self._turns[role]):
                raise CassetteError(
                    f"cannot resume {source} at {role}={position}: it scripts {', '.join(speakers)}, "
                    f"and {role} has {len(self._turns.get(role, []))} turn(s); the trace and cassette "
                    "do not match"
                )
            self._positions[role] = position

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        strict: bool | Literal["tools"] = True,
        positions: Mapping[str, int] | None = None,
        scrubber: Scrubber | None = None,
        on_drift: Callable[[DriftRecord], None] | None = None,
    ) -> CassettePlayer:
        """Load and validate a cassette file (a `CassetteError` names the file and turn if malformed)."""
        return cls(
            Cassette.from_file(path),
            strict=strict,
            positions=positions,
            source=str(Path(path)),
            scrubber=scrubber,
            on_drift=on_drift,
        )

    @property
    def positions(self) -> dict[str, int]:
        """Turns consumed so far, per role (a copy)."""
        return dict(self._positions)

    def remaining(self, role: str) -> int:
        """Turns `role` still has."""
        return len(self._turns[role]) - self._positions[role]

    def next_turn(self, role: str, messages: Sequence[LLMMessage]) -> CassetteTurn:
        """Consume `role`'s next turn for the request `messages`.

        Raises:
            CassetteExhaustedError: `role` has no turn left.
            ReplayMismatchError: strict, and what PSE authored in `messages` differs from the turn's
                recorded request (strict "tools": anything differs, tool output included).
        """
        if role not in self._turns:
            raise CassetteError(
                f"no turns for {role!r} in this cassette; it scripts {', '.join(self._turns)}"
            )
        self.requests[role].append(list(messages))
        position = self._positions[role]
        turns = self._turns[role]
        if position >= len(turns):
            raise CassetteExhaustedError(role, position + 1, len(turns))
        turn = turns[position]
        if self.strict and turn.request is not None:
            difference = compare_request(turn.request, messages, self.scrubber, self._texts)
            if difference is not None:
                if self.strict == "tools" or not difference.drift_only:
                    raise ReplayMismatchError(self._mismatch(role, position + 1, difference))
                self._drift(role, position + 1, difference.changes)
        self._positions[role] = position + 1
        return turn

    def _mismatch(self, role: str, turn: int, difference: RequestDifference) -> str:
        head = f"strict replay of {self.source}: {role}'s turn {turn} was recorded for a different request."
        if difference.drift_only:
            fix = (
                "Only tool output differs (random data, timestamps, temporary paths, pids?), and "
                "PSE_REPLAY_STRICT=tools demands that it match. Replay with PSE_REPLAY_STRICT=true to record "
                "it as drift and go on, or with --replay-tools (PSE_REPLAY_TOOLS=true) to answer tool calls "
                "from the recording."
            )
        else:
            fix = (
                "What PSE sends (a prompt, the task, the step_buffer, the plan or the order of roles) "
                "differs. Re-record the cassette (PSE_RECORD) if it changed on purpose, or replay with "
                "PSE_REPLAY_STRICT=false to ignore recorded requests."
            )
        return f"{head}\n{difference.describe()}\n{fix}"

    def _drift(self, role: str, turn: int, changes: Sequence[MessageChange]) -> None:
        for change in changes:
            key = (change.recorded_digest, change.digest)
            if key in self._drifted:  # the same tool output again, in a later request of the phase
                continue
            self._drifted.add(key)
            record = DriftRecord(
                role=role,
                turn=turn,
                message=change.index,
                speaker=change.speaker,
                recorded_chars=change.recorded_chars,
                chars=change.chars,
                diff=change.diff,
            )
            self.drifts.append(record)
            if self.on_drift is not None:
                self.on_drift(record)


def _function_calls(turn: CassetteTurn, role: str, *, offered: bool) -> list[FunctionCall] | None:
    """A native turn's calls, or None for a text turn; a turn that does not fit the request's protocol
    (calls without functions offered, DSML text when they were) is a replay failure, said plainly."""
    if turn.tool_calls is None:
        if offered and any(tag in turn.content for tag in _DSML_TAGS):
            raise ReplayMismatchError(
                f"a {role} turn of the cassette is DSML text, but this run speaks the native protocol "
                "(PSE_PROTOCOL=native), where a model answers with function calls: give the turn "
                '"tool_calls" (docs/models.md), or replay it with PSE_PROTOCOL=dsml'
            )
        return None
    if not offered:
        raise ReplayMismatchError(
            f"a {role} turn of the cassette holds native function calls, but this run offered no functions: "
            "replay it with PSE_PROTOCOL=native"
        )
    return [
        FunctionCall(id=f"call_{n}", name=call.name, arguments=call.arguments_json())
        for n, call in enumerate(turn.tool_calls, start=1)
    ]


class ScriptedChatCompletionClient(InProcessChatCompletionClient):
    """Answers each request of one role with that role's next cassette turn.

    A turn with `tool_calls` answers as the native function calls a provider returns (ids `call_1`, …),
    its `content` as their accompanying text; it needs a request that offered functions.

    Usage is the turn's `usage` when it has one; otherwise prompt tokens are
    `count_message_tokens` of every message sent and completion tokens are
    `count_tokens` of the reply, so the figures are exact and repeatable.
    """

    def __init__(
        self,
        player: CassettePlayer,
        role: str,
        *,
        model: str = "scripted",
        meter: UsageSink | None = None,
        key: str | None = None,
    ) -> None:
        self.player = player
        self.role = role
        self.key = key or role
        """The cassette stream played: the role, or `ROLE@STEP` for one step of a steps plan."""
        self.model = model
        self.meter = meter
        super().__init__()

    @property
    def requests(self) -> list[list[LLMMessage]]:
        """Every request this role made, in order (kept by the shared player)."""
        return self.player.requests[self.key]

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        started = time.perf_counter()
        if self.player.latency_s > 0:
            await asyncio.sleep(self.player.latency_s)
        turn = self.player.next_turn(self.key, messages)
        calls = _function_calls(turn, self.role, offered=bool(options.tools))
        if turn.usage is not None:
            usage = RequestUsage(turn.usage.prompt_tokens, turn.usage.completion_tokens)
        else:
            reply = "\n".join([turn.content, *(f"{c.name}({c.arguments})" for c in calls or ())])
            usage = RequestUsage(count_message_tokens(message_texts(messages)), count_tokens(reply))
        self._add_usage(usage)
        if self.meter is not None:
            finish = "function_calls" if calls is not None else "stop"
            ms = round((time.perf_counter() - started) * 1000)
            prompt, completion = usage.prompt_tokens, usage.completion_tokens
            self.meter(
                CallUsage(self.role, prompt, completion, text=turn.content, finish_reason=finish, model_ms=ms)
            )
        if calls is not None:
            thought = turn.content or None
            return CreateResult(
                finish_reason="function_calls", content=calls, usage=usage, cached=False, thought=thought
            )
        return CreateResult(finish_reason="stop", content=turn.content, usage=usage, cached=False)
