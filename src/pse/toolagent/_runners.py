"""Where an allowed call's result comes from: run for real, run and recorded, or replayed from a recording.

The executor decides every request, keeps the budgets and the audit, and hands each *allowed* call to
its `ToolRunner` together with `execute`, the real execution (the tool in its sandbox, redaction, the
output cap). The default runner just executes. `RecordingToolRunner` executes and hands each audit
record on (to a cassette recorder). `ReplayingToolRunner` (`--replay-tools`) answers each call from the
recorded runs, in order, and fails with `ToolReplayMismatchError` on the first call that differs from
its recorded one (requester, tool or arguments) or that the recording does not have. Only the
execution is replaced: policy decisions, budgets, audit and trace take their real path, and the hard
gates read the recorded facts.

The file tools (`read_file`, `list_files`, `write_file`) run for real even in replay: they start no
command, are confined to the workspace and give the same result for the same workspace, and they
build the workspace that the gates (expected outputs exist) and the step_buffer (the artifact list)
read. Their result must still equal the recorded one. What replay does not reproduce: what a replayed
command changed in the workspace (a `bash` that wrote a file); a later file call that reads it then
differs from the recording and stops the run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pse.events import ToolCallRecord
from pse.exceptions import ToolReplayMismatchError
from pse.toolagent._decide import Allowed, Request
from pse.tools import Tool

__all__ = [
    "REPLAYED",
    "WORKSPACE_TOOLS",
    "Execute",
    "RecordingToolRunner",
    "ReplayingToolRunner",
    "ToolRunner",
    "resumed_mismatch",
    "run_tools",
]

WORKSPACE_TOOLS = frozenset({Tool.READ_FILE, Tool.LIST_FILES, Tool.WRITE_FILE})
"""Tools that run for real even when tools are replayed: file access inside the workspace, no command."""
REPLAYED = "replay"
"""The `sandbox` of an audit record answered from a recording: nothing ran."""
_FIX = (
    "Re-record the cassette (pse run TASK --record FILE) if the run changed on purpose, or run without "
    "--replay-tools (PSE_REPLAY_TOOLS=false) to execute the tools."
)

Execute = Callable[[Allowed], ToolCallRecord]
"""The real execution of an allowed call: the tool in its sandbox, its output redacted and capped."""


class ToolRunner(Protocol):
    """Gives the audit record of one allowed call: by `execute`, or some other way."""

    def __call__(self, step: Allowed, execute: Execute) -> ToolCallRecord: ...


def run_tools(step: Allowed, execute: Execute) -> ToolCallRecord:
    """The default runner: execute the call for real."""
    return execute(step)


class RecordingToolRunner:
    """Runs each call through `inner` and hands its audit record to `sink` (e.g. a cassette recorder).

    Args:
        sink: receives the audit record of every executed (or replayed) call, in order.
        inner: the runner that gives the record (default: execute for real).
    """

    def __init__(self, sink: Callable[[ToolCallRecord], None], inner: ToolRunner = run_tools) -> None:
        self.sink = sink
        self.inner = inner

    def __call__(self, step: Allowed, execute: Execute) -> ToolCallRecord:
        record = self.inner(step, execute)
        self.sink(record)
        return record


def _same(value: Any) -> Any:
    return value


class ReplayingToolRunner:
    """Answers each allowed call with the next recorded tool run; file tools run for real and must agree.

    Args:
        runs: the recorded tool runs, in the order they ran (`Cassette.tool_runs`).
        source: where they come from, for messages.
        position: runs already replayed (a resumed run).
        scrub: what the recorder did to arguments, outputs and facts (`Scrubber.data`), so the calls of
            this run compare with what the cassette keeps.
    """

    def __init__(
        self,
        runs: Sequence[ToolCallRecord],
        *,
        source: str,
        position: int = 0,
        scrub: Callable[[Any], Any] = _same,
    ) -> None:
        self._runs = list(runs)
        self._position = position
        self.source = source
        self._scrub = scrub

    @property
    def position(self) -> int:
        """Tool runs replayed so far (saved in the trace to resume a run)."""
        return self._position

    def __call__(self, step: Allowed, execute: Execute) -> ToolCallRecord:
        request = step.request
        number = self._position + 1
        asked = f"{request['requester']} → {request['tool']}"
        if self._position >= len(self._runs):
            raise ToolReplayMismatchError(
                f"tool replay of {self.source}: tool run {number} ({asked}) was never recorded: the "
                f"recording holds {len(self._runs)} tool run(s). {_FIX}"
            )
        recorded = self._runs[self._position]
        problems = []
        if (recorded.requester, recorded.tool) != (request["requester"], request["tool"]):
            problems.append(f"recorded {recorded.requester} → {recorded.tool}, now {asked}")
        else:
            problems += _argument_changes(recorded.arguments, self._scrub(request["arguments"]))
        if problems:
            raise ToolReplayMismatchError(
                f"tool replay of {self.source}: tool run {number} ({asked}) differs from the recorded one: "
                + "; ".join(problems)
                + f". {_FIX}"
            )
        self._position = number
        if request["tool"] in WORKSPACE_TOOLS:
            return self._agreeing(number, recorded, execute(step))
        return ToolCallRecord(
            **request,
            decision=recorded.decision,
            rule=step.rule if recorded.decision == "allowed" else recorded.rule,
            status=recorded.status,
            output=recorded.output,
            sandbox=REPLAYED,
            truncated=recorded.truncated,
            facts=copy.deepcopy(recorded.facts),
        )

    def _agreeing(self, number: int, recorded: ToolCallRecord, record: ToolCallRecord) -> ToolCallRecord:
        """The record of a file tool that ran for real, if it gave the recorded result."""
        now = (record.status, self._scrub(record.output), self._scrub(record.facts))
        if now == (recorded.status, recorded.output, recorded.facts):
            return record
        raise ToolReplayMismatchError(
            f"tool replay of {self.source}: tool run {number} ({record.requester} → {record.tool}) ran for "
            f"real and gave another result than recorded (status {recorded.status} recorded, {record.status} "
            f"now; output {recorded.output[:120]!r} recorded, {now[1][:120]!r} now). The workspace differs "
            "from the recorded run's: a replayed command's changes to it are not reproduced. " + _FIX
        )


def _argument_changes(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    return [
        _change(name, recorded.get(name), now.get(name))
        for name in sorted(set(recorded) | set(now))
        if recorded.get(name) != now.get(name)
    ]


def _change(name: str, old: str | None, new: str | None) -> str:
    if old is None or new is None:
        return f"argument {name} was {'absent' if old is None else repr(old[:80])}, now " + (
            "absent" if new is None else repr(new[:80])
        )
    if len(old) <= 80 and len(new) <= 80:
        return f"argument {name} was {old!r}, now {new!r}"
    at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    return (
        f"argument {name} differs from character {at}: "
        f"recorded {old[at : at + 60]!r}, now {new[at : at + 60]!r}"
    )


def resumed_mismatch(
    request: Request | ToolCallRecord, recorded: ToolCallRecord
) -> ToolReplayMismatchError | None:
    """Why a resumed cycle's request cannot be answered by the interrupted cycle's `recorded` one (it
    differs in requester, tool, arguments or index); None when it is the same request."""
    asked = (
        (request["requester"], request["tool"], request["arguments"], request["index"])
        if isinstance(request, dict)
        else (request.requester, request.tool, request.arguments, request.index)
    )
    if asked == (recorded.requester, recorded.tool, recorded.arguments, recorded.index):
        return None
    return ToolReplayMismatchError(
        f"the resumed cycle asked {asked[0]}'s {asked[1]} call {asked[3]} differently from the "
        f"interrupted one ({recorded.requester}'s {recorded.tool} call {recorded.index}); "
        "nothing was run: resume from the cycle before (see docs/human.md)"
    )
