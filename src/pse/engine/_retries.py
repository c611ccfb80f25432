"""The retry rules: after a judged review, a step's attempt or a failed step, the state table's move, and why.

Whether a retry is left is decided once, by `retry_left`, for a cycle's revisions and re-plans and for a
step's retries alike: it counts the retries used against their cap, and never looks at a clock.
"""

from __future__ import annotations

from pse.engine._escalation import criterion_over_cap
from pse.engine._limits import LoopLimits
from pse.engine._state import State
from pse.events import StepAttemptRecord
from pse.roles import CrewSpec
from pse.trace import CycleRecord, Trace

__all__ = ["STEP_RESULTS", "after_review", "after_step_attempt", "after_step_failure", "retry_left"]

STEP_RESULTS = ("PASS", "PARTIAL", "FAIL", "BLOCKED", "ERROR")
"""What a step's attempt can come to (`judge`'s results)."""


def retry_left(used: int, cap: int) -> bool:
    """A retry is left when fewer than `cap` were used: the one rule for revisions, re-plans and steps."""
    return used < cap


def after_review(cycle: CycleRecord, trace: Trace, limits: LoopLimits, crew: CrewSpec) -> tuple[State, str]:
    """The state table's move after a judged review (`cycle.result`), with its reason; a retry it grants
    is counted in `trace.counters`."""
    status, reason = cycle.result, cycle.result_reason
    counters, s = trace.counters, limits
    if status == "PASS":
        if cycle.gate.passed:
            gates = "every hard gate passed"
        elif not crew.hard_gates_apply:
            gates = f"no hard gates (the {crew.name} team has no Evaluator to hold to them)"
        else:
            gates = "hard gates off (PSE_HARD_GATES=false)"
        return State.PASSED, f"PASS ({reason}); {gates}"
    if crew.self_review:  # nobody is left to revise or re-plan: the reviewer's own verdict is final
        return State.ESCALATED, f"{status} ({reason}): the {crew.reviewer}'s own review did not pass"
    if status == "BLOCKED":
        return State.BLOCKED, f"Evaluator returned BLOCKED ({reason})"
    if (allowed := _answered_cycles(trace)) is not None and len(_since_answer(trace)) >= allowed:
        return State.ESCALATED, f"{status} ({reason}) in the {allowed} cycle(s) a person allowed (pse answer)"
    if (capped := criterion_over_cap(_since_answer(trace), s.max_criterion_failures)) is not None:
        cid, times = capped
        return (
            State.ESCALATED,
            f"{status} ({reason}); criterion {cid} failed {times} times "
            f"(PSE_MAX_CRITERION_FAILURES={s.max_criterion_failures}), whatever retries are left",
        )
    if status == "PARTIAL" and retry_left(counters.partial_retries, s.max_partial_retries):
        counters.partial_retries += 1
        return (
            State.REVISING,
            f"PARTIAL ({reason}); revision {counters.partial_retries} of {s.max_partial_retries}",
        )
    if retry_left(counters.fail_retries, s.max_fail_retries):
        why = "PARTIAL over its retry cap" if status == "PARTIAL" else "FAIL"
        counters.fail_retries += 1
        counters.partial_retries = 0
        return State.REPLANNING, f"{why} ({reason}); re-plan {counters.fail_retries} of {s.max_fail_retries}"
    return State.ESCALATED, f"{status} ({reason}) with every retry used"


def after_step_failure(reason: str, trace: Trace, limits: LoopLimits) -> tuple[State, str]:
    """A step failed or went over its retries: re-plan (passed steps stay), or escalate."""
    counters = trace.counters
    if retry_left(counters.fail_retries, limits.max_fail_retries):
        counters.fail_retries += 1
        counters.partial_retries = 0
        return State.REPLANNING, f"{reason}; re-plan {counters.fail_retries} of {limits.max_fail_retries}"
    return State.ESCALATED, f"{reason} with every re-plan used"


def after_step_attempt(
    attempt: StepAttemptRecord, max_retries: int, *, blocked: bool, ending: bool
) -> tuple[State, str]:
    """The state table's move for one step after its attempt (`attempt.result`), with its reason.

    PASSED; BLOCKED when a role blocked it (its branch pauses); REVISING when a PARTIAL has a retry
    left (`attempt.attempt - 1` used of `max_retries`) and no other step has failed the cycle
    (`ending`); else REPLANNING: the cycle ends, and the reason is the cycle's (`STEP_FAILED: …`), on
    which the engine re-plans or escalates (`after_step_failure`).

    Raises:
        ValueError: `attempt.result` is not one of `STEP_RESULTS` (a bug of ours).
    """
    step, result, reason = attempt.step, attempt.result, attempt.result_reason
    if result not in STEP_RESULTS:
        raise ValueError(
            f"step {step}'s attempt {attempt.attempt} came to {result!r}, not one of {STEP_RESULTS}"
        )
    if result == "PASS":
        return State.PASSED, f"step {step} passed ({reason})"
    if result == "BLOCKED" and blocked:
        return State.BLOCKED, f"step {step} blocked ({reason})"
    if result == "PARTIAL" and not ending and retry_left(attempt.attempt - 1, max_retries):
        return State.REVISING, f"PARTIAL ({reason}); step {step} retry {attempt.attempt} of {max_retries}"
    if result != "PARTIAL":
        why = result
    elif ending:
        why = "PARTIAL while another step's failure ends the cycle"
    else:
        why = f"over its {max_retries} retries (PSE_MAX_STEP_RETRIES)"
    return State.REPLANNING, f"STEP_FAILED: step {step} {why} ({reason})"


def _since_answer(trace: Trace) -> list[CycleRecord]:
    """The cycles since a person last answered (all of them when nobody did): what the caps count."""
    after = trace.answers[-1].after_cycle if trace.answers else 0
    return [c for c in trace.cycles if c.index > after]


def _answered_cycles(trace: Trace) -> int | None:
    """How many cycles the last answer allowed, when a person took the run on."""
    answer = trace.answers[-1] if trace.answers else None
    return answer.retries if answer is not None and answer.decision == "resume" else None
