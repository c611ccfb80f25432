"""The retry and escalation rules: after a judged review, a step's attempt or a failed step, the state
table's move and why. Pure functions of the run's record; `decide` (`_decide`) is their one caller.

Whether a retry is left is decided once, by `retry_left`, for a cycle's revisions and re-plans and for a
step's retries alike: it counts the retries used against their cap, and never looks at a clock. A move
that grants a retry returns the counters it leaves (the caller records them): nothing here mutates.
"""

from __future__ import annotations

from collections.abc import Sequence

from pse.engine._escalation import criterion_over_cap
from pse.engine._limits import LoopLimits
from pse.engine._state import State
from pse.engine._values import Move
from pse.roles import CrewSpec
from pse.trace import Counters, CycleRecord, Trace

__all__ = ["STEP_RESULTS", "after_review", "after_step", "after_step_failure", "retry_left"]

STEP_RESULTS = ("PASS", "PARTIAL", "FAIL", "BLOCKED", "ERROR")
"""What a step's attempt can come to (`judge`'s results)."""


def retry_left(used: int, cap: int) -> bool:
    """A retry is left when fewer than `cap` were used: the one rule for revisions, re-plans and steps."""
    return used < cap


def after_review(
    result: str,
    reason: str,
    *,
    gates_passed: bool,
    trace: Trace,
    cycles: Sequence[CycleRecord],
    limits: LoopLimits,
    crew: CrewSpec,
) -> Move:
    """The state table's move after a judged review (its `result` and `reason`).

    Args:
        trace: the run so far (its counters, a person's answers).
        cycles: the run's cycles, the one just judged last, with its verdict.
    """
    counters, s = trace.counters, limits
    if result == "PASS":
        if gates_passed:
            gates = "every hard gate passed"
        elif not crew.gated:
            gates = f"no hard gates (the {crew.name} team has no Evaluator to hold to them)"
        else:  # a PASS over failed gates stands only where they are not enforced (`judge`)
            gates = "hard gates off (PSE_HARD_GATES=false)"
        return Move(State.PASSED, f"PASS ({reason}); {gates}")
    if crew.self_review:  # nobody is left to revise or re-plan: the review is final
        own = "own " if not crew.gated else ""  # an ungated crew's judge reviews its own work
        return Move(State.ESCALATED, f"{result} ({reason}): the {crew.reviewer}'s {own}review did not pass")
    if result == "BLOCKED":
        return Move(State.BLOCKED, f"{crew.reviewer} returned BLOCKED ({reason})")
    since = _since_answer(trace, cycles)
    if (allowed := _answered_cycles(trace)) is not None and len(since) >= allowed:
        return Move(
            State.ESCALATED, f"{result} ({reason}) in the {allowed} cycle(s) a person allowed (pse answer)"
        )
    if (capped := criterion_over_cap(since, s.max_criterion_failures)) is not None:
        cid, times = capped
        return Move(
            State.ESCALATED,
            f"{result} ({reason}); criterion {cid} failed {times} times "
            f"(PSE_MAX_CRITERION_FAILURES={s.max_criterion_failures}), whatever retries are left",
        )
    revises = crew.revise_from is not None
    if result == "PARTIAL" and revises and retry_left(counters.partial_retries, s.max_partial_retries):
        used = counters.partial_retries + 1
        return Move(
            State.REVISING,
            f"PARTIAL ({reason}); revision {used} of {s.max_partial_retries}",
            counters.model_copy(update={"partial_retries": used}),
        )
    if crew.replan_from is not None and retry_left(counters.fail_retries, s.max_fail_retries):
        why = "FAIL" if result != "PARTIAL" else "PARTIAL over its retry cap" if revises else "PARTIAL"
        return _replan(f"{why} ({reason})", counters, s.max_fail_retries)
    return Move(State.ESCALATED, f"{result} ({reason}) with every retry used")


def after_step_failure(reason: str, trace: Trace, limits: LoopLimits) -> Move:
    """A step failed or went over its retries: re-plan (passed steps stay), or escalate."""
    if retry_left(trace.counters.fail_retries, limits.max_fail_retries):
        return _replan(reason, trace.counters, limits.max_fail_retries)
    return Move(State.ESCALATED, f"{reason} with every re-plan used")


def _replan(why: str, counters: Counters, cap: int) -> Move:
    used = counters.fail_retries + 1
    return Move(
        State.REPLANNING,
        f"{why}; re-plan {used} of {cap}",
        counters.model_copy(update={"fail_retries": used, "partial_retries": 0}),
    )


def after_step(
    step: str, attempt: int, result: str, reason: str, max_retries: int, *, blocked: bool, ending: bool
) -> Move:
    """The state table's move for one step after its `attempt` came to `result` (with `reason`).

    PASSED; BLOCKED when a role blocked it (its branch pauses); REVISING when a PARTIAL has a retry
    left (`attempt - 1` used of `max_retries`) and no other step has failed the cycle (`ending`); else
    REPLANNING: the cycle ends, and the reason is the cycle's (`STEP_FAILED: …`), on which the cycle
    re-plans or escalates (`after_step_failure`).

    Raises:
        ValueError: `result` is not one of `STEP_RESULTS` (a bug of ours).
    """
    if result not in STEP_RESULTS:
        raise ValueError(f"step {step}'s attempt {attempt} came to {result!r}, not one of {STEP_RESULTS}")
    if result == "PASS":
        return Move(State.PASSED, f"step {step} passed ({reason})")
    if result == "BLOCKED" and blocked:
        return Move(State.BLOCKED, f"step {step} blocked ({reason})")
    if result == "PARTIAL" and not ending and retry_left(attempt - 1, max_retries):
        return Move(State.REVISING, f"PARTIAL ({reason}); step {step} retry {attempt} of {max_retries}")
    if result != "PARTIAL":
        why = result
    elif ending:
        why = "PARTIAL while another step's failure ends the cycle"
    else:
        why = f"over its {max_retries} retries (PSE_MAX_STEP_RETRIES)"
    return Move(State.REPLANNING, f"STEP_FAILED: step {step} {why} ({reason})")


def _since_answer(trace: Trace, cycles: Sequence[CycleRecord]) -> list[CycleRecord]:
    """The cycles since a person last answered (all of them when nobody did): what the caps count."""
    after = trace.answers[-1].after_cycle if trace.answers else 0
    return [c for c in cycles if c.index > after]


def _answered_cycles(trace: Trace) -> int | None:
    """How many cycles the last answer allowed, when a person took the run on."""
    answer = trace.answers[-1] if trace.answers else None
    return answer.retries if answer is not None and answer.decision == "resume" else None
