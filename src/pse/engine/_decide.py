"""The one decision: from the run's state and what just happened, what comes next.

`decide(run, event)` is a pure function. Its input is the run's state (`RunState`: the trace, the rules
the run is held to, the cycle under way) and one event: nothing yet (a cycle boundary), a `Halted` run,
a phase's `PhaseResult`, or step mode's `StepsSettled`. Its output is one `Next`, which the loop
(`_engine`, `_steps`) only carries out:

=====================  ==========================================================================
`StartCycle`           a cycle of a kind (initial, revise, replan) and its first phase
`RunPhase`             a role's phase (a cycle's next, a step's review, step mode's final review)
`RunSteps`             step mode: the plan's steps, then the final review
`AskAgain`             the same phase once more: its final could not be read, or came too early
`EndStep`              a step's attempt came to a result; its move in the step's table
`EndCycle`             the cycle came to a result; the run's move (a retry, an escalation, an end)
`Stop`                 the run stops here: an outcome, or a wait for a person
=====================  ==========================================================================

Every move of the run's state machine is in a `Next` (`moves`, `then`), so the state table, the hard
gates and whether they are enforced (`judge`), the retry and escalation rules (`_retries`) and the
one-time nudges (`_nudges`) are applied here and nowhere else. What a phase *saw* (its final as its
reader read it, the workspace's facts, the gates) comes in with its result: nothing here reads a file,
calls a model or runs a tool. tests/test_decide.py is its table of cases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pse.engine._gates import GatePolicy, evidence_owed
from pse.engine._graph import StepSpec, graph_problem, step_specs
from pse.engine._limits import LoopLimits
from pse.engine._nudges import nudge
from pse.engine._retries import after_review, after_step, after_step_failure
from pse.engine._state import TERMINAL, State
from pse.engine._values import (
    AskAgain,
    CycleStop,
    EndCycle,
    EndStep,
    Halted,
    Move,
    Next,
    PhaseResult,
    RunPhase,
    RunSteps,
    StartCycle,
    StepsSettled,
    Stop,
    repair_request,
)
from pse.events import BlockedRecord, GateRecord, VerdictRecord
from pse.roles import BLOCK_ASKED, CrewSpec, CycleKind, PhaseSpec, role_spec
from pse.trace import CycleRecord, Trace

__all__ = [
    "Event",
    "Judgement",
    "Rules",
    "RunState",
    "answered",
    "decide",
    "judge",
    "kept_steps",
]


@dataclass(frozen=True)
class Rules:
    """What a run is held to, fixed for the run: its crew, limits, gates and the switches of its task.

    Attributes:
        crew: who works, in which order, who judges (`roles.CrewSpec`).
        limits: the loop's limits (retries, steps, format repairs).
        gates: the task's hard gates; `gates.enforced` is whether they hold a PASS (PSE_HARD_GATES, and a
            crew whose judge is independent).
        steps: the task runs in steps (`execution = "steps"`).
        questions: the Planner may ask a person (PSE_PLANNER_QUESTIONS).
        conflicts: the task gave tests, so a role may report a SPEC_CONFLICT.
        told: role → its system message (what a nudge may quote of an output, the most specific first).
    """

    crew: CrewSpec
    limits: LoopLimits
    gates: GatePolicy = field(default_factory=GatePolicy)
    steps: bool = False
    questions: bool = False
    conflicts: bool = False
    told: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunState:
    """What the decision reads: the run so far and the cycle under way. The trace is the serializable
    part (what a resumed run loads); the rest is rebuilt from the settings and the trace.

    Attributes:
        trace: the run's record: its state, counters, plan, answers and cycles (the one under way last).
        rules: what the run is held to.
        kind: the kind of the cycle under way (None between cycles).
        packet: the task's own words of the cycle (`NextCycle.spec`: its task message without what
            crossed from the last cycle, which quotes roles and tools): what a nudge holds a quote against.
        failing: step mode: why a step failed the cycle so far (the other steps' retries end).
    """

    trace: Trace
    rules: Rules
    kind: CycleKind | None = None
    packet: str = ""
    failing: str | None = None

    @property
    def cycle(self) -> CycleRecord:
        """The cycle under way."""
        return self.trace.cycles[-1]


Event = PhaseResult | StepsSettled | Halted | None
"""What the decision is told: None at a cycle boundary (a new run, a resumed one, a cycle's end)."""


@dataclass(frozen=True)
class Judgement:
    """What a review came to: PASS, PARTIAL, FAIL, BLOCKED or ERROR, and why (the verdict's reason code,
    `HARD_GATE: <failures>` when enforced gates overruled a PASS, or why there was no verdict)."""

    result: str
    reason: str


def judge(
    verdict: VerdictRecord | None, gate: GateRecord | None, *, enforced: bool, no_verdict: str
) -> Judgement:
    """The result of a review: the verdict, unless `enforced` hard gates failed under a PASS (the one place
    the gates and their enforcement apply, to a cycle's review and a step's alike)."""
    if verdict is None:
        return Judgement("ERROR", no_verdict)
    if verdict.status == "PASS" and gate is not None and not gate.passed and enforced:
        return Judgement("PARTIAL", "HARD_GATE: " + "; ".join(gate.failures))
    return Judgement(verdict.status, verdict.reason_code)


def decide(run: RunState, event: Event) -> Next:
    """What comes next, from the run's state and `event` (see the module docstring)."""
    if event is None:
        return _boundary(run)
    if isinstance(event, Halted):
        return Stop((_ended(event.stop),))
    if isinstance(event, StepsSettled):
        return _after_steps(run, event)
    if event.step is not None:
        return _after_step_phase(run, event)
    return _after_phase(run, event)


# ---- between cycles ----------------------------------------------------------------------------------


def _boundary(run: RunState) -> Next:
    """At a cycle boundary: the cycle the state calls for, or the run's stop."""
    trace, crew = run.trace, run.rules.crew
    state = State(trace.state)
    if state in TERMINAL:
        return Stop()
    if state == State.BLOCKED:
        return Stop((Move(State.ESCALATED, "blocked: a person must decide"),))
    last = trace.cycles[-1] if trace.cycles else None
    kind: CycleKind = "initial"
    if state == State.AWAITING_ANSWER:
        if answered(trace) is None:
            return Stop()  # it waits, durably: `pse answer RUN_ID --text …` resumes it
        kind = "replan" if trace.plan is not None else "initial"
    elif state == State.REVISING and trace.plan is not None and last is not None:
        kind = "revise"
    elif state == State.REPLANNING and last is not None:
        kind = "replan"
    first = crew.phases_for(kind)[0]
    return StartCycle(kind, RunPhase(first.role, _entering(state, first.enters)))


def answered(trace: Trace) -> str | None:
    """The person's answers to the Planner's last questions, as the Planner reads them; None while
    nobody has answered them."""
    last = trace.cycles[-1] if trace.cycles else None
    answer = trace.answers[-1] if trace.answers else None
    if last is None or last.clarification is None or answer is None or answer.decision != "answer":
        return None
    if answer.after_cycle != last.index:
        return None
    asked = "\n".join(f"- {q.id}: {q.text}" for q in last.clarification.questions)
    return (
        f"## Your questions (cycle {last.index})\n{asked}\n\n"
        f"## The person's answer ({answer.by})\n{(answer.text or '').strip()}"
    )


def _entering(state: State | str, enters: Sequence[tuple[str, str]]) -> tuple[Move, ...]:
    """The moves that enter each of `enters` in turn from `state` (a state the run is in is not entered)."""
    moves, now = [], State(state)
    for target, why in enters:
        if now != State(target):
            moves.append(Move(State(target), why))
            now = State(target)
    return tuple(moves)


def _ended(stop: CycleStop) -> Move:
    return Move(State.TIMEOUT if stop.outcome == "TIMEOUT" else State.ERROR, stop.reason)


# ---- a cycle's phases ---------------------------------------------------------------------------------


def _after_phase(run: RunState, r: PhaseResult) -> Next:
    """After a phase of the cycle: the next phase, the same one asked again, or the cycle's end."""
    rules, final = run.rules, r.final
    if (cut := r.cut) is not None:
        return EndCycle(cut.outcome, cut.reason, _ended(cut), stopped=cut.reason)
    if final.error is not None:  # an unreadable report: the cycle ends (REPORT_ERROR)
        return EndCycle("ERROR", final.error, Move(State.ERROR, final.error), review_error=final.error,
                        stopped=final.error)  # fmt: skip
    problem = final.problem
    if problem is None and final.plan is not None and rules.steps:
        graph = graph_problem(final.plan, rules.limits.max_steps, kept_steps(run.trace.cycles[:-1]))
        if graph is not None:
            problem = f"plan: {graph}"
    early = _nudged(run, r) if problem is None else None
    if (wrong := problem or early) is not None and (
        r.asked < rules.limits.format_retries or _block_owed(r, early)
    ):
        return AskAgain(r.role, repair_request(r.role, problem) if problem is not None else wrong, wrong)
    if final.blocked is not None:
        why = f"{final.blocked.role} blocked: {final.blocked.reason_code}"
        return EndCycle("BLOCKED", why, Move(State.BLOCKED, why), blocked=final.blocked)
    if final.clarification is not None:
        why = f"the {r.role} asked {len(final.clarification.questions)} question(s)"
        wait = Move(State.AWAITING_ANSWER, f"{why}: a person answers (pse answer --text)")
        return EndCycle("QUESTIONS", why, wait, clarification=final.clarification)
    if problem is not None and role_spec(r.role).final == "plan":
        error = f"PLAN_ERROR: {problem}"
        return EndCycle("ERROR", error, Move(State.ERROR, error), review_error=error, stopped=error)
    if problem is not None:  # an unreadable review, its repairs used: the cycle has no verdict
        return _judged(run, r, (), f"REVIEW_ERROR: {problem}")
    moves: list[Move] = []
    plan = rules.gates.owing(final.plan)
    if plan is not None:
        how = f"{len(plan.steps)} steps and " if rules.steps else ""
        strays = rules.gates.strays(final.plan)
        left = f" (outputs misread from the task, left out: {', '.join(strays)})" if strays else ""
        moves.append(Move(State.PLANNED, f"plan fixed with {how}{len(plan.criteria)} criteria{left}"))
    phases = rules.crew.phases_for(run.kind or "initial")
    roles = [p.role for p in phases]
    done = phases[roles.index(r.role)] if r.role in roles else PhaseSpec(r.role)
    if final.verdict is not None and done.enters_after is not None:  # a self-review: its work is done
        moves.append(Move(State(done.enters_after[0]), done.enters_after[1]))
    after = roles.index(r.role) + 1 if r.role in roles else len(roles)
    if after < len(roles):
        state = moves[-1].state if moves else State(run.trace.state)
        following = phases[after]
        if rules.steps and run.kind != "revise" and role_spec(following.role).final == "report":
            fixed = plan or run.cycle.plan
            specs = step_specs(fixed) if fixed is not None else {}
            count = len(specs) - len(kept_steps(run.trace.cycles[:-1]))
            return RunSteps((*moves, *_entering(state, [("RUNNING", f"{count} step(s) to run")])), plan)
        return RunPhase(following.role, (*moves, *_entering(state, following.enters)), plan=plan)
    return _judged(run, r, tuple(moves), None)


def _block_owed(r: PhaseResult, question: str | None) -> bool:
    """Whether `r`'s `<blocked>` is asked about though the phase's repairs are used: once a phase, as a
    block the records refute ends the cycle (often the run, for a person) where a repair only costs a
    turn. Held-out csv-mean's Specialist, asked twice for its test file, blocked under
    CONFLICTING_CRITERIA with "Why does pd need to be imported?" and its right module was never
    reviewed (heldout-15)."""
    return r.final.blocked is not None and not r.asked_block and (question or "").startswith(BLOCK_ASKED)


def _judged(run: RunState, r: PhaseResult, moves: tuple[Move, ...], error: str | None) -> EndCycle:
    """The cycle's review is read: its judgement, and the retry rules' move."""
    rules, verdict = run.rules, r.final.verdict
    no_verdict = error or f"REVIEW_ERROR: the cycle ended without a verdict from the {rules.crew.reviewer}"
    judged = judge(verdict, r.seen.gate, enforced=rules.gates.enforced, no_verdict=no_verdict)
    if verdict is None:
        then = Move(State.ERROR, judged.reason)
    else:
        current = run.cycle.model_copy(update={"verdict": verdict})
        then = after_review(
            judged.result,
            judged.reason,
            gates_passed=r.seen.gate is not None and r.seen.gate.passed,
            trace=run.trace,
            cycles=[*run.trace.cycles[:-1], current],
            limits=rules.limits,
            crew=rules.crew,
        )
    return EndCycle(judged.result, judged.reason, then, moves, verdict=verdict, review_error=error)


def _nudged(run: RunState, r: PhaseResult) -> str | None:
    """What `r`'s final sent too early, to be asked about once (the role's `RoleSpec.nudges`); a PASS
    is held to the checks it owes only where the gates are enforced."""
    calls, gates = run.cycle.tool_calls, run.rules.gates
    return nudge(
        r,
        run.cycle.plan,
        calls,
        owed=evidence_owed(calls, gates, r.final.verdict, run.cycle.plan) if gates.enforced else None,
        conflicts=run.rules.conflicts,
        told=(run.rules.told.get(r.role, ""), run.packet),
        packet=run.packet,
        before=run.trace.cycles[-2].tool_calls if run.kind == "revise" and len(run.trace.cycles) > 1 else (),
    )


# ---- step mode ----------------------------------------------------------------------------------------


def kept_steps(cycles: Sequence[CycleRecord]) -> dict[str, StepSpec]:
    """The steps that passed and are still in the plan, after `cycles`: what the next cycle keeps.

    A re-plan keeps a passed step only if it holds it unchanged (`graph_problem` makes sure)."""
    kept: dict[str, StepSpec] = {}
    for cycle in cycles:
        if cycle.plan is None:
            continue
        specs = step_specs(cycle.plan)
        kept = {i: s for i, s in kept.items() if i in specs and specs[i].same_as(s)}
        kept |= {a.step: specs[a.step] for a in cycle.steps if a.result == "PASS" and a.step in specs}
    return kept


def _after_step_phase(run: RunState, r: PhaseResult) -> Next:
    """After a phase of a step's attempt: its review, the same review asked again, or the attempt's end.

    A step's phases are asked again only for a review that cannot be read: the nudges speak of the
    task (its checks, its outputs, its tests), and a step is judged by its own brief and gates."""
    assert r.step is not None
    rules, final = run.rules, r.final
    if r.stopped is not None or r.failed is not None:  # the attempt's own words: its stop first
        return _end_step(run, r, "ERROR", r.stopped.reason if r.stopped is not None else str(r.failed))
    if final.error is not None:
        return _end_step(run, r, "ERROR", final.error)
    judging = role_spec(r.role).final == "verdict"
    if final.problem is not None and judging and r.asked < rules.limits.format_retries:
        return AskAgain(r.role, repair_request(r.role, final.problem), final.problem, r.step)
    if final.blocked is not None:
        blocked = final.blocked
        return _end_step(run, r, "BLOCKED", f"{r.role} blocked: {blocked.reason_code}", blocked=blocked)
    if not judging:
        return RunPhase(rules.crew.reviewer, (Move(State.REVIEWING, "the step's review"),), step=r.step)
    verdict = final.verdict
    enforced = rules.gates.enforced
    judged = judge(verdict, r.seen.gate, enforced=enforced, no_verdict=f"REVIEW_ERROR: {final.problem}")
    blocked_by = (
        BlockedRecord(role=r.role, reason_code=verdict.reason_code, detail=verdict.summary)
        if verdict is not None and verdict.status == "BLOCKED"
        else None
    )
    return _end_step(
        run, r, judged.result, judged.reason, gate=r.seen.gate, verdict=verdict, blocked=blocked_by
    )


def _end_step(
    run: RunState,
    r: PhaseResult,
    result: str,
    reason: str,
    *,
    gate: GateRecord | None = None,
    verdict: VerdictRecord | None = None,
    blocked: BlockedRecord | None = None,
) -> EndStep:
    assert r.step is not None
    move = after_step(
        r.step,
        r.attempt,
        result,
        reason,
        run.rules.limits.max_step_retries,
        blocked=blocked is not None,
        ending=run.failing is not None,
    )
    return EndStep(r.step, result, reason, move, verdict, gate, blocked)


def _after_steps(run: RunState, settled: StepsSettled) -> Next:
    """Every step settled: the final review, or the cycle's end (a step failed, blocked, or the model)."""
    if settled.failed is not None:
        return EndCycle("ERROR", settled.failed, Move(State.ERROR, settled.failed), stopped=settled.failed)
    if settled.failure is not None:
        then = after_step_failure(settled.failure, run.trace, run.rules.limits)
        return EndCycle("FAIL", settled.failure, then)
    if settled.blocked is not None:
        why = f"{settled.blocked.role} blocked: {settled.blocked.reason_code}"
        return EndCycle("BLOCKED", why, Move(State.BLOCKED, why), blocked=settled.blocked)
    moves = _entering(run.trace.state, [("REVIEWING", "every step passed; the final review")])
    return RunPhase(run.rules.crew.reviewer, moves, review=True)
