"""One line of the run history, read from a trace's JSON without validating the whole trace."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from pse.roles import TOOL_AGENT

__all__ = ["RunEntry"]


class RunEntry(BaseModel):
    """One line of the run history: what lists and statistics need, without the whole trace."""

    run_id: str
    task: str
    outcome: str | None
    state: str = ""
    outcome_reason: str
    started_at: str
    ended_at: str | None
    cycles: int
    tokens: int
    prompt_tokens: int = 0
    cached_tokens: int = Field(0, description="prompt tokens served from the providers' prompt caches")
    prefix_counted: int = Field(0, description="prompt tokens sent, by PSE's own counter")
    prefix_reusable: int = Field(0, description="of those, a prefix already sent to the same model")
    cost: float
    currency: str
    tool_calls: int = 0
    denied_tool_calls: int = 0
    handoffs: int = Field(
        0, description="turns handed on: role final messages, tool requests, repaired turns"
    )
    handoff_failures: int = Field(
        0,
        description="handoffs that could not be read: repaired turns, review errors, malformed tool requests",
    )
    tags: dict[str, str] = Field(default_factory=dict, description="the run's labels (eval, arm, instance)")

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> RunEntry:
        """The entry of a trace's JSON (a trace file, or `Trace.row()`'s dump), without validating the
        whole trace: a dashboard lists 10,000 runs from their files."""
        tokens = data.get("tokens") or {}
        cost = data.get("cost") or {}
        cycles = data.get("cycles") or []
        calls = [call for cycle in cycles for call in cycle.get("tool_calls") or []]
        handoffs = failures = 0
        for cycle in cycles:
            messages = [m for m in cycle.get("messages") or [] if not m.get("late")]
            repairs = len(cycle.get("repairs") or [])
            handoffs += len({m.get("source") for m in messages} - {TOOL_AGENT}) + repairs
            handoffs += sum(1 for m in messages if m.get("source") == TOOL_AGENT)
            failures += repairs + (1 if cycle.get("review_error") else 0)
            failures += sum(
                1 for c in cycle.get("tool_calls") or [] if str(c.get("rule", "")).startswith("protocol.")
            )
        return cls(
            run_id=str(data.get("run_id", "")),
            task=str(data.get("task", "")),
            outcome=data.get("outcome"),
            state=str(data.get("state", "")),
            outcome_reason=str(data.get("outcome_reason", "")),
            started_at=str(data.get("started_at", "")),
            ended_at=data.get("ended_at"),
            cycles=len(cycles),
            tokens=int(tokens.get("total", 0)),
            prompt_tokens=int(tokens.get("prompt", 0)),
            cached_tokens=int(tokens.get("cached", 0)),
            prefix_counted=sum(
                int(t.get("prefix_counted", 0)) for t in (tokens.get("by_role") or {}).values()
            ),
            prefix_reusable=sum(
                int(t.get("prefix_reusable", 0)) for t in (tokens.get("by_role") or {}).values()
            ),
            cost=float(cost.get("amount", 0.0)),
            currency=str(cost.get("currency", "USD")),
            tool_calls=len(calls),
            denied_tool_calls=sum(1 for call in calls if call.get("decision") == "denied"),
            handoffs=handoffs,
            handoff_failures=failures,
            tags={str(k): str(v) for k, v in (data.get("tags") or {}).items()},
        )
