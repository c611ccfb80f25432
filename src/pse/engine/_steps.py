"""Step mode (`execution = "steps"`): the plan's steps run one by one, each reviewed before its dependents
start, independent ones at the same time; then one final review of the whole task.

After the Planner's phase, `run_steps` schedules the plan's graph: a step is ready once every step it
depends on passed. Each attempt at a step is two phases, each a fresh context holding only that step:

- its **Specialist** (own cassette stream `Specialist@S2`, own ToolAgent whose `write_file` scope is the
  step's outputs) gets the goal, the step, its criteria, its outputs and the paths the steps it depends
  on produced (paths, not contents), and on a retry the last review's findings;
- its **Evaluator** reviews that step's criteria only, and the step's hard gates (its outputs exist,
  its criteria are covered and met) apply to that review.

A step PARTIAL retries alone, up to `PSE_MAX_STEP_RETRIES`; a FAIL or a PARTIAL over its retries ends
the cycle (the engine re-plans, keeping the passed steps); a BLOCKED step stops its branch, and the
cycle ends blocked once no other branch can go on. Up to `PSE_MAX_PARALLEL_STEPS` ready steps run at
once. When every step passed, the Evaluator reviews the task-level criteria over the whole workspace
(`task_criteria`), and the engine judges that verdict with the task's gates, as in task mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autogen_agentchat.base import ChatAgent
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.engine._graph import StepSpec, step_specs, task_criteria
from pse.engine._state import State
from pse.engine._step_buffer import artifact_list, fit_to_tokens
from pse.events import (
    BlockedRecord,
    GateRecord,
    PlanRecord,
    StepAttemptRecord,
    StepEvent,
    ToolCallRecord,
    VerdictRecord,
    utc_now,
)
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, parse_verdict, render_plan
from pse.roles import TASK_SOURCE, Role
from pse.team import CycleOpening, FailureBox, Phase, RoleSetup
from pse.tokens import count_tokens
from pse.trace import CycleRecord

if TYPE_CHECKING:
    from pse.engine._cycle import Crew, CycleOutcome, NextCycle, RunControl

__all__ = ["StepCrew", "StepScope", "StepWiring", "kept_steps", "run_steps"]


@dataclass(frozen=True)
class StepScope:
    """What a step's ToolAgent enforces: the step its calls belong to, and (for its Specialist) the only
    paths `write_file` may write."""

    step: str
    outputs: frozenset[str] | None = None
    """None: writes are not narrowed (the step's review)."""


@dataclass(frozen=True)
class StepCrew:
    """What the runner gives step mode: each role's setup for a step (its own cassette stream and
    client), and a ToolAgent that enforces a `StepScope`."""

    role: Callable[[str, str], RoleSetup]
    tool_agent: Callable[[StepScope], ChatAgent]


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


GateFn = Callable[[VerdictRecord | None, PlanRecord, Sequence[ToolCallRecord]], GateRecord]


@dataclass
class StepWiring:
    """What step mode needs beside the crew: per-step roles and ToolAgents, the step gate, the limits.

    Attributes:
        role: (role, step) → that role's setup for the step (its own cassette stream).
        tool_agent: a ToolAgent that enforces `StepScope`.
        gate: the step's hard gates over (its verdict, its sub-plan, the attempt's tool calls).
        kept: steps that passed in earlier cycles and are still in the plan (set by the engine).
    """

    role: Callable[[str, str], RoleSetup]
    tool_agent: Callable[[StepScope], ChatAgent]
    gate: GateFn
    workspace: Path
    max_retries: int
    parallel: int
    max_steps: int
    step_buffer_tokens: int
    kept: dict[str, StepSpec] = field(default_factory=dict)


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
    passed: set[str] = set(wiring.kept)
    blocked: dict[str, BlockedRecord] = {}
    failure: str | None = None
    running: dict[asyncio.Task[_Attempt], str] = {}
    attempts: dict[str, int] = {}
    run.machine.enter(State.RUNNING, f"{len(specs) - len(passed)} step(s) to run")

    def ready() -> list[StepSpec]:
        busy = set(running.values())
        return [
            s
            for s in specs.values()
            if s.id not in passed and s.id not in blocked and s.id not in busy and set(s.depends_on) <= passed
        ]

    def start(step: StepSpec, buffer: str | None) -> None:
        attempts[step.id] = attempts.get(step.id, 0) + 1
        task = asyncio.create_task(
            _attempt(crew, wiring, plan, step, attempts[step.id], buffer, record, run, box)
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
                step, result = attempt.spec, attempt.record.result
                if result == "PASS":
                    passed.add(step.id)
                elif result == "BLOCKED" and attempt.blocked is not None:
                    blocked[step.id] = attempt.blocked
                elif result == "PARTIAL" and attempts[step.id] <= wiring.max_retries and failure is None:
                    start(step, _retry_buffer(step, attempt.record, wiring))
                elif result in ("PARTIAL", "FAIL", "BLOCKED", "ERROR"):
                    over = result == "PARTIAL"
                    why = f"over its {wiring.max_retries} retries (PSE_MAX_STEP_RETRIES)" if over else result
                    failure = failure or f"STEP_FAILED: step {step.id} {why} ({attempt.record.result_reason})"
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
) -> _Attempt:
    from pse.engine._cycle import CycleOutcome, _run_phase, repair_request

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
    scope = StepScope(step.id, frozenset(step.outputs))
    opening: list[LLMMessage] = [UserMessage(content=brief, source=TASK_SOURCE)]
    phase = Phase(
        wiring.role(Role.SPECIALIST, step.id), opening, wiring.tool_agent(scope), box, crew.turns_per_cycle
    )
    report = await _run_phase(phase, _Silent(), record, run, box, local, step=step.id)
    stopped = _stopped(phase, local, box, crew)
    if stopped is None:
        try:
            result.blocked = find_blocked(report, Role.SPECIALIST)
        except ProtocolError as exc:
            stopped = f"REPORT_ERROR: {exc}"
    if stopped is None and result.blocked is not None:
        _end(attempt, "BLOCKED", f"Specialist blocked: {result.blocked.reason_code}", run, record)
        return result
    if stopped is not None:
        _end(attempt, "ERROR", stopped, run, record)
        return result
    review: list[LLMMessage] = [UserMessage(content=_review_brief(plan, step, report), source=TASK_SOURCE)]
    verdict: VerdictRecord | None = None
    problem = ""
    for repair in range(crew.format_retries + 1):
        phase = Phase(
            wiring.role(Role.EVALUATOR, step.id),
            review,
            wiring.tool_agent(StepScope(step.id)),
            box,
            crew.turns_per_cycle,
        )
        final = await _run_phase(phase, _Silent(), record, run, box, local, step=step.id)
        stopped = _stopped(phase, local, box, crew)
        if stopped is not None:
            _end(attempt, "ERROR", stopped, run, record)
            return result
        try:
            verdict = parse_verdict(final)
            break
        except ProtocolError as exc:
            problem = str(exc)
            if repair < crew.format_retries:
                ask = repair_request(Role.EVALUATOR, problem)
                seen = AssistantMessage(content=final, source=Role.EVALUATOR)
                review = [*review, seen, UserMessage(content=ask, source=TASK_SOURCE)]
    attempt.verdict = verdict
    sub = PlanRecord(goal=plan.goal, steps=[s for s in plan.steps if s.id == step.id],
                     criteria=list(step.criteria), outputs=list(step.outputs))  # fmt: skip
    calls = [c for c in record.tool_calls if c.step == step.id and c.at >= attempt.started_at]
    attempt.gate = wiring.gate(verdict, sub, calls)
    if verdict is None:
        _end(attempt, "ERROR", f"REVIEW_ERROR: {problem}", run, record)
    elif verdict.status == "PASS" and not attempt.gate.passed:
        _end(attempt, "PARTIAL", "HARD_GATE: " + "; ".join(attempt.gate.failures), run, record)
    else:
        _end(attempt, verdict.status, verdict.reason_code, run, record)
    if verdict is not None and verdict.status == "BLOCKED":
        result.blocked = BlockedRecord(
            role=Role.EVALUATOR, reason_code=verdict.reason_code, detail=verdict.summary
        )
    return result


def _stopped(phase: Phase, local: CycleOutcome, box: FailureBox, crew: Crew) -> str | None:
    if local.stop is not None:
        return local.stop.reason
    if box.failure is not None:
        return f"{type(box.failure).__name__}: {box.failure}"
    if box.refused is not None:
        return str(box.refused)
    if not phase.finished.fired:
        return f"turn cap: {crew.turns_per_cycle} turns in one phase of a step (PSE_TURNS_PER_CYCLE)"
    return None


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
    from pse.engine._cycle import _conclude, _read_final, _run_phase, repair_request

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
    role = crew.roles[Role.EVALUATOR]
    for repair in range(crew.format_retries + 1):
        phase = Phase(role, opening, crew.tool_agent, box, crew.turns_per_cycle)
        final = await _run_phase(phase, crew.contexts, record, run, box, outcome)
        if outcome.stop is None and box.refused is not None:
            from pse.engine._cycle import CycleStop

            outcome.stop = CycleStop("TIMEOUT", str(box.refused))
        if outcome.stop is None and box.failure is None and not phase.finished.fired:
            from pse.engine._cycle import CycleStop

            outcome.stop = CycleStop("TIMEOUT", f"turn cap: {crew.turns_per_cycle} turns in the final review")
        if outcome.stop is not None or box.failure is not None:
            return
        problem = _read_final(Role.EVALUATOR, final, outcome, run)
        if problem is None or repair >= crew.format_retries:
            _conclude(Role.EVALUATOR, final, problem, outcome)
            return
        ask = repair_request(Role.EVALUATOR, problem)
        seen = AssistantMessage(content=final, source=Role.EVALUATOR)
        opening = [*opening, seen, UserMessage(content=ask, source=TASK_SOURCE)]
