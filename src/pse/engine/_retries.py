"""The retry rules: after a judged review or a failed step, pass, revise, re-plan or escalate, and why."""

from __future__ import annotations

from pse.engine._escalation import criterion_over_cap
from pse.engine._limits import LoopLimits
from pse.engine._state import State
from pse.roles import CrewSpec
from pse.trace import CycleRecord, Trace

__all__ = ["after_review", "after_step_failure"]


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
    if status == "PARTIAL" and counters.partial_retries < s.max_partial_retries:
        counters.partial_retries += 1
        return (
            State.REVISING,
            f"PARTIAL ({reason}); revision {counters.partial_retries} of {s.max_partial_retries}",
        )
    if counters.fail_retries < s.max_fail_retries:
        why = "PARTIAL over its retry cap" if status == "PARTIAL" else "FAIL"
        counters.fail_retries += 1
        counters.partial_retries = 0
        return State.REPLANNING, f"{why} ({reason}); re-plan {counters.fail_retries} of {s.max_fail_retries}"
    return State.ESCALATED, f"{status} ({reason}) with every retry used"


def after_step_failure(reason: str, trace: Trace, limits: LoopLimits) -> tuple[State, str]:
    """A step failed or went over its retries: re-plan (passed steps stay), or escalate."""
    counters = trace.counters
    if counters.fail_retries < limits.max_fail_retries:
        counters.fail_retries += 1
        counters.partial_retries = 0
        return State.REPLANNING, f"{reason}; re-plan {counters.fail_retries} of {limits.max_fail_retries}"
    return State.ESCALATED, f"{reason} with every re-plan used"


def _since_answer(trace: Trace) -> list[CycleRecord]:
    """The cycles since a person last answered (all of them when nobody did): what the caps count."""
    after = trace.answers[-1].after_cycle if trace.answers else 0
    return [c for c in trace.cycles if c.index > after]


def _answered_cycles(trace: Trace) -> int | None:
    """How many cycles the last answer allowed, when a person took the run on."""
    answer = trace.answers[-1] if trace.answers else None
    return answer.retries if answer is not None and answer.decision == "resume" else None
