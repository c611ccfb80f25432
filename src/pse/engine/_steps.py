"""Step mode (`execution = "steps"`): the plan's steps run one by one, each reviewed before its dependents
start, independent ones at the same time; then one final review of the whole task (the cycle's).

`Steps.run` schedules the plan's graph: a step is ready once every step it depends on passed, and up to
`PSE_MAX_PARALLEL_STEPS` ready steps run at once. Each attempt at a step is two phases, each a fresh
context holding only that step:

- its **worker** (the Specialist: own cassette stream `Specialist@S2`, own ToolAgent whose `write_file`
  scope is the step's outputs) gets the goal, the step, its criteria, its outputs and the paths the steps
  it depends on produced (paths, not contents), and on a retry the last review's findings;
- its **judge** (the Evaluator) reviews that step's criteria only, and the step's hard gates (its outputs
  exist, its criteria are covered and met) hold that review.

The scheduler only runs phases: after each, `decide` says what comes next for its step (its review, the
review asked again, or the attempt's end with the step's move in the state table, `StepStates`), and when
nothing runs and nothing is ready, `Steps.run` returns `StepsSettled` for the cycle to decide on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from autogen_core.models import LLMMessage, UserMessage

from pse.engine._briefs import retry_buffer, review_brief, step_brief
from pse.engine._crew import Crew, RunControl, StepScope
from pse.engine._decide import RunState, decide, kept_steps
from pse.engine._graph import StepSpec, step_specs
from pse.engine._phases import Look, PhaseRun, Seat
from pse.engine._state import State, StepStates
from pse.engine._values import AskAgain, EndStep, Final, PhaseResult, RunPhase, Seen, StepsSettled
from pse.engine._workspace import Workspace
from pse.events import BlockedRecord, PlanRecord, StepAttemptRecord, StepEvent, utc_now
from pse.roles import TASK_SOURCE
from pse.team import CycleOpening, FailureBox
from pse.tokens import count_tokens
from pse.trace import CycleRecord

__all__ = ["Steps"]


class _Silent:
    """A context factory that remembers nothing: a step's phases see only the opening built for them."""

    def opening(self, role: str, cycle: CycleOpening) -> list[LLMMessage]:
        """Never asked: a step's openings are its briefs."""
        return []

    def record(self, source: str, text: str) -> None:
        """Nothing crosses out of a step but its review."""


class Steps:
    """The steps of one cycle's plan, run to their end.

    Args:
        crew: the run's crew (its turn cap); `crew.steps` are the steps' seats.
        plan: the cycle's plan.
        record: the cycle's record (each attempt is filed in `record.steps`).
        run: the run's control.
        box: the cycle's failure box.
        seen: the workspace.
        state: the decision's view of the run (`failing` is kept up to date here).
        max_parallel: PSE_MAX_PARALLEL_STEPS.
        cap: PSE_STEP_BUFFER_TOKENS (a retry's findings).
    """

    def __init__(
        self,
        crew: Crew,
        plan: PlanRecord,
        record: CycleRecord,
        run: RunControl,
        box: FailureBox,
        seen: Workspace,
        state: Callable[[str | None], RunState],
        *,
        max_parallel: int,
        cap: int,
    ) -> None:
        assert crew.steps is not None
        self.crew, self.wiring, self.plan, self.record = crew, crew.steps, plan, record
        self.control, self.box, self.seen, self.state = run, box, seen, state
        self.max_parallel, self.cap = max_parallel, cap
        worker = state(None).rules.crew.worker
        assert worker is not None, "a plan's steps run only where someone works (CrewSpec.plans)"
        self.worker, self.specs = worker, step_specs(plan)
        self.states = StepStates(self.specs, kept_steps(state(None).trace.cycles[:-1]))
        self.attempts: dict[str, StepAttemptRecord] = {}
        self.failure: str | None = None
        self.blocked: dict[str, BlockedRecord] = {}

    async def run(self) -> StepsSettled:
        """Run the steps until none runs and none is ready; what they came to."""
        running: dict[asyncio.Task[PhaseResult], str] = {}
        try:
            while True:
                if self.failure is None and self.box.failure is None:
                    for spec in self._ready(running)[: max(0, self.max_parallel - len(running))]:
                        self._start(spec, None, running)
                if not running:
                    break
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    step = self.specs[running.pop(task)]
                    # The step's move is decided as the other steps stand now (one may have failed the cycle).
                    end = decide(self.state(self.failure), task.result())
                    assert isinstance(end, EndStep), end
                    self._move(step, end, running)
                if self.box.failure is not None:
                    break
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
        failed = f"{type(self.box.failure).__name__}: {self.box.failure}" if self.box.failure else None
        first = next(iter(self.blocked.values()), None)
        return StepsSettled(self.failure, first, failed)

    def _ready(self, running: dict[asyncio.Task[PhaseResult], str]) -> list[StepSpec]:
        busy, passed = set(running.values()), self.states.passed()
        return [
            s
            for s in self.specs.values()
            if self.states[s.id] == State.PLANNED and s.id not in busy and set(s.depends_on) <= passed
        ]

    def _start(
        self, step: StepSpec, buffer: str | None, running: dict[asyncio.Task[PhaseResult], str]
    ) -> None:
        """A new attempt at `step`: its phases run in one task, the first opened with the step's brief."""
        self.states.move(step.id, State.RUNNING)
        number = self.attempts[step.id].attempt + 1 if step.id in self.attempts else 1
        attempt = StepAttemptRecord(
            step=step.id,
            attempt=number,
            step_buffer=buffer,
            step_buffer_tokens=count_tokens(buffer) if buffer else 0,
        )
        self.attempts[step.id] = attempt
        self.record.steps.append(attempt)
        self._announce(attempt)
        running[asyncio.create_task(self._attempt(step, attempt, buffer))] = step.id

    async def _attempt(self, step: StepSpec, attempt: StepAttemptRecord, buffer: str | None) -> PhaseResult:
        """One attempt at `step`: its worker's phase, then its review, each as the decision says; its end
        is recorded and its last phase's result returned (the scheduler makes the step's move)."""
        brief = step_brief(self.plan, step, self.specs, self.seen) + (f"\n\n{buffer}" if buffer else "")
        phase = self._phase(self.worker, StepScope(step.id, frozenset(step.outputs)), brief, attempt)
        while True:
            result = await phase.run()
            nxt = decide(self.state(self.failure), result)
            if isinstance(nxt, AskAgain):
                phase.ask(nxt.request, nxt.error)
            elif isinstance(nxt, RunPhase):
                for move in nxt.moves:
                    self.states.move(step.id, move.state)
                review = review_brief(self.plan, step, result.said)
                phase = self._phase(nxt.role, StepScope(step.id), review, attempt)
            else:
                assert isinstance(nxt, EndStep), nxt
                attempt.verdict, attempt.gate = nxt.verdict, nxt.gate
                attempt.result, attempt.result_reason, attempt.ended_at = nxt.result, nxt.reason, utc_now()
                self._announce(attempt)
                return result

    def _phase(self, role: str, scope: StepScope, brief: str, attempt: StepAttemptRecord) -> PhaseRun:
        """`role`'s phase of `attempt`: its seat for the step, a context that remembers nothing."""
        setup, tool_agent = self.wiring.seat(role, scope)
        turns = self.crew.turns_per_cycle
        cap = f"turn cap: {turns} turns in one phase of a step (PSE_TURNS_PER_CYCLE)"
        seat = Seat(role, setup, tool_agent, _Silent(), lambda: turns, cap, scope.step, attempt.attempt)
        opening: list[LLMMessage] = [UserMessage(content=brief, source=TASK_SOURCE)]
        return PhaseRun(seat, opening, self.record, self.control, self.box, self._look(scope.step, attempt))

    def _look(self, step: str, attempt: StepAttemptRecord) -> Look:
        """What PSE sees of a step's final: its review is gated over the step's part of the plan and the
        attempt's own tool calls."""
        spec = self.specs[step]
        sub = PlanRecord(goal=self.plan.goal, steps=[s for s in self.plan.steps if s.id == step],
                         criteria=list(spec.criteria), outputs=list(spec.outputs))  # fmt: skip

        def look(role: str, final: Final) -> Seen:
            calls = [c for c in self.record.tool_calls if c.step == step and c.at >= attempt.started_at]
            return self.seen.seen(role, final, sub, calls, step=True)

        return look

    def _move(self, step: StepSpec, end: EndStep, running: dict[asyncio.Task[PhaseResult], str]) -> None:
        """The step's move in the state table, and what it starts or ends."""
        self.states.move(step.id, end.move.state)
        if end.move.state == State.BLOCKED and end.blocked is not None:
            self.blocked[step.id] = end.blocked
        elif end.move.state == State.REVISING:
            self._start(step, retry_buffer(step, self.attempts[step.id], self.seen, self.cap), running)
        elif end.move.state == State.REPLANNING:
            self.failure = self.failure or end.move.reason

    def _announce(self, attempt: StepAttemptRecord) -> None:
        events = self.control.events
        events.emit(StepEvent(run_id=events.run_id, cycle=self.record.index, attempt=attempt.model_copy()))
