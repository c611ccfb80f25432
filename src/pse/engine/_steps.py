"""Step mode (`execution = "steps"`): the plan's steps run one by one, each reviewed before its dependents
start, independent ones at the same time; then one final review of the whole task.

After the Planner's phase, `run_steps` schedules the plan's graph: a step is ready once every step it
depends on passed. Each attempt at a step is two phases, each a fresh context holding only that step:

- its **Specialist** (own cassette stream `Specialist@S2`, own ToolAgent whose `write_file` scope is the
  step's outputs) gets the goal, the step, its criteria, its outputs and the paths the steps it depends
  on produced (paths, not contents), and on a retry the last review's findings;
- its **Evaluator** reviews that step's criteria only, and the step's hard gates (its outputs exist,
  its criteria are covered and met) apply to that review.

Each step moves through the run's state table on its own (`StepStates`: an illegal move raises), and
`_retries.after_step_attempt` decides each move with the retry rule the cycles use. A step PARTIAL
retries alone, up to `PSE_MAX_STEP_RETRIES`; a FAIL or a PARTIAL over its retries ends the cycle (the
engine re-plans, keeping the passed steps); a BLOCKED step stops its branch, and the cycle ends blocked
once no other branch can go on. Up to `PSE_MAX_PARALLEL_STEPS` ready steps run at
once. When every step passed, the Evaluator reviews the task-level criteria over the whole workspace
(`task_criteria`), and the engine judges that verdict with the task's gates, as in task mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autogen_core.models import LLMMessage, UserMessage

from pse.engine._crew import Crew, CycleOutcome, NextCycle, RunControl, StepScope, StepWiring
from pse.engine._finals import conclude, read_final
from pse.engine._graph import StepSpec, step_specs, task_criteria
from pse.engine._judge import judge
from pse.engine._retries import after_step_attempt
from pse.engine._role_loop import RoleWork, run_role
from pse.engine._state import State, StepStates
from pse.engine._step_buffer import artifact_list, fit_to_tokens
from pse.events import (
    BlockedRecord,
    PlanRecord,
    StepAttemptRecord,
    StepEvent,
    VerdictRecord,
    utc_now,
)
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, parse_verdict, render_plan
from pse.roles import TASK_SOURCE, Role
from pse.team import CycleOpening, FailureBox
from pse.tokens import count_tokens
from pse.trace import CycleRecord

__all__ = ["kept_steps", "run_steps"]


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


@dataclass
class _Attempt:
    spec: StepSpec
    record: StepAttemptRecord
    blocked: BlockedRecord | None = None


class _Silent:
    """A context factory that remembers nothing: a step's phases see only the opening built for them."""

    def opening(self, role: str, cycle: CycleOpening) -> list[LLMMessage]:
        """Never asked: a step's openings are its briefs (`_step_brief`, `_review_brief`)."""
        return []

    def record(self, source: str, text: str) -> None:
        """Nothing crosses out of a step but its review."""


async def run_steps(
    crew: Crew,
    wiring: StepWiring,
    spec: NextCycle,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    outcome: CycleOutcome,
) -> None:
    """Run the plan's steps, then the final review; fill `outcome` (verdict, step_failure, blocked)."""
    plan = outcome.plan
    assert plan is not None, "steps run after a plan"
    specs = step_specs(plan)
    states = StepStates(specs, wiring.kept)
    blocked: dict[str, BlockedRecord] = {}
    failure: str | None = None
    running: dict[asyncio.Task[_Attempt], str] = {}
    attempts: dict[str, int] = {}
    run.machine.enter(State.RUNNING, f"{len(specs) - len(states.passed())} step(s) to run")

    def ready() -> list[StepSpec]:
        busy, passed = set(running.values()), states.passed()
        return [
            s
            for s in specs.values()
            if states[s.id] == State.PLANNED and s.id not in busy and set(s.depends_on) <= passed
        ]

    def start(step: StepSpec, buffer: str | None) -> None:
        states.move(step.id, State.RUNNING)
        attempts[step.id] = attempts.get(step.id, 0) + 1
        task = asyncio.create_task(
            _attempt(crew, wiring, plan, step, attempts[step.id], buffer, record, run, box, states)
        )
        running[task] = step.id

    try:
        while True:
            if failure is None and outcome.stop is None and box.failure is None:
                for step in ready()[: max(0, wiring.parallel - len(running))]:
                    start(step, None)
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                running.pop(task)
                attempt = task.result()
                step = attempt.spec
                # The state table's move, decided where a cycle's retries are (counts, not clocks).
                target, reason = after_step_attempt(
                    attempt.record,
                    wiring.max_retries,
                    blocked=attempt.blocked is not None,
                    ending=failure is not None,
                )
                states.move(step.id, target)
                if target == State.BLOCKED and attempt.blocked is not None:
                    blocked[step.id] = attempt.blocked
                elif target == State.REVISING:
                    start(step, _retry_buffer(step, attempt.record, wiring))
                elif target == State.REPLANNING:
                    failure = failure or reason
            if outcome.stop is not None or box.failure is not None:
                break
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    if outcome.stop is not None or box.failure is not None:
        return
    if failure is not None:
        outcome.step_failure = failure
        return
    if blocked:
        first = next(iter(blocked.values()))
        outcome.blocked = first
        return
    await _final_review(crew, spec, plan, record, run, box, outcome)


def _step_brief(plan: PlanRecord, step: StepSpec, specs: Mapping[str, StepSpec], workspace: Path) -> str:
    criteria = "\n".join(f"- {c.id}: {c.text}" for c in step.criteria)
    outputs = "\n".join(f"- {p}" for p in step.outputs) or "- (none: this step writes no file)"
    produced = []
    for dep in step.depends_on:
        paths = [p for p in specs[dep].outputs if (workspace / p).is_file()] if dep in specs else []
        produced.append(f"- {dep}: {', '.join(paths) or '(no files)'}")
    before = "\n".join(produced) or "- (none: this step depends on no other)"
    return (
        f"## The goal\n{plan.goal}\n\n## Your step: {step.id}\n{step.text}\n\n"
        f"## Its acceptance criteria\n{criteria}\n\n"
        f"## Its outputs (the only files you may write)\n{outputs}\n\n"
        f"## What the steps it depends on produced (read them if you need to)\n{before}\n\n"
        "Do this step only, then end with your <report>."
    )


def _review_brief(plan: PlanRecord, step: StepSpec, report: str) -> str:
    criteria = "\n".join(f'<criterion id="{c.id}">{c.text}</criterion>' for c in step.criteria)
    outputs = ", ".join(step.outputs) or "(none)"
    return (
        f"## The goal\n{plan.goal}\n\n## The step to review: {step.id}\n{step.text}\n\n"
        f"## Its acceptance criteria (judge these, and only these)\n{criteria}\n\n"
        f"## Its outputs\n{outputs}\n\n"
        f"## The Specialist's report on this step\n{report}\n\n"
        "Gather your own evidence with your tools, then give one <verdict> with one <criterion> per "
        "criterion above."
    )


def _retry_buffer(step: StepSpec, last: StepAttemptRecord, wiring: StepWiring) -> str:
    """What crosses into a step's retry: the last review's unmet findings (flat: one review's worth)."""
    verdict = last.verdict
    findings = (
        "\n".join(f"- {c.id} {'met' if c.met else 'NOT met'}: {c.finding}" for c in verdict.criteria)
        if verdict is not None
        else f"- the review could not be read: {last.result_reason}"
    )
    gate = "; ".join(last.gate.failures) if last.gate is not None and last.gate.failures else ""
    text = (
        f"## Retry {last.attempt} of step {step.id}: what the last review found\n{findings}\n"
        + (f"\nHard gates that failed: {gate}\n" if gate else "")
        + f"\n## The workspace now\n{artifact_list(wiring.workspace)}"
    )
    return fit_to_tokens(text, wiring.step_buffer_tokens)


async def _attempt(
    crew: Crew,
    wiring: StepWiring,
    plan: PlanRecord,
    step: StepSpec,
    number: int,
    buffer: str | None,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    states: StepStates,
) -> _Attempt:
    attempt = StepAttemptRecord(
        step=step.id,
        attempt=number,
        step_buffer=buffer,
        step_buffer_tokens=count_tokens(buffer) if buffer else 0,
    )
    record.steps.append(attempt)
    run.events.emit(StepEvent(run_id=run.events.run_id, cycle=record.index, attempt=attempt.model_copy()))
    result = _Attempt(step, attempt)
    local = CycleOutcome()  # the phases' own stop and failure reporting
    specs = step_specs(plan)
    brief = _step_brief(plan, step, specs, wiring.workspace) + (f"\n\n{buffer}" if buffer else "")
    cap = f"turn cap: {crew.turns_per_cycle} turns in one phase of a step (PSE_TURNS_PER_CYCLE)"

    def work(role: str, scope: StepScope) -> RoleWork:
        """`role`'s phase of this step: its own setup and a ToolAgent that enforces `scope`."""
        setup, tool_agent = wiring.role(role, step.id), wiring.tool_agent(scope)
        return RoleWork(role, setup, tool_agent, _Silent(), lambda: crew.turns_per_cycle, cap, step.id)

    scope = StepScope(step.id, frozenset(step.outputs))
    opening: list[LLMMessage] = [UserMessage(content=brief, source=TASK_SOURCE)]
    done = await run_role(
        work(Role.SPECIALIST, scope),
        opening,
        _as_read,
        retries=0,
        record=record,
        run=run,
        box=box,
        outcome=local,
    )
    stopped = _stopped(local, box) if done is None else None
    if done is not None:
        try:
            result.blocked = find_blocked(done.final, Role.SPECIALIST)
        except ProtocolError as exc:
            stopped = f"REPORT_ERROR: {exc}"
    if stopped is None and result.blocked is not None:
        _end(attempt, "BLOCKED", f"Specialist blocked: {result.blocked.reason_code}", run, record)
        return result
    if stopped is not None or done is None:
        _end(attempt, "ERROR", stopped or _stopped(local, box), run, record)
        return result
    verdict: VerdictRecord | None = None

    def read(final: str) -> tuple[str | None, str | None]:
        nonlocal verdict
        try:
            verdict = parse_verdict(final)
        except ProtocolError as exc:
            return str(exc), None
        return None, None

    states.move(step.id, State.REVIEWING)
    review: list[LLMMessage] = [
        UserMessage(content=_review_brief(plan, step, done.final), source=TASK_SOURCE)
    ]
    reviewed = await run_role(
        work(Role.EVALUATOR, StepScope(step.id)),
        review,
        read,
        retries=crew.format_retries,
        record=record,
        run=run,
        box=box,
        outcome=local,
    )
    if reviewed is None:
        _end(attempt, "ERROR", _stopped(local, box), run, record)
        return result
    attempt.verdict = verdict
    sub = PlanRecord(goal=plan.goal, steps=[s for s in plan.steps if s.id == step.id],
                     criteria=list(step.criteria), outputs=list(step.outputs))  # fmt: skip
    calls = [c for c in record.tool_calls if c.step == step.id and c.at >= attempt.started_at]
    attempt.gate = wiring.gate(verdict, sub, calls)
    judged = judge(verdict, attempt.gate, no_verdict=f"REVIEW_ERROR: {reviewed.problem}")
    _end(attempt, judged.result, judged.reason, run, record)
    if verdict is not None and verdict.status == "BLOCKED":
        result.blocked = BlockedRecord(
            role=Role.EVALUATOR, reason_code=verdict.reason_code, detail=verdict.summary
        )
    return result


def _as_read(final: str) -> tuple[str | None, str | None]:
    """A step's report is read after its phase (`find_blocked`): the role loop has nothing to repair."""
    return None, None


def _stopped(local: CycleOutcome, box: FailureBox) -> str:
    """Why a step's phase was cut short: the role loop's stop, else the model's failure."""
    if local.stop is not None:
        return local.stop.reason
    return f"{type(box.failure).__name__}: {box.failure}"


def _end(attempt: StepAttemptRecord, result: str, reason: str, run: RunControl, record: CycleRecord) -> None:
    attempt.result, attempt.result_reason, attempt.ended_at = result, reason, utc_now()
    run.events.emit(StepEvent(run_id=run.events.run_id, cycle=record.index, attempt=attempt.model_copy()))


async def _final_review(
    crew: Crew,
    spec: NextCycle,
    plan: PlanRecord,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    outcome: CycleOutcome,
) -> None:
    """Every step passed: the Evaluator judges the task-level criteria over the whole workspace."""
    run.machine.enter(State.REVIEWING, "every step passed; the final review")
    criteria = task_criteria(plan)
    outcome.review_plan = PlanRecord(
        goal=plan.goal, steps=plan.steps, criteria=criteria, outputs=plan.outputs
    )
    listed = "\n".join(f'<criterion id="{c.id}">{c.text}</criterion>' for c in criteria)
    brief = (
        f"{spec.packet}\n\n## The plan\n{render_plan(plan)}\n\n## Every step passed its own review\n"
        + "\n".join(f"- {s.id}: {s.text}" for s in plan.steps)
        + "\n\n## The final review: judge these criteria over the whole workspace, with the task's checks\n"
        + listed
    )
    opening: list[LLMMessage] = [UserMessage(content=brief, source=TASK_SOURCE)]
    work = RoleWork(
        Role.EVALUATOR,
        crew.roles[Role.EVALUATOR],
        crew.tool_agent,
        crew.contexts,
        lambda: crew.turns_per_cycle,
        f"turn cap: {crew.turns_per_cycle} turns in the final review",
    )

    def read(final: str) -> tuple[str | None, str | None]:
        return read_final(Role.EVALUATOR, final, outcome, run), None

    result = await run_role(
        work, opening, read, retries=crew.format_retries, record=record, run=run, box=box, outcome=outcome
    )
    if result is not None:
        conclude(Role.EVALUATOR, result.final, result.problem, outcome)
