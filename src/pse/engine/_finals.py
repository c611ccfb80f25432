"""What each role's final message owes, how it is read (once), and what is said when it cannot be read.

`read_final` parses a role's final message into the cycle's outcome (a plan, a verdict, a `<blocked>`, a
Planner's questions) or returns the parser's own words; `repair_request` turns those words into the
message that asks the role again; `conclude` records what a problem left unrepaired means.
"""

from __future__ import annotations

from pse.engine._crew import CycleOutcome, RunControl, StepWiring
from pse.engine._graph import graph_problem
from pse.engine._state import State
from pse.engine._stop import CycleStop
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, find_clarification, parse_plan, parse_verdict
from pse.roles import role_spec

__all__ = ["conclude", "read_final", "repair_request"]


def repair_request(role: str, problem: str) -> str:
    """What the engine says to a role whose final message could not be read (what it owes: its `RoleSpec`)."""
    return (
        f"PSE could not read your last message: {problem}. Your turn must end with {role_spec(role).owes}. "
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
    A role that owes a verdict may end with `<blocked>` instead (SPEC_CONFLICT: a given test contradicts
    the specification); a message that holds a verdict is read as the verdict.
    """
    spec = role_spec(role)
    if spec.final != "verdict" or "<verdict" not in text:
        try:
            outcome.blocked = find_blocked(text, role)
        except ProtocolError as exc:  # a <blocked> the model never closed: its mistake, not ours
            if spec.final != "report":
                return str(exc)  # repaired like a missing plan or verdict, else PLAN_ERROR / REVIEW_ERROR
            outcome.review_error = f"REPORT_ERROR: {exc}"
            outcome.stop = CycleStop("ERROR", outcome.review_error)
            return None
        if outcome.blocked is not None:
            return None
    else:
        outcome.blocked = None  # a verdict after a block that was asked about: the verdict is the answer
    if spec.final == "plan" and questions and "<clarification" in text:
        try:
            outcome.clarification = find_clarification(text)
        except ProtocolError as exc:
            return str(exc)
        if outcome.clarification is not None:
            return None
    if spec.final == "plan":
        try:
            plan = parse_plan(text)
        except ProtocolError as exc:
            return str(exc)
        if steps is not None and (problem := graph_problem(plan, steps.max_steps, steps.kept)) is not None:
            return f"plan: {problem}"
        outcome.plan = plan
        how = f"{len(plan.steps)} steps and " if steps is not None else ""
        run.machine.move(State.PLANNED, f"plan fixed with {how}{len(plan.criteria)} criteria")
    elif spec.final == "verdict":
        try:
            outcome.verdict = parse_verdict(text)
        except ProtocolError as exc:
            return str(exc)
        if spec.enters_after is not None:  # a self-review: the work is done once its verdict is read
            state, why = spec.enters_after
            run.machine.move(State(state), why)
    return None


def conclude(role: str, final: str, problem: str | None, outcome: CycleOutcome) -> bool:
    """Record what an unrepaired problem means; False when the cycle ends here (blocked, or no plan)."""
    if outcome.blocked is not None or outcome.clarification is not None:
        return False
    if problem is None:
        return True
    if role_spec(role).final == "plan":
        outcome.review_error = f"PLAN_ERROR: {problem}"
        outcome.stop = CycleStop("ERROR", outcome.review_error)
        return False
    outcome.review_error = f"REVIEW_ERROR: {problem}"
    return True
