"""The loop engine: plain code that runs cycles, applies the hard gates and the retry rules, keeps budgets,
and writes the trace. No model decides routing, retries or permissions.

The engine decides, the cycle runs: `next_cycle` turns the run's state into a `NextCycle`, `run_cycle`
runs its phases and returns a `CycleOutcome`, and `_apply` judges it (gates, then the state table by the
retry rules of `_retries`: PASS, revise, re-plan, escalate, or stop). Tokens and cost live in one
`Ledger`; every event goes through one sink (`RunEvents`); the state moves only through the
`StateMachine`; why the run stops is its one `RunStop`'s.

Error rule: a model's mistake is an observation (a denied or malformed tool call, answered by the
ToolAgent) or, for a missing/duplicated/malformed plan or verdict, an ERROR of the review recorded in
the trace; infrastructure failure (`RunFailure`) ends the run as ERROR without using a retry; a bug in
our code is recorded as ERROR and then propagates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path

from pse.engine._crew import Crew, CycleOutcome, NextCycle, RunControl, StepWiring
from pse.engine._cycle import run_cycle
from pse.engine._escalation import names_a_test, write_escalation
from pse.engine._gates import GatePolicy, evaluate_gates, evidence_owed
from pse.engine._judge import decide
from pse.engine._ledger import Ledger
from pse.engine._lock import holding_run
from pse.engine._next_cycle import answers_for_questions, next_cycle
from pse.engine._nudges import outputs_note, unparsed_outputs
from pse.engine._retries import after_review, after_step_failure
from pse.engine._setup import RunSetup
from pse.engine._state import OUTCOME_OF, State, StateMachine
from pse.engine._steps import kept_steps
from pse.engine._stop import CycleStop, RunStop
from pse.events import (
    CycleStarted,
    GateRecord,
    PlanRecord,
    ToolCallRecord,
    VerdictEvent,
    VerdictRecord,
    utc_now,
)
from pse.team import HistoryContexts, ScopedContexts
from pse.tokens import count_tokens
from pse.trace import CycleRecord, Trace, outcome_event, write_trace

__all__ = ["Engine", "interrupted_cycle"]


def _missing(workspace: Path, paths: Sequence[str]) -> list[str]:
    """The workspace paths of `paths` that are no file (a Specialist reporting too early)."""
    return [path for path in paths if not (workspace / path).is_file()]


def interrupted_cycle(trace: Trace) -> CycleRecord | None:
    """The cycle a run stopped in the middle of, if it did: saved while a tool call was held for a
    person, never ended. A resumed run runs it again, answering what it recorded from the trace."""
    last = trace.cycles[-1] if trace.cycles else None
    if trace.outcome is None and last is not None and last.ended_at is None:
        return last
    return None


class Engine:
    """Runs one PSE run to its outcome. Build one per run; `run()` may be called once.

    Args:
        setup: the run's wiring (roles, ToolAgent, workspace, limits, event sink).
        trace: a trace to go on from (resume); None starts a new run.
    """

    def __init__(self, setup: RunSetup, trace: Trace | None = None) -> None:
        self.setup = setup
        self.limits = setup.limits
        self._resuming = trace is not None
        self._interrupted = interrupted_cycle(trace) if trace is not None else None
        if trace is not None and self._interrupted is not None:
            # Back to where the interrupted cycle began; it runs again, answered from its record.
            trace.cycles.pop()
            del trace.transitions[self._interrupted.transitions_at_start or 0 :]
            trace.state = trace.transitions[-1].to if trace.transitions else State.START.value
        opening, team = setup.opening, setup.team
        self.trace = trace or Trace(
            run_id=opening.run_id,
            task=opening.task,
            started_at=utc_now(),
            settings=dict(opening.recorded_settings),
            inputs=dict(opening.inputs),
            tags=dict(opening.tags),
            context_mode=team.context_mode,
            task_message=opening.task_message,
        )
        if opening.sandbox is not None:
            self.trace.sandbox = opening.sandbox  # a resumed run records the sandbox it goes on under
        self.events = setup.events
        self.machine = StateMachine(
            self.trace.run_id, self.trace.transitions, State(self.trace.state), self.events.emit
        )
        self.ledger = Ledger(self.trace, self.limits, setup.meters.price)
        setup.meters.usage.attach(self.ledger.record_call)
        setup.meters.prefixes.attach(self.ledger.record_prefix)
        # The history baseline is only another way to open the roles' contexts: one factory per run.
        contexts = HistoryContexts() if team.context_mode == "history" else ScopedContexts()
        s = self.limits
        self.steps = (
            StepWiring(
                role=team.steps.role,
                tool_agent=team.steps.tool_agent,
                gate=self._step_gate,
                workspace=setup.workspace,
                max_retries=s.max_step_retries,
                parallel=s.max_parallel_steps,
                max_steps=s.max_steps,
                step_buffer_tokens=s.step_buffer_tokens,
            )
            if team.steps is not None
            else None
        )
        self.crew = Crew(
            {r.name: r for r in team.roles},
            team.tool_agent,
            contexts,
            s.turns_per_cycle,
            s.format_retries,
            questions=team.planner_questions,
            steps=self.steps,
            missing=functools.partial(_missing, setup.workspace),
            broken=functools.partial(unparsed_outputs, setup.workspace),
            finds_test=functools.partial(names_a_test, setup.workspace),
            owed=functools.partial(evidence_owed, policy=setup.gates) if setup.gates.enforced else None,
            conflicts=team.given_tests,
            shown=functools.partial(outputs_note, setup.workspace),
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
            while not self.machine.terminal and not self.stop.suspended:
                if self.machine.state == State.BLOCKED:
                    self._move(State.ESCALATED, "blocked: a person must decide")
                    break
                if self.machine.state == State.AWAITING_ANSWER and answers_for_questions(self.trace) is None:
                    break  # it waits, durably: `pse answer RUN_ID --text …` resumes it
                stopped = self.stop.before_cycle()
                if stopped is not None:
                    self._end_with(stopped)
                    break
                await self._one_cycle()
        except BaseException as exc:
            if not self.machine.terminal:
                self._move(State.ERROR, f"internal error: {type(exc).__name__}: {exc}", check=False)
            raise
        finally:
            self.stop.end()
            await self.setup.meters.usage.settle(0)  # nothing stopped may go unbooked (normally none is left)
            await self._finalize()
        return self.trace

    # ---- one cycle --------------------------------------------------------------------------

    def _next(self) -> NextCycle:
        """The cycle the current state calls for, and what crosses into it."""
        return next_cycle(
            self.machine.state,
            self.trace,
            task=self.setup.opening.task_message,
            speakers=self.setup.team.crew.speakers,
            workspace=self.setup.workspace,
            cap=self.limits.step_buffer_tokens,
            steps=self.steps,
        )

    async def _one_cycle(self) -> None:
        if self.steps is not None:
            self.steps.kept = kept_steps(self.trace.cycles)
        spec = self._next()
        again, self._interrupted = self._interrupted, None
        if again is not None and again.step_buffer is not None:  # what crossed into it, as it crossed
            spec = dataclasses.replace(
                spec,
                packet=f"{self.setup.opening.task_message}\n\n{again.step_buffer}",
                step_buffer=again.step_buffer,
                # a revise's note is its step_buffer; a re-plan's is what the last cycle left
                notes={role: again.step_buffer for role in spec.notes}
                if spec.kind == "revise"
                else spec.notes,
            )
        cycle = CycleRecord(
            index=len(self.trace.cycles) + 1,
            kind=spec.kind,
            first_speaker=spec.roles[0],
            started_at=again.started_at if again is not None else utc_now(),
            step_buffer=spec.step_buffer,
            step_buffer_tokens=count_tokens(spec.step_buffer) if spec.step_buffer else 0,
            plan=self.trace.plan if spec.kind == "revise" else None,
            positions_at_start=(
                again.positions_at_start
                if again is not None
                else self.setup.storage.positions()
                if self.setup.storage.positions is not None
                else {}
            ),
            transitions_at_start=len(self.trace.transitions),
            tokens={role: count.model_copy() for role, count in again.tokens.items()} if again else {},
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
                first_speaker=spec.roles[0],
            )
        )
        if cycle.index == 1:
            for query, results in self.setup.opening.injected_retrievals:
                self.events.retrieval(query, results)
        self.setup.tools.new_cycle()
        outcome = await run_cycle(self.crew, spec, cycle, self._control)
        if self.stop.suspended:
            return  # the trace stays as it was saved when the call was held
        # Calls the cycle's stop cut while their provider answered: booked in full if the answer comes
        # within SETTLE_S (served tokens all count, the reply a late message), else as estimates.
        await self.setup.meters.usage.settle()
        cycle.messages += self.ledger.late_messages(cycle)
        cycle.ended_at = utc_now()
        self._apply(cycle, outcome)
        self._note_positions()
        if not self.machine.terminal:
            self._save()  # a cycle that ended the run is saved once, with its outcome, by `_finalize`

    # ---- decisions ----------------------------------------------------------------------------

    def _apply(self, cycle: CycleRecord, outcome: CycleOutcome) -> None:
        """What the cycle came to: its gates, the one decision of its result (`decide`), announced, then
        the state table's move."""
        cycle.plan = outcome.plan or cycle.plan
        cycle.verdict, cycle.review_error, cycle.blocked = (
            outcome.verdict,
            outcome.review_error,
            outcome.blocked,
        )
        cycle.stopped = outcome.stop.reason if outcome.stop is not None else None
        if outcome.plan is not None:
            self.trace.plan = outcome.plan
        cycle.gate = evaluate_gates(
            verdict=cycle.verdict,
            plan=outcome.review_plan or self.trace.plan,
            tool_calls=cycle.tool_calls,
            policy=self.setup.gates,
            workspace=self.setup.workspace,
            role_written_config=self.setup.tools.role_written_config(),
        )
        # A crew that reviews itself has no Evaluator for the gates to hold to account: its verdict is its
        # claim.
        cycle.gate.enforced = self.setup.gates.enforced and self.setup.team.crew.hard_gates_apply
        decided = decide(outcome, cycle.gate)
        cycle.result, cycle.result_reason = decided.result, decided.reason
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
        if outcome.stop is not None:
            self._end_with(outcome.stop)
        elif outcome.clarification is not None:
            cycle.clarification = outcome.clarification
            self._move(State.AWAITING_ANSWER, f"{cycle.result_reason}: a person answers (pse answer --text)")
        elif outcome.step_failure is not None:
            self._move(*after_step_failure(cycle.result_reason, self.trace, self.limits))
        elif cycle.blocked is not None:
            self._move(State.BLOCKED, cycle.result_reason)
        elif cycle.verdict is None:
            self._end_with(CycleStop("ERROR", cycle.result_reason))
        else:
            self._move(*after_review(cycle, self.trace, self.limits, self.setup.team.crew))

    def _step_gate(
        self, verdict: VerdictRecord | None, plan: PlanRecord, tool_calls: Sequence[ToolCallRecord]
    ) -> GateRecord:
        """One step's hard gates: its outputs exist, its criteria are covered and met (no task checks)."""
        return evaluate_gates(
            verdict=verdict,
            plan=plan,
            tool_calls=tool_calls,
            policy=GatePolicy(check_config=self.setup.gates.check_config),
            workspace=self.setup.workspace,
            role_written_config=self.setup.tools.role_written_config(),
        )

    def _end_with(self, stop: CycleStop) -> None:
        self._move(State.TIMEOUT if stop.outcome == "TIMEOUT" else State.ERROR, stop.reason)

    def _move(self, target: State, reason: str, *, check: bool = True) -> None:
        self.machine.move(target, reason, check=check)
        self.trace.state = target.value
        if self.machine.terminal or target == State.BLOCKED:
            self.trace.outcome_reason = reason

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
