"""The record of one tool request, as the ToolAgent decided and (maybe) ran it; also its audit event.

Split from `pse.events` (which re-exports everything here) only for size: pure data, no PSE imports.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Decision", "OutcomeStatus", "ToolCallRecord", "ToolStatus", "utc_now"]

OutcomeStatus = Literal["ok", "error", "timeout"]
"""How a tool that ran came out: exit 0, anything else, or killed by its timeout."""
ToolStatus = Literal[OutcomeStatus, "denied"]
"""The status of every tool result a role sees: how it ran, or that it was refused (the one status type)."""
Decision = Literal["allowed", "denied"]


def utc_now() -> str:
    """Current time as an ISO-8601 UTC string with milliseconds (the format of every `at` field)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallRecord(_Record):
    """One tool request as the ToolAgent decided and (maybe) executed it; also its audit event."""

    requester: str
    tool: str
    arguments: dict[str, str]
    decision: Decision
    rule: str = Field(description="the policy rule that decided, e.g. 'roles.Specialist.write_file'")
    status: ToolStatus
    ms: int = 0
    output: str = ""
    index: int = Field(1, description="position of the invoke in its message, from 1")
    sandbox: str | None = Field(
        None, description="the sandbox mode that ran it (bwrap…, fallback), replay: answered from a cassette"
    )
    truncated: bool = False
    facts: dict[str, Any] = Field(default_factory=dict, description="exit_code, passed, failed, findings...")
    approval: str | None = Field(
        None, description="the id of the approval that held the call for a person (trace.approvals)"
    )
    step: str | None = Field(None, description='execution = "steps": the step of the plan it belongs to')
    normalised: dict[str, str] = Field(
        default_factory=dict,
        description="parameters whose raw value was taken as the model meant it before the call ran (an "
        "enclosing Markdown fence unwrapped, the XML nesting's indentation removed), each with what changed",
    )
    at: str = Field(default_factory=utc_now)

    # One named constructor per way a request ends (the who-and-what first, then the decision).

    @classmethod
    def malformed(
        cls, *, requester: str, tool: str, arguments: dict[str, str], index: int, rule: str, problem: str
    ) -> ToolCallRecord:
        """A request the protocol could not read (rule `protocol.<kind>`): denied, answered as an error."""
        return cls(
            requester=requester, tool=tool, arguments=arguments, index=index,
            decision="denied", rule=rule, status="error", output=problem,
        )  # fmt: skip

    @classmethod
    def denied(
        cls,
        *,
        requester: str,
        tool: str,
        arguments: dict[str, str],
        index: int,
        rule: str,
        reason: str,
        ms: int = 0,
    ) -> ToolCallRecord:
        """A request a rule refused: the policy, a budget, a protected file, or (while it ran, after `ms`)
        the sandbox's path check."""
        return cls(
            requester=requester, tool=tool, arguments=arguments, index=index,
            decision="denied", rule=rule, status="denied", output=reason, ms=ms,
        )  # fmt: skip

    @classmethod
    def ran(
        cls,
        *,
        requester: str,
        tool: str,
        arguments: dict[str, str],
        index: int,
        rule: str,
        status: OutcomeStatus,
        output: str,
        ms: int,
        sandbox: str | None,
        truncated: bool = False,
        facts: dict[str, Any] | None = None,
    ) -> ToolCallRecord:
        """An allowed request that ran, with what it produced (a failure of the machinery is an error)."""
        return cls(
            requester=requester, tool=tool, arguments=arguments, index=index,
            decision="allowed", rule=rule, status=status, output=output, ms=ms, sandbox=sandbox,
            truncated=truncated, facts=facts or {},
        )  # fmt: skip

    @classmethod
    def not_run(
        cls, *, requester: str, tool: str, arguments: dict[str, str], index: int, rule: str, reason: str
    ) -> ToolCallRecord:
        """An allowed request left unrun: the tool machinery failed on an earlier one, or the run stopped."""
        return cls(
            requester=requester, tool=tool, arguments=arguments, index=index,
            decision="allowed", rule=rule, status="error", output=reason,
        )  # fmt: skip
