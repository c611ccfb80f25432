"""What each role's final message owes, how it is read (once), and what is said when it cannot be read.

`read_final` parses a role's final message into the cycle's outcome (a plan, a verdict, a `<blocked>`, a
Planner's questions) or returns the parser's own words; `repair_request` turns those words into the
message that asks the role again; `conclude` records what a problem left unrepaired means.
"""

from __future__ import annotations

from pse.engine._crew import CycleOutcome, CycleStop, RunControl, StepWiring
from pse.engine._graph import graph_problem
from pse.engine._state import State
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, find_clarification, parse_plan, parse_verdict
from pse.roles import SINGLE_AGENT, Role

__all__ = ["conclude", "read_final", "repair_request"]

_OWED: dict[str, str] = {
    Role.SPECIALIST: "every output of the plan written with write_file, then exactly one <report> (or "
    '<blocked reason_code="…">why</blocked> if the plan cannot be carried out)',
    Role.PLANNER: 'exactly one <plan> with a <goal>, numbered <criterion id="AC1">…</criterion> entries and '
    '<output path="…"/> entries (or <blocked reason_code="…">why</blocked> if you cannot plan)',
    Role.EVALUATOR: 'exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> holding <reason_code>, one '
    '<criterion id="…" met="true|false">finding</criterion> per plan criterion, and <summary>',
    SINGLE_AGENT: 'exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> on your own work, holding '
    '<reason_code>, one <criterion id="…" met="true|false">finding</criterion> per requirement you '
    "checked, and <summary>",
}


def repair_request(role: str, problem: str) -> str:
    """What the engine says to a role whose final message could not be read."""
    return (
        f"PSE could not read your last message: {problem}. Your turn must end with {_OWED[role]}. "
        "Send that message now; nothing else is needed."
    )


def read_final(
    role: str,
    text: str,
    outcome: CycleOutcome,
    run: RunControl,
    *,
    questions: bool = False,
    steps: StepWiring | None = None,
) -> str | None:
    """Parse a role's final message once: None when it holds what the role owes, else the parse error.

    With `questions`, a Planner's `<clarification>` is what it owes too (the run then waits for a person).
    An Evaluator or the single agent may end with `<blocked>` instead of a verdict (SPEC_CONFLICT: a given
    test contradicts the specification); a message that holds a verdict is read as the verdict.
    """
    if role in (Role.PLANNER, Role.SPECIALIST) or (
        role in (Role.EVALUATOR, SINGLE_AGENT) and "<verdict" not in text
    ):
        try:
            outcome.blocked = find_blocked(text, role)
        except ProtocolError as exc:  # a <blocked> the model never closed: its mistake, not ours
            if role != Role.SPECIALIST:
                return str(exc)  # repaired like a missing plan or verdict, else PLAN_ERROR / REVIEW_ERROR
            outcome.review_error = f"REPORT_ERROR: {exc}"
            outcome.stop = CycleStop("ERROR", outcome.review_error)
            return None
        if outcome.blocked is not None:
            return None
    if role == Role.PLANNER and questions and "<clarification" in text:
        try:
            outcome.clarification = find_clarification(text)
        except ProtocolError as exc:
            return str(exc)
        if outcome.clarification is not None:
            return None
    if role == Role.PLANNER:
        try:
            plan = parse_plan(text)
        except ProtocolError as exc:
            return str(exc)
        if steps is not None and (problem := graph_problem(plan, steps.max_steps, steps.kept)) is not None:
            return f"plan: {problem}"
        outcome.plan = plan
        how = f"{len(plan.steps)} steps and " if steps is not None else ""
        run.machine.move(State.PLANNED, f"plan fixed with {how}{len(plan.criteria)} criteria")
    elif role in (Role.EVALUATOR, SINGLE_AGENT):
        try:
            outcome.verdict = parse_verdict(text)
        except ProtocolError as exc:
            return str(exc)
        if role == SINGLE_AGENT:
            run.machine.move(State.REVIEWING, "the Agent reviewed its own work")
    return None


def conclude(role: str, final: str, problem: str | None, outcome: CycleOutcome) -> bool:
    """Record what an unrepaired problem means; False when the cycle ends here (blocked, or no plan)."""
    if outcome.blocked is not None or outcome.clarification is not None:
        return False
    if problem is None:
        return True
    if role == Role.PLANNER:
        outcome.review_error = f"PLAN_ERROR: {problem}"
        outcome.stop = CycleStop("ERROR", outcome.review_error)
        return False
    outcome.review_error = f"REVIEW_ERROR: {problem}"
    return True
