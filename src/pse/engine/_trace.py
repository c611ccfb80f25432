"""The trace: one JSON document per run, made of the typed records of `pse.events`.

Written atomically (temporary file + rename) at the start, at every cycle end and at the end, so a
reader never sees half a file and a killed run can be resumed from its last complete cycle.
`TRACE_SCHEMA_VERSION` changes whenever a field changes meaning; `trace_schema()` is the JSON Schema
(also shipped as `trace.schema.json` beside this module, kept equal by a test).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pse._run_files import MAX_TRACE_BYTES, read_beneath
from pse.events import (
    BlockedRecord,
    GateRecord,
    MessageRecord,
    OutcomeEvent,
    PlanRecord,
    RetrievalEvent,
    SandboxRecord,
    TokenCount,
    ToolCallRecord,
    TransitionRecord,
    VerdictRecord,
)

__all__ = [
    "TRACE_SCHEMA_VERSION",
    "Cost",
    "CycleRecord",
    "RunTokens",
    "Trace",
    "load_trace",
    "outcome_event",
    "prune_runs",
    "trace_schema",
    "write_trace",
]

TRACE_SCHEMA_VERSION = 1
TRACE_FILE = "trace.json"
Outcome = Literal["PASSED", "ESCALATED", "TIMEOUT", "ERROR"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CycleRecord(_Model):
    """One plan → execute → evaluate cycle."""

    index: int
    kind: Literal["initial", "revise", "replan"]
    first_speaker: str
    started_at: str
    ended_at: str | None = None
    step_buffer: str | None = Field(None, description="what crossed into this cycle from the previous one")
    step_buffer_tokens: int = 0
    plan: PlanRecord | None = None
    verdict: VerdictRecord | None = None
    review_error: str | None = None
    blocked: BlockedRecord | None = None
    gate: GateRecord = Field(
        default_factory=lambda: GateRecord(passed=False, failures=["cycle did not finish"])
    )
    result: str = Field(
        "", description="what the cycle came to: PASS, PARTIAL, FAIL, BLOCKED, ERROR, TIMEOUT"
    )
    result_reason: str = Field("", description="reason code or why the cycle was stopped (HARD_GATE: ...)")
    messages: list[MessageRecord] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    retrievals: list[RetrievalEvent] = Field(default_factory=list)
    tokens: dict[str, TokenCount] = Field(default_factory=dict)
    turns: int = 0
    positions_at_start: dict[str, int] = Field(
        default_factory=dict, description="cassette turns consumed per role when the cycle began (resume)"
    )


class RunTokens(_Model):
    """Tokens of the whole run."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    by_role: dict[str, TokenCount] = Field(default_factory=dict)


class Cost(_Model):
    """Money the run cost, computed from the configured prices."""

    amount: float = 0.0
    currency: str = "USD"
    unpriced_models: list[str] = Field(default_factory=list, description="models with no price: counted as 0")


class Counters(_Model):
    """Retry counters, kept so a resumed run goes on with the same ones."""

    partial_retries: int = 0
    fail_retries: int = 0


class Trace(_Model):
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
    context_mode: str = "step_buffer"
    sandbox: SandboxRecord | None = Field(None, description="which sandbox ran the tool commands")
    task_message: str = ""
    plan: PlanRecord | None = None
    counters: Counters = Field(default_factory=Counters)
    cassette_positions: dict[str, int] = Field(default_factory=dict)
    transitions: list[TransitionRecord] = Field(default_factory=list)
    cycles: list[CycleRecord] = Field(default_factory=list)
    tokens: RunTokens = Field(default_factory=RunTokens)
    cost: Cost = Field(default_factory=Cost)
    escalation: str | None = None
    report: str | None = None
    resumed: int = Field(0, description="how many times the run was resumed")


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
    schema = Trace.model_json_schema(by_alias=True)
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

    Only folders holding a `trace.json` are considered, so nothing else in the directory is touched.
    Returns the pruned run ids.
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
            shutil.rmtree(run_dir)
            pruned.append(run_dir.name)
    return pruned
