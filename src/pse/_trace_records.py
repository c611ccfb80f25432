"""The trace's own records, besides `pse.events`': a cycle, the run's tokens, its retry counters."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from pse.events import (
    BlockedRecord,
    ClarificationRecord,
    DriftRecord,
    FormatRepair,
    GateRecord,
    MessageRecord,
    PlanRecord,
    RetrievalEvent,
    StepAttemptRecord,
    TokenCount,
    ToolCallRecord,
    VerdictRecord,
)

__all__ = ["Counters", "CycleRecord", "RunTokens", "TraceModel"]


class TraceModel(BaseModel):
    """A trace's record: an unknown field is an error, not silently kept."""

    model_config = ConfigDict(extra="forbid")


class CycleRecord(TraceModel):
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
    stopped: str | None = Field(None, description="why the cycle was stopped before its end, if it was")
    blocked: BlockedRecord | None = None
    clarification: ClarificationRecord | None = Field(
        None, description="the Planner's questions, when it asked instead of planning (PSE_PLANNER_QUESTIONS)"
    )
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
    repairs: list[FormatRepair] = Field(
        default_factory=list, description="turns the engine asked a role to repair (PSE_FORMAT_RETRIES)"
    )
    drifts: list[DriftRecord] = Field(
        default_factory=list, description="replay only: tool output that differed from the recording"
    )
    tokens: dict[str, TokenCount] = Field(default_factory=dict)
    turns: int = 0
    transitions_at_start: int | None = Field(
        None, description="transitions recorded when the cycle began (resume cuts there)"
    )
    positions_at_start: dict[str, int] = Field(
        default_factory=dict, description="cassette turns consumed per role when the cycle began (resume)"
    )
    steps: list[StepAttemptRecord] = Field(
        default_factory=list, description='execution = "steps": every attempt at a step, in the order begun'
    )


class RunTokens(TraceModel):
    """Tokens of the whole run: per role, and totals derived from them (never kept by hand)."""

    by_role: dict[str, TokenCount] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _derived_totals(cls, data: Any) -> Any:
        # A trace on disk holds the totals too; they are recomputed, never read back.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in ("prompt", "completion", "total", "cached")}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prompt(self) -> int:
        """Prompt tokens of every call of the run."""
        return sum(t.prompt for t in self.by_role.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def completion(self) -> int:
        """Completion tokens of every call of the run."""
        return sum(t.completion for t in self.by_role.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt + self.completion

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cached(self) -> int:
        """Prompt tokens the providers served from their prompt caches (part of `prompt`)."""
        return sum(t.cached for t in self.by_role.values())


class Counters(TraceModel):
    """Retry counters, kept so a resumed run goes on with the same ones."""

    partial_retries: int = 0
    fail_retries: int = 0
