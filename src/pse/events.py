"""Typed records and events: what the trace is made of and what live views consume.

Records (`ToolCallRecord`, `MessageRecord`, ...) are the trace's building blocks.
Events (`kind`-tagged, one class each) are what the engine emits while a run goes
on; the CLI's live view and the dashboard's SSE stream both consume these same
objects. Every class round-trips through JSON (`model_dump_json` /
`model_validate_json`); `Event` is a discriminated union on `kind`.

This module is pure data: it imports nothing of PSE's but the records (`pse._records`, the tool-call
record's `pse._tool_record`), which it re-exports.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from pse._records import (
    SEVERITIES,
    ApprovalRecord,
    BlockedRecord,
    ClarificationRecord,
    CriterionResult,
    DeliveryRecord,
    DriftRecord,
    FindingRecord,
    FormatRepair,
    GateRecord,
    GateResult,
    HumanAnswer,
    LeftOutFile,
    MessageRecord,
    PlanItem,
    PlanRecord,
    QuestionRecord,
    RepositoryRecord,
    SandboxRecord,
    Severity,
    StepAttemptRecord,
    TransitionRecord,
    VerdictRecord,
)
from pse._tool_record import Decision, OutcomeStatus, ToolCallRecord, ToolStatus, utc_now
from pse._usage_records import Cost, ProbeRecord, RateLimitRecord, TokenCount

__all__ = [
    "EVENT_ADAPTER",
    "SEVERITIES",
    "ApprovalEvent",
    "ApprovalRecord",
    "BlockedRecord",
    "ClarificationRecord",
    "Cost",
    "CriterionResult",
    "CycleStarted",
    "Decision",
    "DeliveryRecord",
    "DriftEvent",
    "DriftRecord",
    "Event",
    "FindingRecord",
    "FormatRepair",
    "FormatRepairEvent",
    "GateRecord",
    "GateResult",
    "HumanAnswer",
    "LeftOutFile",
    "MessageEvent",
    "MessageRecord",
    "OutcomeEvent",
    "OutcomeStatus",
    "PlanItem",
    "PlanRecord",
    "ProbeRecord",
    "QuestionRecord",
    "RateLimitRecord",
    "RepositoryRecord",
    "RetrievalEvent",
    "SandboxRecord",
    "Severity",
    "StepAttemptRecord",
    "StepEvent",
    "TokenCount",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolStatus",
    "TransitionEvent",
    "TransitionRecord",
    "VerdictEvent",
    "VerdictRecord",
    "utc_now",
]


# ---- events: what happens while a run goes on ----------------------------------------------


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    at: str = Field(default_factory=utc_now)


class CycleStarted(_Event):
    """A cycle begins."""

    kind: Literal["cycle_start"] = "cycle_start"
    cycle: int
    cycle_kind: Literal["initial", "revise", "replan"]
    first_speaker: str


class MessageEvent(_Event):
    """A role (or the ToolAgent) said something."""

    kind: Literal["message"] = "message"
    cycle: int
    message: MessageRecord


class ToolCallEvent(_Event):
    """The ToolAgent decided (and maybe executed) one request."""

    kind: Literal["tool_call"] = "tool_call"
    cycle: int
    call: ToolCallRecord


class RetrievalEvent(_Event):
    """Knowledge was retrieved for a role."""

    kind: Literal["retrieval"] = "retrieval"
    cycle: int
    query: str
    results: list[dict[str, Any]] = Field(default_factory=list)


class VerdictEvent(_Event):
    """The cycle's verdict and its gates (verdict None: the review was an ERROR)."""

    kind: Literal["verdict"] = "verdict"
    cycle: int
    verdict: VerdictRecord | None
    gate: GateRecord
    error: str | None = None
    stopped: str | None = Field(None, description="why the cycle was stopped before a review, if it was")
    result: str = Field(
        "",
        description="what the engine decided the cycle came to (the trace's cycle `result`): PASS, PARTIAL "
        "(also a PASS whose enforced gates failed), FAIL, BLOCKED, ERROR, TIMEOUT, QUESTIONS; empty in "
        "events from before the engine sent it",
    )
    result_reason: str = Field("", description="why (the trace's cycle `result_reason`)")


class FormatRepairEvent(_Event):
    """The engine asked a role to repair its turn (see `FormatRepair`)."""

    kind: Literal["format_repair"] = "format_repair"
    cycle: int
    repair: FormatRepair


class DriftEvent(_Event):
    """Strict replay met tool output that differs from the recording (the run goes on)."""

    kind: Literal["drift"] = "drift"
    cycle: int
    drift: DriftRecord


class TransitionEvent(_Event):
    """The state machine moved."""

    kind: Literal["transition"] = "transition"
    transition: TransitionRecord


class ApprovalEvent(_Event):
    """A tool call was held for a person (decision None), or the person (or the timeout) decided it."""

    kind: Literal["approval"] = "approval"
    cycle: int
    approval: ApprovalRecord


class StepEvent(_Event):
    """A step of a steps plan started an attempt (result "") or ended one."""

    kind: Literal["step"] = "step"
    cycle: int
    attempt: StepAttemptRecord


class OutcomeEvent(_Event):
    """The run ended."""

    kind: Literal["outcome"] = "outcome"
    outcome: Literal["PASSED", "ESCALATED", "TIMEOUT", "ERROR"]
    reason: str
    cycles: int
    tokens: TokenCount
    cost: float
    currency: str


Event = Annotated[
    CycleStarted
    | MessageEvent
    | ToolCallEvent
    | RetrievalEvent
    | DriftEvent
    | VerdictEvent
    | TransitionEvent
    | FormatRepairEvent
    | ApprovalEvent
    | StepEvent
    | OutcomeEvent,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
