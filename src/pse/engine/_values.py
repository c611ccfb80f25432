"""The values around the one decision: what happened (a phase's `PhaseResult`), and what comes next (`Next`).

The loop runs a phase (`_phases`), reads the role's final message once with `read_final`, the reader its
`RoleSpec.final` names (a plan, a report, a verdict; a `<blocked>`, a Planner's questions; or the
parser's own words), looks at the workspace for what the decision may weigh (`Seen`), and hands the lot
to `decide` (`_decide`), which answers with one `Next`. All of them are immutable; none decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from pse.engine._state import State
from pse.events import (
    BlockedRecord,
    ClarificationRecord,
    GateRecord,
    PlanRecord,
    ToolCallRecord,
    VerdictRecord,
)
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, find_clarification, parse_plan, parse_verdict
from pse.roles import CycleKind, role_spec
from pse.trace import Counters

__all__ = [
    "AskAgain",
    "CycleStop",
    "EndCycle",
    "EndStep",
    "Final",
    "Halted",
    "Move",
    "Next",
    "PhaseResult",
    "RunPhase",
    "RunSteps",
    "Seen",
    "StartCycle",
    "StepsSettled",
    "Stop",
    "read_final",
    "repair_request",
]


@dataclass(frozen=True)
class CycleStop:
    """Why a cycle was stopped before its natural end: TIMEOUT or ERROR, with a reason."""

    outcome: Literal["TIMEOUT", "ERROR"]
    reason: str


@dataclass(frozen=True)
class Final:
    """A final message as its role's reader read it: what it holds, or why it cannot be read.

    Attributes:
        plan / verdict / blocked / clarification: what it holds (at most one of them).
        problem: why it holds none of what the role owes, in the parser's words (a repair asks again).
        error: an unreadable final that ends the cycle whatever is left (`REPORT_ERROR: …`, a report's
            `<blocked>` the model never closed).
    """

    plan: PlanRecord | None = None
    verdict: VerdictRecord | None = None
    blocked: BlockedRecord | None = None
    clarification: ClarificationRecord | None = None
    problem: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Seen:
    """What PSE saw of the workspace and the gates as the phase ended: code's facts, never a role's word.

    Attributes:
        missing: the plan's outputs that are no file (a report's).
        broken: why each Python output of the plan is not code yet (a report's; `unparsed_outputs`).
        named_test: whether the test a `<blocked>` SPEC_CONFLICT names is a test function of the workspace.
        gate: the hard gates over the phase's review (a verdict's): its own cycle's, or its step's.
        sha256: (output, the sha256 of its bytes now) for each of the plan's outputs that is a file (a
            report's): what a revise's outputs are compared with, the bytes its review ran on.
    """

    missing: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    named_test: bool = True
    gate: GateRecord | None = None
    sha256: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PhaseResult:
    """One phase's end, as it happened.

    Attributes:
        role: who worked.
        said: its final message (its last one), as it said it.
        final: what its reader read in it (empty when the phase was cut short).
        calls: the tool records of the phase, in order.
        stopped: why the phase was cut short (the deadline, a budget, a cancellation, the turn cap, the
            tool machinery), None when the role ended it.
        failed: the model's infrastructure failure (`Type: message`) that cut it short, if one did.
        asked: how many times this phase was asked again already (format repairs and nudges).
        asked_block: whether one of those was a question about the role's `<blocked>` (`BLOCK_ASKED`).
        seen: what PSE saw as it ended.
        step: the step of a steps plan it belongs to (None: the cycle's own phase).
        attempt: the step's attempt (1 for the first).
    """

    role: str
    said: str = ""
    final: Final = Final()
    calls: tuple[ToolCallRecord, ...] = ()
    stopped: CycleStop | None = None
    failed: str | None = None
    asked: int = 0
    asked_block: bool = False
    seen: Seen = Seen()
    step: str | None = None
    attempt: int = 0

    @property
    def cut(self) -> CycleStop | None:
        """How the cycle records this phase's being cut short: a model's failure first (it is why the
        rest stopped), else the stop."""
        if self.failed is not None:
            return CycleStop("ERROR", self.failed)
        return self.stopped


@dataclass(frozen=True)
class StepsSettled:
    """Step mode: no step runs and none is ready (every step settled, or the cycle ends).

    Attributes:
        failure: why a step failed the cycle (`STEP_FAILED: …`), if one did.
        blocked: the first step's `<blocked>` that stopped its branch, if any.
        failed: a model's infrastructure failure that stopped the steps.
    """

    failure: str | None = None
    blocked: BlockedRecord | None = None
    failed: str | None = None


@dataclass(frozen=True)
class Halted:
    """No cycle may start: the run was cancelled, a budget is used up, or the deadline passed."""

    stop: CycleStop


# ---- what comes next ---------------------------------------------------------------------------------


class Move(NamedTuple):
    """One move of the state table, with its reason; `counters` are the retry counters it leaves."""

    state: State
    reason: str
    counters: Counters | None = None


@dataclass(frozen=True)
class RunPhase:
    """Run `role`'s phase now, after `moves` (the run's; a step's own when `step` is set)."""

    role: str
    moves: tuple[Move, ...] = ()
    step: str | None = None
    review: bool = False
    """Step mode's final review: the judge reviews the task's own criteria over the whole workspace."""
    plan: PlanRecord | None = None
    """The plan the phase before fixed: the cycle's, in force from now."""


@dataclass(frozen=True)
class StartCycle:
    """Open a cycle of `kind` and run its first phase."""

    kind: CycleKind
    phase: RunPhase


@dataclass(frozen=True)
class RunSteps:
    """Step mode: run the plan's steps (then decide on `StepsSettled`), after `moves`; `plan` is the
    plan the Planner's phase fixed."""

    moves: tuple[Move, ...] = ()
    plan: PlanRecord | None = None


@dataclass(frozen=True)
class AskAgain:
    """Run the same phase once more, asked with `request`; `error` is what the repair record says."""

    role: str
    request: str
    error: str
    step: str | None = None


@dataclass(frozen=True)
class EndStep:
    """A step's attempt came to `result` (with `reason`); `move` is the step's, in the state table."""

    step: str
    result: str
    reason: str
    move: Move
    verdict: VerdictRecord | None = None
    gate: GateRecord | None = None
    blocked: BlockedRecord | None = None


@dataclass(frozen=True)
class EndCycle:
    """The cycle came to `result` (with `reason`).

    Attributes:
        moves: made at once, before the cycle's end is recorded (a self-review's REVIEWING).
        then: the state table's move once the cycle is recorded: a retry (with the counters it leaves),
            an escalation, a wait for a person, or an end.
        verdict / blocked / clarification / review_error / stopped: what the cycle's record holds.
    """

    result: str
    reason: str
    then: Move
    moves: tuple[Move, ...] = ()
    verdict: VerdictRecord | None = None
    blocked: BlockedRecord | None = None
    clarification: ClarificationRecord | None = None
    review_error: str | None = None
    stopped: str | None = None


@dataclass(frozen=True)
class Stop:
    """The run stops here, after `moves`: it has an outcome, or it waits for a person."""

    moves: tuple[Move, ...] = ()


Next = StartCycle | RunPhase | RunSteps | AskAgain | EndStep | EndCycle | Stop


def repair_request(role: str, problem: str) -> str:
    """What the engine says to a role whose final message could not be read (what it owes: its `RoleSpec`)."""
    return (
        f"PSE could not read your last message: {problem}. Your turn must end with {role_spec(role).owes}. "
        "Send that message now; nothing else is needed."
    )


def read_final(role: str, text: str, *, questions: bool = False) -> Final:
    """Read a role's final message once, with the reader its `RoleSpec.final` names.

    A role may end with `<blocked>` instead (a judge for SPEC_CONFLICT only: a message holding a verdict
    is read as the verdict); with `questions`, a Planner's `<clarification>` is what it owes too.
    """
    final = role_spec(role).final
    if final != "verdict" or "<verdict" not in text:
        try:
            blocked = find_blocked(text, role)
        except ProtocolError as exc:  # a <blocked> the model never closed: its mistake, not ours
            if final == "report":
                return Final(error=f"REPORT_ERROR: {exc}")
            return Final(problem=str(exc))  # repaired like a missing plan or verdict
        if blocked is not None:
            return Final(blocked=blocked)
    if final == "plan" and questions and "<clarification" in text:
        try:
            clarification = find_clarification(text)
        except ProtocolError as exc:
            return Final(problem=str(exc))
        if clarification is not None:
            return Final(clarification=clarification)
    try:
        if final == "plan":
            return Final(plan=parse_plan(text))
        if final == "verdict":
            return Final(verdict=parse_verdict(text))
    except ProtocolError as exc:
        return Final(problem=str(exc))
    return Final()
