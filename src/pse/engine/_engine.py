"""The loop engine: plain code that carries out what `decide` says, cycle after cycle, and keeps the trace.

The engine holds no rule of its own. At every point where something happened (a run starts or resumes,
a cycle ends, a phase returns its `PhaseResult`, step mode's steps settle, a stop comes before a cycle)
it asks `decide` (`_decide`, pure) what comes next, and does it: opens a cycle with what crosses into it
(`_briefs`), runs a role's phase (`_phases`) or the plan's steps (`_steps`), asks a role again, records a
cycle's end, makes the state table's moves, stops. Tokens and cost live in one `Ledger`; every event goes
through one sink (`RunEvents`); the state moves only through the `StateMachine`, by moves the decision
made (a call held for a person pauses a phase: the approval desk's `AWAITING_APPROVAL`, and back); why
the run stops is its one `RunStop`'s.

Error rule: a model's mistake is an observation (a denied or malformed tool call, answered by the
ToolAgent) or, for a missing/duplicated/malformed plan or verdict, an ERROR of the review recorded in
the trace; infrastructure failure (`RunFailure`) ends the run as ERROR without using a retry; a bug in
our code is recorded as ERROR and then propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from autogen_core.models import LLMMessage, UserMessage

from pse.engine._briefs import NextCycle, again, final_review_brief, next_cycle
from pse.engine._crew import Crew, RunControl, StepWiring
from pse.engine._decide import Event, Rules, RunState, decide
from pse.engine._escalation import write_escalation
from pse.engine._ledger import Ledger
from pse.engine._lock import holding_run
from pse.engine._phases import PhaseRun, Seat
from pse.engine._resume import Resume
from pse.engine._setup import RunSetup
from pse.engine._state import OUTCOME_OF, State, StateMachine
from pse.engine._steps import Steps
from pse.engine._stop import RunStop
from pse.engine._values import (
    AskAgain,
    EndCycle,
    Final,
    Halted,
    Move,
    Next,
    RunPhase,
    RunSteps,
    Seen,
    StartCycle,
    Stop,
)
from pse.engine._workspace import Workspace
from pse.events import CycleStarted, PlanRecord, VerdictEvent, utc_now
from pse.protocol import render_plan
from pse.roles import TASK_SOURCE
from pse.team import FINAL_TURNS, FailureBox, HistoryContexts, ScopedContexts
from pse.tokens import count_tokens
from pse.trace import CycleRecord, Trace, outcome_event, write_trace

__all__ = ["Engine"]


class Engine:
    """Runs one PSE run to its outcome. Build one per run; `run()` may be called once.

    Args:
        setup: the run's wiring (roles, ToolAgent, workspace, limits, event sink).
        resume: where a resumed run goes on from (`Resume`: its trace, the cycle it runs again); None
            starts a new run.
    """

    def __init__(self, setup: RunSetup, resume: Resume | None = None) -> None:
        self.setup = setup
        self.limits = setup.limits
        self._resuming = resume is not None
        self._interrupted = resume.again if resume is not None else None
        opening, team = setup.opening, setup.team
        self.trace = resume.trace if resume is not None else opening.new_trace(team.context_mode)
        if opening.sandbox is not None:
            self.trace.sandbox = opening.sandbox  # a resumed run records the sandbox it goes on under
        self.events = setup.events
        self.machine = StateMachine(
            self.trace.run_id, self.trace.transitions, State(self.trace.state), self.events.emit
        )
        self.ledger = Ledger(self.trace, self.limits, setup.meters.price)
        setup.meters.usage.attach(self.ledger.record_call)
        setup.meters.prefixes.attach(self.ledger.record_prefix)
        self.workspace = Workspace(setup.workspace, setup.gates, setup.tools.role_written_config)
        self.rules = Rules(
            crew=team.crew,
            limits=self.limits,
            gates=setup.gates,
            steps=team.steps is not None,
            questions=team.planner_questions,
            conflicts=team.given_tests,
            told={role.name: role.system_message for role in team.roles},
        )
        # The history baseline is only another way to open the roles' contexts: one factory per run.
        contexts = HistoryContexts() if team.context_mode == "history" else ScopedContexts()
        self.crew = Crew(
            {r.name: r for r in team.roles},
            team.tool_agent,
            contexts,
            self.limits.turns_per_cycle,
            steps=StepWiring(team.steps) if team.steps is not None else None,
        )
        self.stop = RunStop(setup.tools, setup.approvals, self.ledger.exhausted)
        self._control = RunControl(self.machine, self.ledger, self.events, self.stop)
        if setup.approvals is not None:
            setup.approvals.attach(self.trace, self.machine, self.events, self._save_held)

    # ---- public ---------------------------------------------------------------------------

    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Stop the run from outside (Ctrl-C, dashboard); the current cycle ends cleanly and is recorded."""
        self.stop.cancel(reason)

    def interrupt(self, reason: str = "interrupted (Ctrl-C)") -> None:
        """Ctrl-C, or a server that stops: a run waiting for a person's approval stops where it is and
        keeps waiting on disk (`pse approve` resumes it, no model call repeated); any other run is
        cancelled with `reason`."""
        if self.machine.state != State.AWAITING_APPROVAL:
            self.cancel(reason)
            return
        self.stop.suspend()

    @property
    def suspended(self) -> bool:
        """The run stopped while a tool call waited for approval; its trace is as it was when held."""
        return self.stop.suspended

    async def run(self) -> Trace:
        """Run cycles until the run reaches an outcome; return the final trace (also on disk).

        Raises:
            UserError: another process executes this run now (it holds the run folder's lock).
        """
        with holding_run(self.setup.storage.run_dir):
            return await self._run()

    async def _run(self) -> Trace:
        self.stop.start(asyncio.get_running_loop().time() + self.limits.run_timeout_s)
        if self._resuming:
            self.trace.resumed += 1
        self._save()
        try:
            nxt = self._decide(None)
            while isinstance(nxt, StartCycle):
                stopped = self.stop.before_cycle()
                if stopped is not None:
                    nxt = self._decide(Halted(stopped))
                    break
                await self._cycle(nxt)
                if self.stop.suspended:
                    return self.trace
                nxt = self._decide(None)
            assert isinstance(nxt, Stop), nxt
            self._make(nxt.moves)
        except BaseException as exc:
            if not self.machine.terminal:
                self._move(Move(State.ERROR, f"internal error: {type(exc).__name__}: {exc}"), check=False)
            raise
        finally:
            self.stop.end()
            await self.setup.meters.usage.settle(0)  # nothing stopped may go unbooked (normally none is left)
            await self._finalize()
        return self.trace

    def _decide(self, event: Event, spec: NextCycle | None = None) -> Next:
        """The decision on `event`, from the run's state now (with the cycle under way, `spec`)."""
        return decide(self._run_state(spec, None), event)

    # ---- one cycle --------------------------------------------------------------------------

    def _spec(self, start: StartCycle) -> NextCycle:
        """What crosses into the cycle `start` calls for (for a resumed run's interrupted cycle: what
        crossed into it then)."""
        task = self.setup.opening.task_message
        spec = next_cycle(
            start.kind,
            self.trace,
            self.rules.crew,
            task=task,
            seen=self.workspace,
            cap=self.limits.step_buffer_tokens,
            steps=self.rules.steps,
        )
        return again(spec, self._interrupted, task) if self._interrupted is not None else spec

    async def _cycle(self, start: StartCycle) -> None:
        """Open the cycle `start` calls for, run its phases as the decision says, and record its end."""
        spec = self._spec(start)
        interrupted, self._interrupted = self._interrupted, None
        cycle = self._open(spec, start.phase.role, interrupted)
        box = FailureBox(admit=self.ledger.admits)
        finals: list[tuple[str, str]] = list(spec.carried)
        self.crew.contexts.record(TASK_SOURCE, spec.packet)
        review: PlanRecord | None = None
        phase: PhaseRun | None = None
        nxt: Next = start.phase
        with self.stop.cycle(box):
            while not isinstance(nxt, EndCycle):
                if isinstance(nxt, AskAgain):
                    assert phase is not None
                    phase.ask(nxt.request, nxt.error)
                elif isinstance(nxt, RunPhase):
                    self._make(nxt.moves)
                    brief: list[LLMMessage] | None = None
                    if nxt.review:  # step mode's final review: the task's criteria over the whole workspace
                        assert cycle.plan is not None
                        text, review = final_review_brief(spec.packet, cycle.plan)
                        brief = [UserMessage(content=text, source=TASK_SOURCE)]
                    phase = self._phase(nxt.role, spec, tuple(finals), cycle, box, brief, review)
                else:
                    assert isinstance(nxt, RunSteps), nxt
                    self._make(nxt.moves)
                    assert cycle.plan is not None
                    steps = Steps(
                        self.crew, cycle.plan, cycle, self._control, box, self.workspace,
                        lambda failing: self._run_state(spec, failing),
                        max_parallel=self.limits.max_parallel_steps, cap=self.limits.step_buffer_tokens,
                    )  # fmt: skip
                    nxt = self._decide(await steps.run(), spec)
                    continue
                assert phase is not None
                result = await phase.run()
                nxt = self._decide(result, spec)
                if isinstance(nxt, RunPhase | RunSteps) and nxt.plan is not None:
                    cycle.plan = nxt.plan  # in force at once: approvals read its outputs
                if isinstance(nxt, RunPhase | RunSteps):
                    # The plan crosses as PSE read it, rendered: what it enforces, and the very text a revise
                    # cycle sends again (a prefix a provider's cache can serve), never the Planner's prose.
                    shown = render_plan(nxt.plan) if nxt.plan is not None else result.said
                    finals.append((result.role, shown))
            self._make(nxt.moves)
        if self.stop.suspended:
            return  # the trace stays as it was saved when the call was held
        # Calls the cycle's stop cut while their provider answered: booked in full if the answer comes
        # within SETTLE_S (served tokens all count, the reply a late message), else as estimates.
        await self.setup.meters.usage.settle()
        cycle.messages += self.ledger.late_messages(cycle)
        cycle.ended_at = utc_now()
        self._end(cycle, nxt, review)
        self._note_positions()
        if not self.machine.terminal:
            self._save()  # a cycle that ended the run is saved once, with its outcome, by `_finalize`

    def _run_state(self, spec: NextCycle | None, failing: str | None) -> RunState:
        kind, packet = (spec.kind, spec.spec) if spec is not None else (None, "")
        return RunState(self.trace, self.rules, kind, packet, failing)

    def _open(self, spec: NextCycle, first: str, interrupted: CycleRecord | None) -> CycleRecord:
        """The cycle's record, filed and announced."""
        storage = self.setup.storage
        cycle = CycleRecord(
            index=len(self.trace.cycles) + 1,
            kind=spec.kind,
            first_speaker=first,
            started_at=interrupted.started_at if interrupted is not None else utc_now(),
            step_buffer=spec.step_buffer,
            step_buffer_tokens=count_tokens(spec.step_buffer) if spec.step_buffer else 0,
            plan=self.trace.plan if spec.kind == "revise" else None,
            positions_at_start=(
                interrupted.positions_at_start
                if interrupted is not None
                else storage.positions()
                if storage.positions is not None
                else {}
            ),
            transitions_at_start=len(self.trace.transitions),
            tokens={r: count.model_copy() for r, count in interrupted.tokens.items()} if interrupted else {},
        )
        self.trace.cycles.append(cycle)
        self.events.cycle = cycle
        self.ledger.begin(cycle)
        self.events.emit(
            CycleStarted(
                run_id=self.trace.run_id,
                at=cycle.started_at,
                cycle=cycle.index,
                cycle_kind=cycle.kind,
                first_speaker=first,
            )
        )
        if cycle.index == 1:
            for query, results in self.setup.opening.injected_retrievals:
                self.events.retrieval(query, results)
        self.setup.tools.new_cycle()
        return cycle

    def _phase(
        self,
        role: str,
        spec: NextCycle,
        finals: tuple[tuple[str, str], ...],
        cycle: CycleRecord,
        box: FailureBox,
        brief: list[LLMMessage] | None,
        review: PlanRecord | None,
    ) -> PhaseRun:
        """`role`'s phase of the cycle, its context opened with what the cycle gives it (or `brief`)."""
        crew, turns = self.crew, self.crew.turns_per_cycle
        setup = crew.roles[role]
        if brief is None:
            plan = cycle.plan
            brief = crew.contexts.opening(
                role, spec.opening(role, finals, plan, setup.system_message, self.workspace)
            )
            # Each phase leaves the phases after it room to end with their finals (`FINAL_TURNS` each),
            # but keeps that much itself where the cycle has it: a Specialist that wrote the same file
            # until the cap left its right module unjudged (held-out roman).
            later = [p.role for p in self.rules.crew.phases_for(spec.kind)]
            keep = FINAL_TURNS * (len(later) - later.index(role) - 1 if role in later else 0)
            cap = f"turn cap: {turns} turns in one cycle (PSE_TURNS_PER_CYCLE)"
            cap += f", {keep} of them kept for the phases after the {role}'s" if keep else ""
            left = lambda: min(turns - cycle.turns, max(FINAL_TURNS, turns - cycle.turns - keep))  # noqa: E731
        else:
            cap = f"turn cap: {turns} turns in the final review"
            left = lambda: turns  # noqa: E731

        def look(who: str, final: Final) -> Seen:
            return self.workspace.seen(who, final, review or cycle.plan or self.trace.plan, cycle.tool_calls)

        seat = Seat(role, setup, crew.tool_agent, crew.contexts, left, cap)
        return PhaseRun(seat, brief, cycle, self._control, box, look, questions=self.rules.questions)

    # ---- a cycle's end ----------------------------------------------------------------------------

    def _end(self, cycle: CycleRecord, end: EndCycle, review: PlanRecord | None) -> None:
        """Record what the cycle came to (its gates evaluated over its review), announce it, then make the
        decision's move."""
        cycle.verdict, cycle.review_error, cycle.blocked = end.verdict, end.review_error, end.blocked
        cycle.stopped, cycle.clarification = end.stopped, end.clarification
        if cycle.plan is not None:
            self.trace.plan = cycle.plan
        cycle.gate = self.workspace.gate(cycle.verdict, review or self.trace.plan, cycle.tool_calls)
        cycle.result, cycle.result_reason = end.result, end.reason
        self.events.emit(
            VerdictEvent(
                run_id=self.trace.run_id,
                at=cycle.ended_at or utc_now(),
                cycle=cycle.index,
                verdict=cycle.verdict,
                gate=cycle.gate,
                error=cycle.review_error,
                stopped=cycle.stopped,
                result=cycle.result,
                result_reason=cycle.result_reason,
            )
        )
        if end.then.counters is not None:
            self.trace.counters = end.then.counters
        self._move(end.then)

    def _make(self, moves: Sequence[Move]) -> None:
        for move in moves:
            self._move(move)

    def _move(self, move: Move, *, check: bool = True) -> None:
        self.machine.move(move.state, move.reason, check=check)
        self.trace.state = move.state.value
        if self.machine.terminal or move.state == State.BLOCKED:
            self.trace.outcome_reason = move.reason

    # ---- the trace ------------------------------------------------------------------------------

    def _save(self) -> None:
        storage = self.setup.storage
        self.trace.state = self.machine.state.value
        path = write_trace(self.trace, storage.run_dir)
        if storage.index is not None:
            storage.index(self.trace, path)

    def _note_positions(self) -> None:
        """The cassette positions of now into the trace (scripted runs): a resumed run goes on from there."""
        if self.setup.storage.positions is not None:
            self.trace.cassette_positions = self.setup.storage.positions()

    def _save_held(self) -> None:
        """Save in the middle of a cycle (a call held or decided): with the cassette positions of now,
        which a resumed run goes on from once it has answered this cycle's recorded turns."""
        self._note_positions()
        self._save()

    async def _finalize(self) -> None:
        trace = self.trace
        if self.stop.suspended:
            return  # on disk: the trace of the moment the call was held
        try:
            if self.machine.terminal:
                trace.outcome = OUTCOME_OF[self.machine.state]  # type: ignore[assignment]
                trace.ended_at = utc_now()
                if self.machine.state == State.ESCALATED:
                    escalation = write_escalation(trace, self.setup.storage.run_dir, self.setup.workspace)
                    trace.escalation = str(escalation)
                if self.setup.conclude is not None:  # before the announcement: the outcome comes with it
                    await asyncio.to_thread(self.setup.conclude, trace)
                self.events.emit(outcome_event(trace))
        finally:
            self._save()  # the last cycle's only save too: whatever fails above, the trace is on disk
