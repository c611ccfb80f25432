"""The trace's records: what a run keeps of its messages, plans, verdicts, gates, costs and steps."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from pse._tool_record import _Record, utc_now

__all__ = [
    "SEVERITIES",
    "ApprovalRecord",
    "BlockedRecord",
    "ClarificationRecord",
    "CriterionResult",
    "DeliveryRecord",
    "DriftRecord",
    "FindingRecord",
    "FormatRepair",
    "GateRecord",
    "GateResult",
    "HumanAnswer",
    "LeftOutFile",
    "MessageRecord",
    "PlanItem",
    "PlanRecord",
    "QuestionRecord",
    "RepositoryRecord",
    "SandboxRecord",
    "Severity",
    "StepAttemptRecord",
    "TransitionRecord",
    "VerdictRecord",
]


class SandboxRecord(_Record):
    """Which sandbox ran a run's tool commands, as whom, and the warning a user must see when it is weak."""

    mode: Literal["bwrap", "fallback"]
    requested: Literal["auto", "bwrap", "fallback"]
    uid: int = Field(description="the uid tool commands run as")
    warning: str | None = Field(None, description="what this mode does not protect, and how to get bwrap")


class RepositoryRecord(_Record):
    """A run on a repository (`--repo`): where its worktree came from, and the change it produced."""

    path: str = Field(description="the user's repository (absolute); PSE writes only into its .git")
    base: str = Field(description="the base ref as given (`--base`, default HEAD)")
    base_commit: str = Field(description="the commit the run's worktree started from")
    branch: str = Field(description="the run's branch, `pse/<run_id>`")
    worktree: str = Field(description="the worktree's administrative folder inside the repository's .git")
    commit: str | None = Field(None, description="the run's commit on `branch` (PASSED with a change only)")
    patch: str | None = Field(None, description="`change.patch` in the run folder (absolute), when written")
    note: str = Field("", description="what became of the change: committed, none, kept as a patch")
    warning: str | None = Field(None, description="what a person should know: uncommitted changes left out")
    released: bool = Field(
        False,
        description="the run ended for good (it cannot go on): its worktree is out of the repository, and "
        "its branch too unless it holds the run's commit; the workspace's files stay in the run folder",
    )


class LeftOutFile(_Record):
    """A file a role wrote that no check admitted: not part of what the run delivers."""

    path: str
    author: str
    kept_at: str | None = Field(None, description="where it was moved to (the run folder's `left-out/`)")


class DeliveryRecord(_Record):
    """What the run delivers: the workspace as the last checks saw it, and what a role wrote besides."""

    files: int = Field(description="the workspace files the final manifest admits: what the run delivers")
    left_out: list[LeftOutFile] = Field(
        default_factory=list,
        description="files a role wrote that no check saw: moved out of the workspace (a repository's "
        "tracked file stays, and its change is not committed)",
    )
    note: str = Field("", description="what could not be done, if anything")


class MessageRecord(_Record):
    """One message of a cycle, with what it cost."""

    source: str
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    at: str = Field(default_factory=utc_now)
    thought: str | None = Field(
        None,
        description="the model's reasoning (<think>, reasoning_content): kept, never parsed or passed on",
    )
    thought_tokens: int = Field(
        0, description="tokens of `thought` (PSE's counter), part of completion_tokens"
    )
    late: bool = Field(False, description="produced after the cycle was stopped: kept, not acted on")
    step: str | None = Field(None, description='execution = "steps": the step of the plan it belongs to')
    finish_reason: str | None = Field(
        None, description="why the model stopped (stop, length, function_calls…), when its client said"
    )
    model_ms: int | None = Field(
        None, description="milliseconds the model took to answer (its answering attempt; no waiting)"
    )


class PlanItem(_Record):
    """A numbered step or acceptance criterion of a plan."""

    id: str
    text: str
    depends_on: list[str] = Field(default_factory=list, description="a step's: the steps it needs first")
    step: str | None = Field(None, description="a criterion's: the step it judges (None: the whole task)")


class PlanRecord(_Record):
    """A parsed `<plan>`: the task packet. Its criteria stay fixed until a FAIL forces a re-plan."""

    goal: str
    steps: list[PlanItem] = Field(default_factory=list)
    criteria: list[PlanItem] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    output_steps: dict[str, str] = Field(
        default_factory=dict, description="output path → the step that produces it (execution = steps)"
    )


class QuestionRecord(_Record):
    """One question of a Planner's `<clarification>`."""

    id: str
    text: str


class ClarificationRecord(_Record):
    """A parsed `<clarification>`: what the Planner must not assume, asked of a person."""

    questions: list[QuestionRecord]


class HumanAnswer(_Record):
    """A person's answer to an escalated run (`pse answer`): who, when, what, and what it changed."""

    at: str = Field(default_factory=utc_now)
    by: str = Field(description="the OS user (CLI) or the caller's identity")
    via: Literal["cli", "api"] = "cli"
    decision: Literal["resume", "accept", "reject", "answer"]
    note: str | None = Field(None, description="given to the next cycle through the step_buffer")
    text: str | None = Field(None, description="answer: what the person said to the Planner's questions")
    questions: list[QuestionRecord] = Field(default_factory=list, description="answer: what was asked")
    grants: list[str] = Field(default_factory=list, description="ROLE.TOOL:MODE widenings, this run only")
    retries: int = Field(0, description="cycles the answer allows (the first one included)")
    replan: bool = False
    after_cycle: int = Field(description="the run's last cycle when it was answered")
    outcome_before: str = Field(description="the outcome the answer found: ESCALATED")
    reason_before: str = ""


class ApprovalRecord(_Record):
    """One tool call held for a person, and its decision: the audit of an approval (who, when, what, why).

    `via`: terminal (the live view asked), cli (`pse approve`), api (the dashboard, with its token),
    timeout (nobody answered in PSE_APPROVAL_TIMEOUT_S: denied), standing (an earlier "approve all such
    calls for this run" covered it).
    """

    id: str = Field(description="A<cycle>.<n>: the n-th held call of the cycle")
    cycle: int
    requester: str
    tool: str
    arguments: dict[str, str]
    index: int = Field(description="position of the invoke in its message, from 1")
    rule: str = Field(description="approval.ROLE.TOOL: the grant whose approval rule held it")
    fired: str = Field(description="what about the call the rule matched")
    preview: str = Field(description="what the person was shown: a write's diff, a command")
    requested_at: str = Field(default_factory=utc_now)
    decision: Literal["approved", "denied"] | None = None
    scope: Literal["call", "run"] = Field(
        "call", description="run: the person approved all such calls (same role, tool, rule) for this run"
    )
    by: str | None = Field(None, description="the OS user, or the dashboard token's identity")
    via: Literal["terminal", "cli", "api", "timeout", "standing"] | None = None
    reason: str = ""
    decided_at: str | None = None


class BlockedRecord(_Record):
    """A parsed `<blocked>`: a role cannot go on and asks for a person."""

    role: str
    reason_code: str
    detail: str = ""
    test: str | None = None
    """The test a `SPEC_CONFLICT` names (its `test` attribute); `detail` then quotes the specification."""


class CriterionResult(_Record):
    """The Evaluator's finding on one acceptance criterion."""

    id: str
    met: bool
    finding: str = ""


Severity = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")
"""A finding's severities, worst first."""


class FindingRecord(_Record):
    """One `<finding>` of a verdict: a problem the Evaluator found, ranked, and where."""

    id: str
    severity: Severity
    text: str = ""
    criterion: str | None = Field(None, description="the plan criterion it concerns, if any")
    path: str | None = Field(None, description="the workspace file it is in, if any")
    line: int | None = Field(None, description="its line in that file, if any")

    def describe(self) -> str:
        """One line: `F1 high (AC2, src/x.py:41): text`."""
        where = ", ".join(
            part
            for part in (self.criterion, f"{self.path}:{self.line}" if self.path and self.line else self.path)
            if part
        )
        return f"{self.id} {self.severity}" + (f" ({where})" if where else "") + f": {self.text}"


class VerdictRecord(_Record):
    """A parsed `<verdict>`."""

    status: Literal["PASS", "PARTIAL", "FAIL", "BLOCKED"]
    reason_code: str
    criteria: list[CriterionResult] = Field(default_factory=list)
    summary: str = ""
    findings: list[FindingRecord] = Field(
        default_factory=list, description="the verdict's `<finding>`s, ranked by severity (high, medium, low)"
    )


class GateResult(_Record):
    """One hard gate's outcome."""

    name: str
    passed: bool
    detail: str = ""


class GateRecord(_Record):
    """The hard gates of one cycle; `failures` names each gate that failed and why."""

    passed: bool
    failures: list[str] = Field(default_factory=list)
    results: list[GateResult] = Field(default_factory=list)
    enforced: bool = Field(
        True, description="false when the run had PSE_HARD_GATES=false: recorded, not applied to a PASS"
    )


class TransitionRecord(_Record):
    """One state-machine transition (serialized with the key `from`)."""

    model_config = ConfigDict(
        extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    from_: str = Field(alias="from")
    to: str
    at: str = Field(default_factory=utc_now)
    reason: str = ""


class DriftRecord(_Record):
    """Strict replay sent a role tool output that differs from the recording: recorded, not a failure.

    Real tool output is rarely byte-stable (random data, timestamps, temporary paths, pids), so strict
    replay compares what PSE authored and files each place where tool output drifted, with its diff.
    """

    role: str = Field(description="the role whose request held the tool output")
    turn: int = Field(description="that role's cassette turn, from 1")
    message: int = Field(description="the message of the request, from 1")
    speaker: str = Field(description="who sent it: user:ToolAgent, or tool for native tool results")
    recorded_chars: int = 0
    chars: int = 0
    diff: str = Field("", description="unified diff, recorded → now (of excerpts if no whole text was kept)")
    at: str = Field(default_factory=utc_now)


class FormatRepair(_Record):
    """A role's turn lacked the element it owed; the engine told it the exact parse error and asked again."""

    role: str
    error: str = Field(description="what the parser said")
    attempt: int = Field(description="repairs of this role in this phase (a step's, or the cycle's), from 1")
    at: str = Field(default_factory=utc_now)


class StepAttemptRecord(_Record):
    """One attempt at one step of a steps plan: its Specialist's work and its own review."""

    step: str
    attempt: int = Field(description="from 1; a PARTIAL retries the step alone, in a fresh context")
    started_at: str = Field(default_factory=utc_now)
    ended_at: str | None = None
    step_buffer: str | None = Field(None, description="what crossed into a retry: the last review's findings")
    step_buffer_tokens: int = 0
    verdict: VerdictRecord | None = None
    gate: GateRecord | None = None
    result: str = Field("", description="PASS, PARTIAL, FAIL, BLOCKED, ERROR (no readable review)")
    result_reason: str = ""
