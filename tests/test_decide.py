"""The decision's table of cases: `decide(run state, event) -> next`, for task mode and step mode, gates
enforced and ablated. No AutoGen, no model, no tool runs: each case is a trace, a phase's result, and
what must come next. The last tests hold the table to the state machine: every move the engine makes
between and inside cycles is one a case here produces, and nothing else is.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.engine import (
    AskAgain,
    CycleStop,
    EndCycle,
    EndStep,
    Final,
    Halted,
    LoopLimits,
    Move,
    Next,
    PhaseResult,
    Rules,
    RunPhase,
    RunState,
    RunSteps,
    Seen,
    StartCycle,
    State,
    StepsSettled,
    Stop,
    decide,
)
from pse.engine._gates import GatePolicy
from pse.engine._state import TRANSITIONS
from pse.engine._values import repair_request
from pse.events import (
    BlockedRecord,
    ClarificationRecord,
    CriterionResult,
    GateRecord,
    HumanAnswer,
    PlanItem,
    PlanRecord,
    QuestionRecord,
    StepAttemptRecord,
    ToolCallRecord,
    VerdictRecord,
)
from pse.roles import PSE_CREW, SINGLE_CREW, Role
from pse.trace import Counters, CycleRecord, Trace

P, S, E, A = Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR, "Agent"
LIMITS = LoopLimits(
    run_timeout_s=60.0, turns_per_cycle=10, format_retries=1, max_partial_retries=2, max_fail_retries=1,
    max_criterion_failures=3, step_buffer_tokens=500, token_budget=10**6, cost_budget=None, max_steps=5,
    max_step_retries=1, max_parallel_steps=2,
)  # fmt: skip
CHECKS = GatePolicy(required_checks=("pytest",))
RULES = Rules(crew=PSE_CREW, limits=LIMITS, gates=CHECKS, told={S: "Write quicksort.py."})
ABLATED = dataclasses.replace(RULES, gates=dataclasses.replace(CHECKS, enforced=False))
STEPS = dataclasses.replace(RULES, steps=True)
PLAN = PlanRecord(
    goal="sort",
    criteria=[PlanItem(id="AC1", text="sorts"), PlanItem(id="AC2", text="tested")],
    outputs=["quicksort.py"],
)
STEP_PLAN = PlanRecord(
    goal="sort",
    steps=[PlanItem(id="S1", text="write it"), PlanItem(id="S2", text="test it", depends_on=["S1"])],
    criteria=[PlanItem(id="AC1", text="sorts", step="S1"), PlanItem(id="AC2", text="tested", step="S2")],
    outputs=["quicksort.py"],
    output_steps={"quicksort.py": "S1"},
)
PASSED = GateRecord(passed=True)
FAILED = GateRecord(passed=False, failures=["check:pytest: the Evaluator did not run run_pytest"])
PACKET = "Deliver quicksort.py."


def verdict(status: str, reason: str = "ALL_MET", *unmet: str) -> VerdictRecord:
    criteria = [CriterionResult(id=c, met=c not in unmet, finding="f") for c in ("AC1", "AC2")]
    return VerdictRecord(status=status, reason_code=reason, criteria=criteria)  # type: ignore[arg-type]


def trace(state: State = State.START, *cycles: CycleRecord, **fields: object) -> Trace:
    return Trace(run_id="r", task="t", started_at="2026-01-01T00:00:00Z", state=state.value,
                 cycles=list(cycles), **fields)  # type: ignore[arg-type]  # fmt: skip


def cycle(index: int = 1, kind: str = "initial", **fields: object) -> CycleRecord:
    return CycleRecord(index=index, kind=kind, first_speaker=P, started_at="2026-01-01T00:00:00Z",
                       **fields)  # type: ignore[arg-type]  # fmt: skip


def run(state: State, *, rules: Rules = RULES, kind: str = "initial", **fields: object) -> RunState:
    """The run under way in a cycle of `kind`: its one cycle holds `fields` (plan, tool_calls, …)."""
    return RunState(trace(state, cycle(kind=kind, **fields)), rules, kind, PACKET)  # type: ignore[arg-type]


def said(role: str, **final: object) -> PhaseResult:
    return PhaseResult(role, "…", Final(**final))  # type: ignore[arg-type]


def pytest_run(passed: int, failed: int = 0) -> ToolCallRecord:
    facts = {"report": "checker", "target": ".", "passed": passed, "failed": failed, "errors": 0, "tests": []}
    return ToolCallRecord(requester=E, tool="run_pytest", arguments={}, decision="allowed",
                          rule="roles.Evaluator.run_pytest", status="ok", facts=facts)  # fmt: skip


def judged_run(*own: str, specialist: str = "errors") -> ToolCallRecord:
    """A run of the Evaluator's own tests with the outcomes `own`, beside the Specialist's test file with
    the outcome `specialist` (heldout-20 account: its import failed collection)."""
    tests = [
        {"test": f"@evaluation/test_criteria.py::test_{i}", "outcome": o, "author": E}
        for i, o in enumerate(own)
    ]
    tests.append({"test": "test_account.py", "outcome": specialist, "author": S})
    run = pytest_run(sum(o == "passed" for o in own), sum(o == "failed" for o in own))
    return run.model_copy(update={"status": "error", "facts": {**run.facts, "tests": tests}})


FAULT = "@evaluation/test_roman.py line 36 asks pytest for run_pytest, which pytest does not have"
FAULTED = pytest_run(2).model_copy(
    update={
        "status": "error",
        "facts": {
            **pytest_run(2).facts,
            "errors": 1,
            "own_faults": [{"file": "@evaluation/test_roman.py", "fault": FAULT}],
        },
    }
)
"""Held-out roman: the Specialist's tests passed; the Evaluator's own file failed at collection, on itself."""


def moves(nxt: Next) -> list[tuple[str, str]]:
    """The moves of `nxt` as (target state, reason)."""
    found = list(getattr(nxt, "moves", ()))
    if isinstance(nxt, EndCycle | EndStep):
        found.append(nxt.then if isinstance(nxt, EndCycle) else nxt.move)
    return [(m.state.value, m.reason) for m in found]


# ---- between cycles ------------------------------------------------------------------------------------

ANSWERED = HumanAnswer(by="po", decision="answer", text="keep them", after_cycle=1, outcome_before="")
ASKED = cycle(clarification=ClarificationRecord(questions=[QuestionRecord(id="Q1", text="Equal values?")]))


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (trace(), StartCycle("initial", RunPhase(P))),
        (trace(State.REVISING, cycle(), plan=PLAN),
         StartCycle("revise", RunPhase(S, (Move(State.RUNNING, "Specialist started"),)))),
        (trace(State.REPLANNING, cycle(), plan=PLAN), StartCycle("replan", RunPhase(P))),
        (trace(State.AWAITING_ANSWER, ASKED), Stop()),  # it waits for a person, durably
        (trace(State.AWAITING_ANSWER, ASKED, answers=[ANSWERED]), StartCycle("initial", RunPhase(P))),
        (trace(State.AWAITING_ANSWER, ASKED, answers=[ANSWERED], plan=PLAN), StartCycle("replan", RunPhase(P))),
        (trace(State.BLOCKED, cycle()), Stop((Move(State.ESCALATED, "blocked: a person must decide"),))),
        *[(trace(end, cycle()), Stop()) for end in
          (State.PASSED, State.ESCALATED, State.ACCEPTED_BY_HUMAN, State.TIMEOUT, State.ERROR)],
    ],
)  # fmt: skip
def test_at_a_cycle_boundary_the_state_calls_for_a_cycle_or_a_stop(before: Trace, expected: Next) -> None:
    assert decide(RunState(before, RULES), None) == expected


def test_the_single_crews_first_cycle_enters_its_states_by_data() -> None:
    start = decide(RunState(trace(), dataclasses.replace(RULES, crew=SINGLE_CREW)), None)
    assert start == StartCycle(
        "initial",
        RunPhase(A, (Move(State.PLANNED, "single team: no Planner, the task is the plan"),
                     Move(State.RUNNING, "Agent started"))),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("stop", "target"),
    [
        (CycleStop("TIMEOUT", "token budget used"), State.TIMEOUT),
        (CycleStop("ERROR", "CANCELLED: x"), State.ERROR),
    ],
)
def test_a_stop_before_a_cycle_ends_the_run(stop: CycleStop, target: State) -> None:
    assert decide(RunState(trace(State.REVISING, cycle()), RULES), Halted(stop)) == Stop(
        (Move(target, stop.reason),)
    )


# ---- a cycle's phases: the Planner ------------------------------------------------------------------


def test_a_plan_read_fixes_the_plan_and_the_specialist_starts() -> None:
    assert decide(run(State.START), said(P, plan=PLAN)) == RunPhase(
        S,
        (Move(State.PLANNED, "plan fixed with 2 criteria"), Move(State.RUNNING, "Specialist started")),
        plan=PLAN,
    )


def test_a_plan_owes_the_outputs_the_task_expects_whatever_the_planner_listed() -> None:
    """The 1.5B model's Planner listed no output on two held-out tasks: nothing then asked its Specialist
    for the test file it never wrote. The task's expected outputs join the plan's (a folder is the
    gates' alone), in the task's order and before the Planner's own (its Specialist writes the first
    first), each as the Planner spelled it (a step's outputs are bound by that name)."""
    rules = dataclasses.replace(
        RULES,
        gates=dataclasses.replace(CHECKS, expected_outputs=("quicksort.py", "test_quicksort.py", "docs/")),
    )
    bare = PLAN.model_copy(update={"outputs": []})
    nxt = decide(run(State.START, rules=rules), said(P, plan=bare))
    assert isinstance(nxt, RunPhase) and nxt.plan is not None
    assert nxt.plan.outputs == ["quicksort.py", "test_quicksort.py"]
    own = PLAN.model_copy(update={"outputs": ["notes.md", "./quicksort.py"]})
    nxt = decide(run(State.START, rules=rules), said(P, plan=own))
    assert isinstance(nxt, RunPhase) and nxt.plan is not None
    assert nxt.plan.outputs == ["./quicksort.py", "test_quicksort.py", "notes.md"]
    whole = PLAN.model_copy(update={"outputs": ["quicksort.py", "test_quicksort.py", "notes.md"]})
    nxt = decide(run(State.START, rules=rules), said(P, plan=whole))
    assert isinstance(nxt, RunPhase) and nxt.plan is whole
    bound = STEP_PLAN.model_copy(
        update={"outputs": ["./quicksort.py"], "output_steps": {"./quicksort.py": "S1"}}
    )
    steps = decide(run(State.START, rules=dataclasses.replace(rules, steps=True)), said(P, plan=bound))
    assert isinstance(steps, RunSteps) and steps.plan is not None
    assert steps.plan.outputs == ["./quicksort.py", "test_quicksort.py"]
    assert steps.plan.output_steps == {"./quicksort.py": "S1"}


def test_a_plan_leaves_out_the_outputs_its_planner_misread_from_the_task() -> None:
    """Seen on the 1.5B model's Planner: `slug/slug.py` and `pytest` beside `slug.py`, and a required
    check `pytest:run_pytest` as a file; its Specialist was asked for each and blocked on one. A required
    check, or a file the task lists put in another folder, is no output; the move that fixes the plan
    names what was left out. Any other output the Planner adds stands."""
    rules = dataclasses.replace(
        RULES, gates=dataclasses.replace(CHECKS, expected_outputs=("slug.py", "test_slug.py", "docs/"))
    )
    wide = PLAN.model_copy(
        update={
            "outputs": ["slug/slug.py", "slug.py", "pytest:run_pytest", "pytest", "docs/slug.py", "cli.py"]
        }
    )
    nxt = decide(run(State.START, rules=rules), said(P, plan=wide))
    assert isinstance(nxt, RunPhase) and nxt.plan is not None
    assert nxt.plan.outputs == ["slug.py", "test_slug.py", "docs/slug.py", "cli.py"]
    assert nxt.moves[0] == Move(
        State.PLANNED,
        "plan fixed with 2 criteria (outputs misread from the task, left out: slug/slug.py, "
        "pytest:run_pytest, pytest)",
    )
    bound = STEP_PLAN.model_copy(
        update={"outputs": ["slug.py", "src/slug.py"], "output_steps": {"slug.py": "S1", "src/slug.py": "S2"}}
    )
    steps = decide(run(State.START, rules=dataclasses.replace(rules, steps=True)), said(P, plan=bound))
    assert isinstance(steps, RunSteps) and steps.plan is not None
    assert steps.plan.output_steps == {"slug.py": "S1"}


def test_an_unreadable_plan_is_repaired_once_then_ends_the_run_as_plan_error() -> None:
    result = said(P, problem="no <plan> element")
    assert decide(run(State.START), result) == AskAgain(
        P, repair_request(P, "no <plan> element"), "no <plan> element"
    )
    end = decide(run(State.START), dataclasses.replace(result, asked=1))
    assert end == EndCycle(
        "ERROR", "PLAN_ERROR: no <plan> element", Move(State.ERROR, "PLAN_ERROR: no <plan> element"),
        review_error="PLAN_ERROR: no <plan> element", stopped="PLAN_ERROR: no <plan> element",
    )  # fmt: skip


def test_a_block_ends_the_cycle_blocked_and_questions_wait_for_a_person() -> None:
    blocked = BlockedRecord(role=P, reason_code="MISSING_DATA", detail="no spec")
    assert decide(run(State.START), said(P, blocked=blocked)) == EndCycle(
        "BLOCKED", "Planner blocked: MISSING_DATA", Move(State.BLOCKED, "Planner blocked: MISSING_DATA"),
        blocked=blocked,
    )  # fmt: skip
    asked = ClarificationRecord(questions=[QuestionRecord(id="Q1", text="?")])
    assert decide(run(State.START), said(P, clarification=asked)) == EndCycle(
        "QUESTIONS", "the Planner asked 1 question(s)",
        Move(State.AWAITING_ANSWER, "the Planner asked 1 question(s): a person answers (pse answer --text)"),
        clarification=asked,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("stopped", "failed", "expected"),
    [
        (CycleStop("TIMEOUT", "turn cap: 10 turns"), None, ("TIMEOUT", "turn cap: 10 turns", State.TIMEOUT)),
        (CycleStop("ERROR", "tool infrastructure failed: x"), None,
         ("ERROR", "tool infrastructure failed: x", State.ERROR)),
        # a model's failure is why the rest stopped: it comes first, whatever else stopped the phase
        (CycleStop("TIMEOUT", "run wall-clock limit"), "ModelUnavailable: down",
         ("ERROR", "ModelUnavailable: down", State.ERROR)),
    ],
)  # fmt: skip
def test_a_phase_cut_short_ends_the_cycle_without_a_retry(
    stopped: CycleStop, failed: str | None, expected: tuple[str, str, State]
) -> None:
    result = PhaseResult(S, stopped=stopped, failed=failed)
    end = decide(run(State.RUNNING, plan=PLAN), result)
    result_, reason, target = expected
    assert end == EndCycle(result_, reason, Move(target, reason), stopped=reason)


# ---- the Specialist ------------------------------------------------------------------------------------


def test_a_report_reviews_next() -> None:
    assert decide(run(State.RUNNING, plan=PLAN), said(S)) == RunPhase(
        E, (Move(State.REVIEWING, "Specialist reported; Evaluator started"),)
    )


def test_a_report_before_its_outputs_is_asked_once_then_reviewed() -> None:
    early = dataclasses.replace(
        said(S), seen=Seen(missing=("quicksort.py",), broken=("x.py does not parse",))
    )
    nxt = decide(run(State.RUNNING, plan=PLAN), early)
    assert isinstance(nxt, AskAgain) and nxt.role == S and nxt.request == nxt.error
    assert nxt.request.startswith(
        "x.py does not parse. Write it again with write_file before you report. quicksort.py is not written yet"
    )
    assert "Write quicksort.py." in nxt.request  # what the role was told of it, quoted
    assert isinstance(decide(run(State.RUNNING, plan=PLAN), dataclasses.replace(early, asked=1)), RunPhase)


def test_a_block_on_missing_data_while_outputs_are_unwritten_is_asked_once_then_stands() -> None:
    blocked = BlockedRecord(role=S, reason_code="MISSING_DATA", detail="no quicksort.py")
    early = dataclasses.replace(said(S, blocked=blocked), seen=Seen(missing=("quicksort.py",)))
    nxt = decide(run(State.RUNNING, plan=PLAN), early)
    assert isinstance(nxt, AskAgain) and nxt.request.startswith(
        "You blocked on missing data, but quicksort.py"
    )
    assert decide(run(State.RUNNING, plan=PLAN), dataclasses.replace(early, asked=1, asked_block=True)) == EndCycle(
        "BLOCKED", "Specialist blocked: MISSING_DATA", Move(State.BLOCKED, "Specialist blocked: MISSING_DATA"),
        blocked=blocked,
    )  # fmt: skip


def test_a_block_the_records_refute_is_asked_about_once_even_after_the_repairs_are_used() -> None:
    """Held-out csv-mean (heldout-15): the 1.5B model's Specialist, asked twice for its test file (the
    repairs of its phase used), blocked under CONFLICTING_CRITERIA with "Why does pd need to be
    imported?", and the run ended for a person with a right module never reviewed. A block ends the
    cycle where a repair costs a turn: it is asked about once a phase, outside PSE_FORMAT_RETRIES."""
    vague = BlockedRecord(
        role=S, reason_code="CONFLICTING_CRITERIA", detail="Why does pd need to be imported?"
    )
    used = dataclasses.replace(said(S, blocked=vague), asked=RULES.limits.format_retries)
    nxt = decide(run(State.RUNNING, plan=PLAN), used)
    assert isinstance(nxt, AskAgain) and nxt.request.startswith("You blocked on conflicting criteria")
    asked = dataclasses.replace(used, asked=used.asked + 1, asked_block=True)
    assert decide(run(State.RUNNING, plan=PLAN), asked).blocked == vague  # type: ignore[union-attr]
    # only a block question goes past the count: a report owing an output does not
    owing = dataclasses.replace(said(S), seen=Seen(missing=("quicksort.py",)), asked=used.asked)
    assert isinstance(decide(run(State.RUNNING, plan=PLAN), owing), RunPhase)


def test_a_conflict_between_criteria_that_names_no_two_criteria_is_asked_once() -> None:
    """Held-out merge-intervals: the 1.5B model's Specialist wrote both outputs, then blocked on
    CONFLICTING_CRITERIA as "The pytest tests in test_intervals.py are not written yet". A conflict is
    between two of the plan's criteria: one that names fewer is asked about once; one that names two
    stands, and so does the second block."""
    vague = BlockedRecord(role=S, reason_code="CONFLICTING_CRITERIA", detail="the tests are not written yet")
    nxt = decide(run(State.RUNNING, plan=PLAN), said(S, blocked=vague))
    assert isinstance(nxt, AskAgain) and nxt.request == (
        "You blocked on conflicting criteria, but your block names none of the plan's criteria (AC1, AC2). "
        "End with your report when every output is written. Block again only with the two that contradict "
        "each other, by id, and why."
    )
    again = dataclasses.replace(said(S, blocked=vague), asked=1, asked_block=True)
    assert decide(run(State.RUNNING, plan=PLAN), again).blocked == vague  # type: ignore[union-attr]
    shown = vague.model_copy(update={"detail": "AC1 wants it sorted in place, AC2 a new list"})
    assert decide(run(State.RUNNING, plan=PLAN), said(S, blocked=shown)).blocked == shown  # type: ignore[union-attr]


def test_a_block_on_a_permission_no_call_was_denied_is_asked_once() -> None:
    """Held-out top-words: the 1.5B model's Specialist read test_words.py, then blocked because "read_file
    is not allowed to read words.py". No call of its own was denied: the claim is refuted by the records
    and asked about once. A block after a denial stands, so does the second one, and so does one over a
    tool the role never used (test_engine_scenarios: "I may not run bash")."""
    blocked = BlockedRecord(role=S, reason_code="MISSING_PERMISSION", detail="read_file is not allowed")
    read = ToolCallRecord(requester=S, tool="read_file", arguments={"path": "test_words.py"},
                          decision="allowed", rule="roles.Specialist.read_file", status="ok")  # fmt: skip
    nxt = decide(run(State.RUNNING, plan=PLAN, tool_calls=[read]), said(S, blocked=blocked))
    assert isinstance(nxt, AskAgain) and nxt.request.startswith(
        "You blocked on a missing permission, but no call of yours was denied in this cycle, and read_file "
        "ran for you."
    )
    ended = EndCycle(
        "BLOCKED", "Specialist blocked: MISSING_PERMISSION",
        Move(State.BLOCKED, "Specialist blocked: MISSING_PERMISSION"), blocked=blocked,
    )  # fmt: skip
    again = dataclasses.replace(said(S, blocked=blocked), asked=1, asked_block=True)
    assert decide(run(State.RUNNING, plan=PLAN, tool_calls=[read]), again) == ended
    denied = read.model_copy(update={"decision": "denied", "status": "denied"})
    assert decide(run(State.RUNNING, plan=PLAN, tool_calls=[read, denied]), said(S, blocked=blocked)) == ended
    other = blocked.model_copy(update={"detail": "I may not run bash to profile"})
    assert decide(run(State.RUNNING, plan=PLAN, tool_calls=[read]), said(S, blocked=other)).blocked == other
    # heldout-9 slugify: a write ran, then "slug.py must be writable": no tool named, none denied
    vague = blocked.model_copy(update={"detail": "slug.py must be writable (write-only access)"})
    nxt = decide(run(State.RUNNING, plan=PLAN, tool_calls=[read]), said(S, blocked=vague))
    assert isinstance(nxt, AskAgain) and nxt.request.startswith(
        "You blocked on a missing permission, but no call of yours was denied in this cycle. "
    )
    assert isinstance(decide(run(State.RUNNING, plan=PLAN), said(S, blocked=vague)), EndCycle)  # no call yet


def test_an_unclosed_block_in_a_report_ends_the_cycle() -> None:
    error = "REPORT_ERROR: <blocked> is never closed"
    assert decide(run(State.RUNNING, plan=PLAN), said(S, error=error)) == EndCycle(
        "ERROR", error, Move(State.ERROR, error), review_error=error, stopped=error
    )


# ---- the Evaluator: its verdict, the gates, the retry rules ---------------------------------------------


def review(v: VerdictRecord | None, gate: GateRecord, **final: object) -> PhaseResult:
    return PhaseResult(E, "…", Final(verdict=v, **final), seen=Seen(gate=gate))  # type: ignore[arg-type]


def judged(
    rules: Rules, v: VerdictRecord, gate: GateRecord, before: Trace | None = None, **fields: object
) -> Next:
    state = before or trace(State.REVIEWING, cycle(plan=PLAN, tool_calls=[pytest_run(1, 1)], **fields))
    return decide(RunState(state, rules, "initial", PACKET), review(v, gate))


def _counters(partial: int = 0, fail: int = 0) -> Counters:
    return Counters(partial_retries=partial, fail_retries=fail)


@pytest.mark.parametrize(
    ("rules", "v", "gate", "result", "then"),
    [
        (RULES, verdict("PASS"), PASSED, ("PASS", "ALL_MET"),
         Move(State.PASSED, "PASS (ALL_MET); every hard gate passed")),
        # enforced gates turn a PASS over a failed gate into PARTIAL, which revises
        (RULES, verdict("PASS"), FAILED, ("PARTIAL", f"HARD_GATE: {FAILED.failures[0]}"),
         Move(State.REVISING, f"PARTIAL (HARD_GATE: {FAILED.failures[0]}); revision 1 of 2", _counters(1))),
        # ablated (PSE_HARD_GATES=false): the same PASS stands, and the reason says the gates were off
        (ABLATED, verdict("PASS"), FAILED.model_copy(update={"enforced": False}), ("PASS", "ALL_MET"),
         Move(State.PASSED, "PASS (ALL_MET); hard gates off (PSE_HARD_GATES=false)")),
        (RULES, verdict("PARTIAL", "TESTS_FAILING", "AC2"), FAILED, ("PARTIAL", "TESTS_FAILING"),
         Move(State.REVISING, "PARTIAL (TESTS_FAILING); revision 1 of 2", _counters(1))),
        (RULES, verdict("FAIL", "WRONG_PLAN", "AC1"), FAILED, ("FAIL", "WRONG_PLAN"),
         Move(State.REPLANNING, "FAIL (WRONG_PLAN); re-plan 1 of 1", _counters(0, 1))),
        (RULES, verdict("BLOCKED", "NEEDS_ACCESS"), FAILED, ("BLOCKED", "NEEDS_ACCESS"),
         Move(State.BLOCKED, "Evaluator returned BLOCKED (NEEDS_ACCESS)")),
    ],
)  # fmt: skip
def test_a_verdict_is_judged_then_moves_by_the_retry_rules(
    rules: Rules, v: VerdictRecord, gate: GateRecord, result: tuple[str, str], then: Move
) -> None:
    assert judged(rules, v, gate) == EndCycle(*result, then, verdict=v)


def test_retries_run_out_in_order_revise_then_replan_then_escalate() -> None:
    v = verdict("PARTIAL", "TESTS_FAILING", "AC2")
    over = trace(State.REVIEWING, cycle(plan=PLAN), counters=_counters(2, 0))
    assert judged(RULES, v, FAILED, over).then == Move(  # type: ignore[union-attr]
        State.REPLANNING, "PARTIAL over its retry cap (TESTS_FAILING); re-plan 1 of 1", _counters(0, 1)
    )
    spent = trace(State.REVIEWING, cycle(plan=PLAN), counters=_counters(2, 1))
    assert judged(RULES, v, FAILED, spent).then == Move(  # type: ignore[union-attr]
        State.ESCALATED, "PARTIAL (TESTS_FAILING) with every retry used"
    )
    fail = verdict("FAIL", "WRONG_PLAN", "AC1")
    spent = trace(State.REVIEWING, cycle(plan=PLAN), counters=_counters(0, 1))
    assert judged(RULES, fail, FAILED, spent).then == Move(  # type: ignore[union-attr]
        State.ESCALATED, "FAIL (WRONG_PLAN) with every retry used"
    )


def test_a_criterion_failing_its_cap_of_times_escalates_with_retries_left() -> None:
    v = verdict("PARTIAL", "TESTS_FAILING", "AC2")
    before = [cycle(i, plan=PLAN, verdict=v) for i in (1, 2)]
    state = trace(State.REVIEWING, *before, cycle(3, "revise", plan=PLAN))
    assert judged(RULES, v, FAILED, state).then == Move(  # type: ignore[union-attr]
        State.ESCALATED, "PARTIAL (TESTS_FAILING); criterion AC2 failed 3 times (PSE_MAX_CRITERION_FAILURES=3), "
        "whatever retries are left",
    )  # fmt: skip


def test_the_cycles_a_person_allowed_are_all_a_resumed_run_gets() -> None:
    resumed = HumanAnswer(by="po", decision="resume", retries=1, after_cycle=1, outcome_before="ESCALATED")
    state = trace(State.REVIEWING, cycle(), cycle(2, "revise", plan=PLAN), answers=[resumed])
    assert judged(RULES, verdict("PARTIAL", "TESTS_FAILING", "AC2"), FAILED, state).then == Move(  # type: ignore[union-attr]
        State.ESCALATED, "PARTIAL (TESTS_FAILING) in the 1 cycle(s) a person allowed (pse answer)"
    )


def test_an_unreadable_verdict_is_repaired_once_then_is_a_review_error() -> None:
    result = review(None, FAILED, problem="no <verdict> element")
    assert decide(run(State.REVIEWING, plan=PLAN), result) == AskAgain(
        E, repair_request(E, "no <verdict> element"), "no <verdict> element"
    )
    error = "REVIEW_ERROR: no <verdict> element"
    assert decide(run(State.REVIEWING, plan=PLAN), dataclasses.replace(result, asked=1)) == EndCycle(
        "ERROR", error, Move(State.ERROR, error), review_error=error
    )


@pytest.mark.parametrize(
    ("v", "calls", "rules", "starts"),
    [
        # a PASS before the checks it owes: asked once, only where the gates are enforced
        (verdict("PASS"), [], RULES, "Your PASS came before the evidence it needs: run run_pytest"),
        (verdict("PASS"), [], ABLATED, None),
        # a verdict its own evidence contradicts
        (verdict("PARTIAL", "TESTS_FAILING"), [pytest_run(5)], RULES,
         "You judged every criterion met and your last run_pytest passed (5 passed, none failed)"),
        (verdict("PARTIAL", "SPEC_CONFLICT", "AC1"), [], RULES,
         "Your verdict's reason is SPEC_CONFLICT, but this task gave no test"),
        # a verdict on its own tests' defects (the run found them in its files' code), not on the work
        (verdict("PARTIAL", "TESTS_FAILING", "AC1"), [FAULTED], RULES,
         f"Your verdict rests on a run in which your own tests failed on their own code, not on the work: "
         f"{FAULT}. A defect of your tests is not the Specialist's to fix."),
        (verdict("FAIL", "TESTS_FAILING", "AC1"), [FAULTED], RULES, "Your verdict rests on a run in which"),
        (verdict("PARTIAL", "TESTS_FAILING", "AC1"), [FAULTED, pytest_run(1, 1)], RULES, None),  # a later run
        # a FAIL over work the Specialist can fix under the plan
        (verdict("FAIL", "TESTS_FAILING", "AC1"), [pytest_run(1, 1)], RULES,
         "Your FAIL asks for a new plan, but its reason, TESTS_FAILING"),
        # a FAIL for the approach where every test of the judge's own passed (heldout-20 account): asked;
        # one of its own failed, or none of its own ran (only the Specialist's): it stands
        (verdict("FAIL", "WRONG_APPROACH", "AC1"), [judged_run("passed", "passed")], RULES,
         "Your FAIL asks for a new plan, but your own tests passed on the work (2 passed, none failed)"),
        (verdict("FAIL", "WRONG_APPROACH", "AC1"), [judged_run("passed", "failed")], RULES, None),
        (verdict("FAIL", "WRONG_APPROACH", "AC1"), [judged_run(specialist="passed")], RULES, None),
        # a BLOCKED over a file the work lacks (held-out csv-mean's test.csv), not over a person's call
        (verdict("BLOCKED", "MISSING_DATA", "AC1"), [pytest_run(0, 1)], RULES,
         "Your BLOCKED stops the run for a person, but its reason, MISSING_DATA"),
        (verdict("BLOCKED", "MISSING_PERMISSION", "AC1"), [pytest_run(0, 1)], RULES, None),
    ],
)  # fmt: skip
def test_a_premature_verdict_is_asked_about_once(
    v: VerdictRecord, calls: list[ToolCallRecord], rules: Rules, starts: str | None
) -> None:
    state = run(State.REVIEWING, rules=rules, plan=PLAN, tool_calls=calls)
    nxt = decide(state, review(v, FAILED))
    if starts is None:
        assert isinstance(nxt, EndCycle)
    else:
        assert isinstance(nxt, AskAgain) and nxt.request.startswith(starts), nxt
        assert isinstance(decide(state, dataclasses.replace(review(v, FAILED), asked=1)), EndCycle)


def test_a_spec_conflict_stands_only_over_a_test_that_failed_in_the_judges_own_run() -> None:
    conflict = BlockedRecord(role=E, reason_code="SPEC_CONFLICT", detail=PACKET, test="test_a.py::test_x")
    failing = pytest_run(0, 1).model_copy(
        update={"facts": {"report": "checker", "tests": [{"test": "test_a.py::test_x", "outcome": "failed"}]}}
    )
    unfounded = decide(run(State.REVIEWING, plan=PLAN), review(None, FAILED, blocked=conflict))
    assert isinstance(unfounded, AskAgain) and "did not fail in your last run_pytest" in unfounded.request
    named = dataclasses.replace(review(None, FAILED, blocked=conflict), seen=Seen(named_test=False))
    nxt = decide(run(State.REVIEWING, plan=PLAN), named)
    assert isinstance(nxt, AskAgain) and "which is no test function of the workspace" in nxt.request
    founded = decide(
        run(State.REVIEWING, plan=PLAN, tool_calls=[failing]), review(None, FAILED, blocked=conflict)
    )
    assert founded == EndCycle(
        "BLOCKED", "Evaluator blocked: SPEC_CONFLICT", Move(State.BLOCKED, "Evaluator blocked: SPEC_CONFLICT"),
        blocked=conflict,
    )  # fmt: skip


def test_a_self_review_is_final_and_ungated() -> None:
    single = dataclasses.replace(RULES, crew=SINGLE_CREW, gates=dataclasses.replace(CHECKS, enforced=False))
    state = RunState(trace(State.RUNNING, cycle()), single, "initial", PACKET)
    reviewed = Move(State.REVIEWING, "the Agent reviewed its own work")
    result = PhaseResult(
        A, "…", Final(verdict=verdict("PASS")), seen=Seen(gate=FAILED.model_copy(update={"enforced": False}))
    )
    assert decide(state, result) == EndCycle(
        "PASS", "ALL_MET", Move(State.PASSED, "PASS (ALL_MET); no hard gates (the single team has no Evaluator to "
        "hold to them)"), (reviewed,), verdict=verdict("PASS"),
    )  # fmt: skip
    partial = dataclasses.replace(result, final=Final(verdict=verdict("PARTIAL", "X", "AC1")))
    assert moves(decide(state, partial)) == [
        ("REVIEWING", "the Agent reviewed its own work"),
        ("ESCALATED", "PARTIAL (X): the Agent's own review did not pass"),
    ]


# ---- step mode -----------------------------------------------------------------------------------------


def steps_run(*attempts: StepAttemptRecord, failing: str | None = None) -> RunState:
    return RunState(trace(State.RUNNING, cycle(plan=STEP_PLAN, steps=list(attempts))), STEPS, "initial", PACKET,
                    failing)  # fmt: skip


def test_a_steps_plan_runs_its_steps_and_a_bad_graph_is_repaired() -> None:
    assert decide(run(State.START, rules=STEPS), said(P, plan=STEP_PLAN)) == RunSteps(
        (Move(State.PLANNED, "plan fixed with 2 steps and 2 criteria"), Move(State.RUNNING, "2 step(s) to run")),
        STEP_PLAN,
    )  # fmt: skip
    cyclic = STEP_PLAN.model_copy(update={"steps": [PlanItem(id="S1", text="a", depends_on=["S1"])]})
    nxt = decide(run(State.START, rules=STEPS), said(P, plan=cyclic))
    assert isinstance(nxt, AskAgain) and nxt.error == "plan: step S1 depends on itself"


def step(role: str, number: int = 1, **final: object) -> PhaseResult:
    return PhaseResult(role, "…", Final(**final), step="S1", attempt=number)  # type: ignore[arg-type]


def test_a_steps_work_is_reviewed_and_a_block_or_a_stop_ends_its_attempt() -> None:
    assert decide(steps_run(), step(S)) == RunPhase(
        E, (Move(State.REVIEWING, "the step's review"),), step="S1"
    )
    blocked = BlockedRecord(role=S, reason_code="MISSING_DATA")
    assert decide(steps_run(), step(S, blocked=blocked)) == EndStep(
        "S1", "BLOCKED", "Specialist blocked: MISSING_DATA", Move(State.BLOCKED, "step S1 blocked (Specialist "
        "blocked: MISSING_DATA)"), blocked=blocked,
    )  # fmt: skip
    cut = dataclasses.replace(step(S), stopped=CycleStop("TIMEOUT", "turn cap"), failed="ModelUnavailable: x")
    assert decide(steps_run(), cut) == EndStep(  # the attempt's own words: its stop before the failure
        "S1", "ERROR", "turn cap", Move(State.REPLANNING, "STEP_FAILED: step S1 ERROR (turn cap)")
    )


@pytest.mark.parametrize(
    ("v", "gate", "failing", "number", "expected"),
    [
        (verdict("PASS"), PASSED, None, 1, ("PASS", "ALL_MET", State.PASSED, "step S1 passed (ALL_MET)")),
        # the step's gates are enforced like the cycle's ...
        (verdict("PASS"), FAILED, None, 1, ("PARTIAL", f"HARD_GATE: {FAILED.failures[0]}", State.REVISING,
         f"PARTIAL (HARD_GATE: {FAILED.failures[0]}); step S1 retry 1 of 1")),

        (verdict("PARTIAL", "X", "AC1"), FAILED, None, 2,
         ("PARTIAL", "X", State.REPLANNING, "STEP_FAILED: step S1 over its 1 retries (PSE_MAX_STEP_RETRIES) (X)")),
        (verdict("PARTIAL", "X", "AC1"), FAILED, "STEP_FAILED: step S2 FAIL (Y)", 1,
         ("PARTIAL", "X", State.REPLANNING,
          "STEP_FAILED: step S1 PARTIAL while another step's failure ends the cycle (X)")),
        (verdict("FAIL", "Y", "AC1"), FAILED, None, 1, ("FAIL", "Y", State.REPLANNING, "STEP_FAILED: step S1 FAIL (Y)")),
    ],
)  # fmt: skip
def test_a_steps_review_is_judged_and_moves_the_step(
    v: VerdictRecord,
    gate: GateRecord,
    failing: str | None,
    number: int,
    expected: tuple[str, str, State, str],
) -> None:
    result = dataclasses.replace(step(E, number, verdict=v), seen=Seen(gate=gate))
    end = decide(steps_run(failing=failing), result)
    assert end == EndStep("S1", expected[0], expected[1], Move(expected[2], expected[3]), v, gate)


def test_a_steps_gates_are_ablated_with_the_cycles() -> None:
    """PSE_HARD_GATES=false reaches a step's review: the same rule, applied in one place."""
    result = dataclasses.replace(step(E, verdict=verdict("PASS")), seen=Seen(gate=FAILED))
    ablated = dataclasses.replace(steps_run(), rules=dataclasses.replace(STEPS, gates=ABLATED.gates))
    assert decide(ablated, result) == EndStep(
        "S1", "PASS", "ALL_MET", Move(State.PASSED, "step S1 passed (ALL_MET)"), verdict("PASS"), FAILED
    )


def test_a_steps_review_that_cannot_be_read_is_repaired_once() -> None:
    result = step(E, problem="no <verdict> element")
    nxt = decide(steps_run(), result)
    assert nxt == AskAgain(E, repair_request(E, "no <verdict> element"), "no <verdict> element", "S1")
    end = decide(steps_run(), dataclasses.replace(result, asked=1))
    assert isinstance(end, EndStep) and (end.result, end.reason) == (
        "ERROR",
        "REVIEW_ERROR: no <verdict> element",
    )


@pytest.mark.parametrize(
    ("settled", "counters", "expected"),
    [
        (StepsSettled(), _counters(), RunPhase(E, (Move(State.REVIEWING, "every step passed; the final review"),),
                                               review=True)),
        (StepsSettled(failure="STEP_FAILED: step S1 FAIL (Y)"), _counters(),
         EndCycle("FAIL", "STEP_FAILED: step S1 FAIL (Y)",
                  Move(State.REPLANNING, "STEP_FAILED: step S1 FAIL (Y); re-plan 1 of 1", _counters(0, 1)))),
        (StepsSettled(failure="STEP_FAILED: step S1 FAIL (Y)"), _counters(0, 1),
         EndCycle("FAIL", "STEP_FAILED: step S1 FAIL (Y)",
                  Move(State.ESCALATED, "STEP_FAILED: step S1 FAIL (Y) with every re-plan used"))),
        (StepsSettled(blocked=BlockedRecord(role=S, reason_code="MISSING_DATA")), _counters(),
         EndCycle("BLOCKED", "Specialist blocked: MISSING_DATA", Move(State.BLOCKED, "Specialist blocked: MISSING_DATA"),
                  blocked=BlockedRecord(role=S, reason_code="MISSING_DATA"))),
        (StepsSettled(failed="ModelUnavailable: x"), _counters(),
         EndCycle("ERROR", "ModelUnavailable: x", Move(State.ERROR, "ModelUnavailable: x"),
                  stopped="ModelUnavailable: x")),
    ],
)  # fmt: skip
def test_settled_steps_go_to_the_final_review_or_end_the_cycle(
    settled: StepsSettled, counters: Counters, expected: Next
) -> None:
    state = RunState(trace(State.RUNNING, cycle(plan=STEP_PLAN), counters=counters), STEPS, "initial", PACKET)
    assert decide(state, settled) == expected


def test_the_final_review_is_judged_as_a_cycles() -> None:
    checked = cycle(plan=STEP_PLAN, tool_calls=[pytest_run(1, 1)])
    state = RunState(trace(State.REVIEWING, checked), STEPS, "initial", PACKET)
    assert decide(state, review(verdict("PASS"), PASSED)) == EndCycle(
        "PASS",
        "ALL_MET",
        Move(State.PASSED, "PASS (ALL_MET); every hard gate passed"),
        verdict=verdict("PASS"),
    )


# ---- the table as a whole ------------------------------------------------------------------------------


def _cases() -> Iterator[tuple[str, Next]]:
    """Every (state before, next) the cases above produce, rebuilt here (each case's state and event)."""
    boundary = [
        trace(), trace(State.REVISING, cycle(), plan=PLAN), trace(State.REPLANNING, cycle(), plan=PLAN),
        trace(State.AWAITING_ANSWER, ASKED, answers=[ANSWERED]), trace(State.BLOCKED, cycle()),
    ]  # fmt: skip
    for before in boundary:
        yield before.state, decide(RunState(before, RULES), None)
    yield "START", decide(RunState(trace(), dataclasses.replace(RULES, crew=SINGLE_CREW)), None)
    yield (
        "REVISING",
        decide(RunState(trace(State.REVISING, cycle()), RULES), Halted(CycleStop("TIMEOUT", "t"))),
    )
    yield "RUNNING", decide(RunState(trace(State.RUNNING, cycle()), RULES), Halted(CycleStop("ERROR", "e")))
    yield "START", decide(run(State.START), said(P, plan=PLAN))
    yield "REPLANNING", decide(run(State.REPLANNING, kind="replan"), said(P, plan=PLAN))
    yield "AWAITING_ANSWER", decide(run(State.AWAITING_ANSWER), said(P, plan=PLAN))
    yield "START", decide(run(State.START, rules=STEPS), said(P, plan=STEP_PLAN))
    for state in (State.START, State.REPLANNING, State.AWAITING_ANSWER):
        yield state.value, decide(run(state), said(P, blocked=BlockedRecord(role=P, reason_code="X")))
        asked = ClarificationRecord(questions=[QuestionRecord(id="Q1", text="?")])
        yield state.value, decide(run(state), said(P, clarification=asked))
        yield state.value, decide(run(state), PhaseResult(P, stopped=CycleStop("TIMEOUT", "cap")))
        yield state.value, decide(run(state), PhaseResult(P, failed="ModelUnavailable: x"))
    yield "PLANNED", decide(run(State.PLANNED), PhaseResult(P, stopped=CycleStop("TIMEOUT", "t")))
    yield "PLANNED", decide(run(State.PLANNED), PhaseResult(P, failed="ModelUnavailable: x"))
    yield "REVISING", decide(run(State.REVISING), PhaseResult(P, stopped=CycleStop("TIMEOUT", "t")))
    yield "REVISING", decide(run(State.REVISING), PhaseResult(P, failed="ModelUnavailable: x"))
    yield "RUNNING", decide(run(State.RUNNING, plan=PLAN), said(S))
    yield (
        "RUNNING",
        decide(run(State.RUNNING, plan=PLAN), said(S, blocked=BlockedRecord(role=S, reason_code="X"))),
    )
    yield "RUNNING", decide(run(State.RUNNING, plan=PLAN), PhaseResult(S, stopped=CycleStop("TIMEOUT", "t")))
    yield "RUNNING", decide(run(State.RUNNING, plan=PLAN), PhaseResult(S, failed="ModelUnavailable: x"))
    for v in (
        verdict("PASS"),
        verdict("PARTIAL", "X", "AC1"),
        verdict("FAIL", "Y", "AC1"),
        verdict("BLOCKED", "Z"),
    ):
        yield "REVIEWING", judged(RULES, v, PASSED if v.status == "PASS" else FAILED)
    spent = trace(State.REVIEWING, cycle(plan=PLAN), counters=_counters(2, 1))
    yield "REVIEWING", judged(RULES, verdict("PARTIAL", "X", "AC1"), FAILED, spent)
    yield "REVIEWING", decide(run(State.REVIEWING, plan=PLAN), review(None, FAILED, blocked=BlockedRecord(
        role=E, reason_code="NEEDS_ACCESS")))  # fmt: skip
    yield (
        "REVIEWING",
        decide(run(State.REVIEWING, plan=PLAN), PhaseResult(E, stopped=CycleStop("TIMEOUT", "t"))),
    )
    yield "REVIEWING", decide(run(State.REVIEWING, plan=PLAN), PhaseResult(E, failed="ModelUnavailable: x"))
    unreadable = dataclasses.replace(review(None, FAILED, problem="p"), asked=1)
    yield "REVIEWING", decide(run(State.REVIEWING, plan=PLAN), unreadable)
    for settled in (StepsSettled(failure="F"), StepsSettled(blocked=BlockedRecord(role=S, reason_code="X")),
                    StepsSettled(failed="ModelUnavailable: x"), StepsSettled()):  # fmt: skip
        yield (
            "RUNNING",
            decide(RunState(trace(State.RUNNING, cycle(plan=STEP_PLAN)), STEPS, "initial"), settled),
        )
    spent = trace(State.RUNNING, cycle(plan=STEP_PLAN), counters=_counters(0, 1))
    yield "RUNNING", decide(RunState(spent, STEPS, "initial"), StepsSettled(failure="F"))


def _walk(before: str, nxt: Next) -> Iterator[tuple[str, str]]:
    now = before
    for target, _ in moves(nxt if not isinstance(nxt, StartCycle) else nxt.phase):
        yield now, target
        now = target


def test_the_table_makes_every_move_of_the_state_machine_but_a_persons_and_a_held_calls() -> None:
    made = {move for before, nxt in _cases() if not isinstance(nxt, EndStep) for move in _walk(before, nxt)}
    for start, target in made:
        assert State(target) in TRANSITIONS[State(start)], (start, target)
    table = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    elsewhere = {
        *((a, "AWAITING_APPROVAL") for a, _ in table), *(("AWAITING_APPROVAL", b) for _, b in table),  # the desk
        *(("ESCALATED", b) for b in ("REVISING", "REPLANNING", "ACCEPTED_BY_HUMAN")),  # `pse answer`
        ("AWAITING_ANSWER", "AWAITING_ANSWER"),  # a person's answer to a run that asks again: `pse answer`
    }  # fmt: skip
    assert table - elsewhere - made == set()


def test_the_step_table_makes_every_move_of_a_step() -> None:
    made = set()
    for result in (step(S), step(S, blocked=BlockedRecord(role=S, reason_code="X")),
                   *(dataclasses.replace(step(E, n, verdict=v), seen=Seen(gate=PASSED))
                     for n in (1, 2) for v in (verdict("PASS"), verdict("PARTIAL", "X", "AC1")))):  # fmt: skip
        nxt = decide(steps_run(), result)
        before = "RUNNING" if result.role == S else "REVIEWING"
        made |= set(_walk(before, nxt))
    assert made == {("RUNNING", "REVIEWING"), ("RUNNING", "BLOCKED"), ("REVIEWING", "PASSED"),
                    ("REVIEWING", "REVISING"), ("REVIEWING", "REPLANNING")}  # fmt: skip


def test_the_decision_changes_nothing_it_is_given() -> None:
    for before, nxt in _cases():
        assert before and nxt  # every case was decided
    state = run(State.REVIEWING, plan=PLAN, tool_calls=[pytest_run(2)])
    frozen = copy.deepcopy(state.trace.model_dump())
    for v in (verdict("PASS"), verdict("PARTIAL", "X", "AC1"), verdict("FAIL", "Y", "AC1")):
        decide(state, review(v, FAILED))
    assert state.trace.model_dump() == frozen


def test_the_decisions_modules_import_no_autogen_model_team_or_tool_runner() -> None:
    engine = Path(__file__).resolve().parents[1] / "src" / "pse" / "engine"
    seen, todo, reached = set(), ["_decide"], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((engine / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                reached.append(node.module)
                if node.module.startswith("pse.engine._"):
                    todo.append(node.module.removeprefix("pse.engine."))
            elif isinstance(node, ast.Import):
                reached += [a.name for a in node.names]
    assert sorted(seen) == ["_decide", "_escalation", "_gates", "_graph", "_judge_tests", "_last_run",
                            "_limits", "_nudges", "_retries", "_said", "_state", "_step_buffer",
                            "_values", "_verdict_nudges"]  # fmt: skip
    banned = ("autogen", "pse.team", "pse.models", "pse.toolagent", "pse.sandbox", "pse.runner")
    assert [m for m in reached if m.startswith(banned)] == []
