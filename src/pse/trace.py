"""The trace: one JSON document per run, made of the typed records of `pse.events`.

Written atomically (temporary file + rename) at the start, at every cycle end and at the end, so a
reader never sees half a file and a killed run can be resumed from its last complete cycle.
`TRACE_SCHEMA_VERSION` changes whenever a field changes meaning; `trace_schema()` is the JSON Schema
(shipped as `pse/engine/trace.schema.json`, kept equal by a test). The trace also knows how to be read:
`events()` replays it as the events a live consumer got, and `row()` is its line in the run history
(where a run goes on from is `engine.Resume`'s). A leaf module: it imports only `pse.events`,
`pse._run_entry`, `pse._run_files` (safe reading of run folders) and `pse._trace_records` (its records).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pse._run_entry import RunEntry
from pse._run_files import MAX_TRACE_BYTES, read_beneath
from pse._trace_records import Counters, CycleRecord, RunTokens, TraceModel
from pse.events import (
    ApprovalEvent,
    ApprovalRecord,
    Cost,
    CycleStarted,
    DeliveryRecord,
    DriftEvent,
    Event,
    FormatRepairEvent,
    HumanAnswer,
    MessageEvent,
    OutcomeEvent,
    PlanRecord,
    ProbeRecord,
    RateLimitRecord,
    RepositoryRecord,
    SandboxRecord,
    StepEvent,
    TokenCount,
    ToolCallEvent,
    TransitionEvent,
    TransitionRecord,
    VerdictEvent,
)
from pse.repo import remove_worktree

__all__ = [
    "TRACE_FILE",
    "TRACE_SCHEMA_VERSION",
    "Cost",
    "Counters",
    "CycleRecord",
    "Outcome",
    "RunEntry",
    "RunTokens",
    "Trace",
    "load_trace",
    "outcome_event",
    "prune_runs",
    "remove_run",
    "trace_schema",
    "write_trace",
]

TRACE_SCHEMA_VERSION = 2
TRACE_FILE = "trace.json"
Outcome = Literal["PASSED", "ESCALATED", "TIMEOUT", "ERROR", "ACCEPTED_BY_HUMAN"]
"""ACCEPTED_BY_HUMAN: a person accepted an escalated run's last artifacts; never counted as a pass."""


class Trace(TraceModel):
    """Everything that happened in one run."""

    schema_version: int = TRACE_SCHEMA_VERSION
    run_id: str
    task: str
    outcome: Outcome | None = None
    outcome_reason: str = ""
    state: str = "START"
    started_at: str
    ended_at: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(
        default_factory=dict, description="labels of the run: e.g. eval, arm and instance of `pse eval`"
    )
    context_mode: str = "step_buffer"
    sandbox: SandboxRecord | None = Field(None, description="which sandbox ran the tool commands")
    repository: RepositoryRecord | None = Field(
        None, description="a run on a repository (`--repo`): its base, branch, commit and patch"
    )
    delivery: DeliveryRecord | None = Field(
        None, description="what the run delivers: the files its checks admitted, and what was left out"
    )
    task_message: str = ""
    plan: PlanRecord | None = None
    counters: Counters = Field(default_factory=Counters)
    cassette_positions: dict[str, int] = Field(default_factory=dict)
    transitions: list[TransitionRecord] = Field(default_factory=list)
    cycles: list[CycleRecord] = Field(default_factory=list)
    tokens: RunTokens = Field(default_factory=RunTokens)
    cost: Cost = Field(default_factory=Cost)
    probes: list[ProbeRecord] = Field(
        default_factory=list,
        description="calls PSE made to a model server that were no role's turn (grammar-support probes); "
        "their tokens are counted in `tokens`",
    )
    rate_limit: RateLimitRecord | None = Field(
        None, description="time model calls waited on the rate limit or a Retry-After (None: none waited)"
    )
    escalation: str | None = None
    report: str | None = None
    resumed: int = Field(0, description="how many times the run was resumed")
    answers: list[HumanAnswer] = Field(
        default_factory=list, description="what people answered to the run's escalations (`pse answer`)"
    )
    approvals: list[ApprovalRecord] = Field(
        default_factory=list, description="tool calls held for a person, and their decisions (`pse approve`)"
    )

    def events(self) -> list[Event]:
        """The run's events rebuilt from the trace, in time order: what a live consumer received.

        Events of equal time keep the engine's order (cycle start, retrievals injected before it,
        messages, tool calls and their retrievals, replay drifts, verdict, transitions). An unfinished
        run replays what its trace holds, with no outcome event.
        """
        run_id = self.run_id
        timed: list[tuple[str, int, Event]] = []
        for t in self.transitions:
            timed.append((t.at, 4, TransitionEvent(run_id=run_id, at=t.at, transition=t)))
        for c in self.cycles:
            start = CycleStarted(
                run_id=run_id,
                at=c.started_at,
                cycle=c.index,
                cycle_kind=c.kind,
                first_speaker=c.first_speaker,
            )
            timed.append((c.started_at, 0, start))
            for m in c.messages:
                timed.append((m.at, 2, MessageEvent(run_id=run_id, at=m.at, cycle=c.index, message=m)))
            for call in c.tool_calls:
                timed.append((call.at, 2, ToolCallEvent(run_id=run_id, at=call.at, cycle=c.index, call=call)))
            for r in c.retrievals:
                timed.append((r.at, 1 if r.at <= c.started_at else 2, r))
            for fix in c.repairs:
                timed.append(
                    (fix.at, 2, FormatRepairEvent(run_id=run_id, at=fix.at, cycle=c.index, repair=fix))
                )
            for d in c.drifts:
                timed.append((d.at, 2, DriftEvent(run_id=run_id, at=d.at, cycle=c.index, drift=d)))
            if c.ended_at is not None:
                verdict = VerdictEvent(
                    run_id=run_id,
                    at=c.ended_at,
                    cycle=c.index,
                    verdict=c.verdict,
                    gate=c.gate,
                    error=c.review_error,
                    stopped=c.stopped,
                    result=c.result,
                    result_reason=c.result_reason,
                )
                timed.append((c.ended_at, 3, verdict))
        for c in self.cycles:  # each step attempt is two events: begun, then ended
            for attempt in c.steps:
                begun = attempt.model_copy(
                    update={
                        "result": "",
                        "result_reason": "",
                        "verdict": None,
                        "gate": None,
                        "ended_at": None,
                    }
                )
                timed.append(
                    (
                        attempt.started_at,
                        1,
                        StepEvent(run_id=run_id, at=attempt.started_at, cycle=c.index, attempt=begun),
                    )
                )
                if attempt.ended_at is not None:
                    ended = StepEvent(run_id=run_id, at=attempt.ended_at, cycle=c.index, attempt=attempt)
                    timed.append((attempt.ended_at, 2, ended))
        for a in self.approvals:  # each approval is two events: the call held, then its decision
            asked = a.model_copy(
                update={"decision": None, "by": None, "via": None, "reason": "", "decided_at": None}
            )
            held = ApprovalEvent(run_id=run_id, at=a.requested_at, cycle=a.cycle, approval=asked)
            timed.append((a.requested_at, 2, held))
            if a.decided_at is not None:
                decided = ApprovalEvent(run_id=run_id, at=a.decided_at, cycle=a.cycle, approval=a)
                timed.append((a.decided_at, 2, decided))
        timed.sort(key=lambda item: (item[0], item[1]))
        events = [event for _, _, event in timed]
        if self.outcome is not None:
            events.append(outcome_event(self))
        return events

    def row(self) -> RunEntry:
        """This run's line in the run history (see `RunEntry.of_json` for the fast path from disk)."""
        return RunEntry.of_json(self.model_dump(by_alias=True, include=_ROW_FIELDS))


_ROW_FIELDS = {
    "run_id",
    "task",
    "outcome",
    "state",
    "tags",
    "outcome_reason",
    "started_at",
    "ended_at",
    "cycles",
    "tokens",
    "cost",
}


def outcome_event(trace: Trace) -> OutcomeEvent:
    """The `outcome` event of a finished trace (what live consumers receive last).

    Raises:
        ValueError: the trace has no outcome yet.
    """
    if trace.outcome is None:
        raise ValueError(f"run {trace.run_id} has no outcome yet")
    return OutcomeEvent(
        run_id=trace.run_id,
        at=trace.ended_at or trace.started_at,
        outcome=trace.outcome,
        reason=trace.outcome_reason,
        cycles=len(trace.cycles),
        tokens=TokenCount(
            prompt=trace.tokens.prompt,
            completion=trace.tokens.completion,
            calls=sum(t.calls for t in trace.tokens.by_role.values()),
        ),
        cost=trace.cost.amount,
        currency=trace.cost.currency,
    )


def trace_schema() -> dict[str, Any]:
    """The JSON Schema of a trace file."""
    schema = Trace.model_json_schema(by_alias=True, mode="serialization")
    schema["$id"] = f"https://pse.invalid/schemas/trace-v{TRACE_SCHEMA_VERSION}.json"
    return schema


def write_trace(trace: Trace, run_dir: Path) -> Path:
    """Write `trace.json` atomically; return its path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / TRACE_FILE
    fd, tmp = tempfile.mkstemp(prefix=".trace-", suffix=".json", dir=run_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(trace.model_dump_json(indent=1, by_alias=True))
            handle.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_trace(path: Path, *, beneath: Path | None = None) -> Trace:
    """Read a trace file (a run folder or the file itself).

    Args:
        path: the run folder, or (without `beneath`) the trace file itself.
        beneath: the runs directory `path` lies in. Then `path` must be a run folder below it, and its
            `trace.json` is read as `pse._run_files` reads what tools wrote: no symlink followed on
            the way from `beneath`, regular files only, at most `MAX_TRACE_BYTES`.

    Raises:
        FileNotFoundError: with `beneath`, also for a symlinked folder or trace, or a FIFO.
        RunFileTooLarge: with `beneath`, the trace is over `MAX_TRACE_BYTES`.
    """
    if beneath is not None:
        parts = [*path.relative_to(beneath).parts, TRACE_FILE]
        return Trace.model_validate(json.loads(read_beneath(beneath, parts, max_bytes=MAX_TRACE_BYTES)))
    file = path / TRACE_FILE if path.is_dir() else path
    return Trace.model_validate(json.loads(file.read_text(encoding="utf-8")))


def prune_runs(
    runs_dir: Path, retention_days: int, *, keep: set[str] | frozenset[str] = frozenset()
) -> list[str]:
    """Delete run folders whose trace is older than `retention_days`; never those named in `keep`.

    Only folders holding a `trace.json` are considered, so nothing else in the directory is touched. A
    repository run's worktree goes with its folder (`remove_run`). Returns the pruned run ids.
    """
    if retention_days <= 0 or not runs_dir.is_dir():
        return []
    cutoff = time.time() - retention_days * 86400
    pruned: list[str] = []
    for run_dir in sorted(runs_dir.iterdir()):
        trace = run_dir / TRACE_FILE
        if run_dir.name in keep or not trace.is_file() or run_dir.is_symlink():
            continue
        if trace.stat().st_mtime < cutoff:
            remove_run(run_dir)
            pruned.append(run_dir.name)
    return pruned


def remove_run(run_dir: Path) -> None:
    """Delete a run folder; a repository run's worktree first (a worktree never outlives its run folder)."""
    remove_worktree(run_dir)
    shutil.rmtree(run_dir)
