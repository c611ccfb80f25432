"""Judging a review: what a verdict and its hard gates come to, decided here and only here.

A PASS whose enforced gates failed is a PARTIAL (reason `HARD_GATE: …`); a review without a verdict
is an ERROR; any other verdict stands as the Evaluator gave it (`judge`). A cycle that did not end in a
review came to what ended it: its stop, the Planner's questions, a failed step, a block (`decide`).
The engine decides each cycle with `decide`, step mode each step's review with `judge`, and the
engine's `VerdictEvent` carries the decision (`result`, `result_reason`), so the CLI's live view and
the dashboard show it without deciding it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pse.engine._crew import CycleOutcome
from pse.events import GateRecord, VerdictRecord

__all__ = ["Judgement", "decide", "judge"]

_NO_VERDICT = "REVIEW_ERROR: the cycle ended without a verdict from the Evaluator"


@dataclass(frozen=True)
class Judgement:
    """What a review came to.

    Attributes:
        result: PASS, PARTIAL, FAIL, BLOCKED or ERROR.
        reason: the verdict's reason code, `HARD_GATE: <failures>` when the gates overruled a PASS, or
            why there was no verdict.
    """

    result: str
    reason: str


def judge(verdict: VerdictRecord | None, gate: GateRecord, *, no_verdict: str) -> Judgement:
    """The result of a review: the verdict, unless enforced hard gates failed under a PASS.

    Args:
        verdict: the Evaluator's verdict (None: the review could not be read).
        gate: the hard gates evaluated on that review; `gate.enforced` False records without applying.
        no_verdict: the reason given when there is no verdict.
    """
    if verdict is None:
        return Judgement("ERROR", no_verdict)
    if verdict.status == "PASS" and not gate.passed and gate.enforced:
        return Judgement("PARTIAL", "HARD_GATE: " + "; ".join(gate.failures))
    return Judgement(verdict.status, verdict.reason_code)


def decide(outcome: CycleOutcome, gate: GateRecord) -> Judgement:
    """What a cycle came to (the trace's `result` and `result_reason`), first reason first: its stop,
    the Planner's questions, a failed step, a block, else its review as `judge` decides it."""
    if outcome.stop is not None:
        return Judgement(outcome.stop.outcome, outcome.stop.reason)
    if outcome.clarification is not None:
        return Judgement("QUESTIONS", f"the Planner asked {len(outcome.clarification.questions)} question(s)")
    if outcome.step_failure is not None:
        return Judgement("FAIL", outcome.step_failure)
    if outcome.blocked is not None:
        return Judgement("BLOCKED", f"{outcome.blocked.role} blocked: {outcome.blocked.reason_code}")
    return judge(outcome.verdict, gate, no_verdict=outcome.review_error or _NO_VERDICT)
