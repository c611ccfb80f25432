"""One cycle: the phases of the roles, in order, each one role with the ToolAgent until its final message.

`run_cycle` runs them and returns a typed `CycleOutcome`: the plan, the verdict or the review error, a
`<blocked>`, or why the cycle was stopped (deadline, budget, cancellation, turn cap, infrastructure).
Each phase runs through the one role loop (`_role_loop.run_role`: format repair, stop handling), which
step mode uses too, and each final message is read once (`_finals`). Between phases the run's state
machine moves through its table (PLANNED → RUNNING → REVIEWING); what the outcome *means* (gates,
retries, escalation) is the engine's decision. Every message is recorded in the cycle, charged to the
ledger and announced as it arrives; tool records arrive pushed by the executor (see `RunEvents`).

Stopping is the run's `RunStop`'s: the cycle gives it its failure box, and it arms the deadline for the
cycle. A stop first closes the box (no model call starts any more) and cancels the cycle's token, and
only then does the phase close AutoGen's stream, which waits for the team to wind down: cancelling first
is what makes that wait short.
"""

from __future__ import annotations

from collections.abc import Sequence

from pse.engine._crew import Crew, CycleOutcome, NextCycle, RunControl
from pse.engine._finals import conclude, read_final
from pse.engine._nudges import (
    blocked_early,
    contradicted,
    fail_for_work,
    pass_early,
    to_write,
    unfounded_conflict,
    unparsed,
    unwritten,
)
from pse.engine._role_loop import RoleWork, run_role
from pse.engine._state import State
from pse.engine._steps import run_steps
from pse.engine._stop import CycleStop
from pse.events import ToolCallRecord
from pse.protocol import render_plan
from pse.roles import TASK_SOURCE, Role, role_spec
from pse.team import CycleOpening, FailureBox
from pse.trace import CycleRecord

__all__ = ["phase_order", "run_cycle"]


async def run_cycle(crew: Crew, spec: NextCycle, record: CycleRecord, run: RunControl) -> CycleOutcome:
    """Run the phases of `spec` in order, filling `record`; return what the cycle came to."""
    outcome = CycleOutcome()
    box = FailureBox(admit=run.ledger.admits)
    finals: list[tuple[str, str]] = list(spec.carried)
    crew.contexts.record(TASK_SOURCE, spec.packet)
    with run.stop.cycle(box):
        for role in spec.roles:
            if role == Role.SPECIALIST and crew.steps is not None and spec.kind != "revise":
                if outcome.plan is not None:
                    await run_steps(crew, crew.steps, spec, record, run, box, outcome)
                break
            for state, why in role_spec(role).enters:
                run.machine.enter(State(state), why)
            notes = spec.notes
            todo = (
                to_write(record.plan, spec.packet, spec.kind, _told(crew, role, spec.packet))
                if role == Role.SPECIALIST and spec.kind != "revise"
                else None
            )
            if todo is not None:  # the one thing a small model must not mistake for missing data
                notes = {**notes, role: "\n\n".join(filter(None, [notes.get(role), todo]))}
            shown = (
                crew.shown(record.plan.outputs)
                if role == Role.EVALUATOR and crew.shown is not None and record.plan is not None
                else None
            )
            if shown is not None:  # the evidence it judges, compact: no turn spent reading each output
                notes = {**notes, role: "\n\n".join(filter(None, [notes.get(role), shown]))}
            opening = crew.contexts.opening(
                role, CycleOpening(spec.packet, spec.briefs, tuple(finals), notes)
            )
            work = RoleWork(
                role,
                crew.roles[role],
                crew.tool_agent,
                crew.contexts,
                turns=lambda: crew.turns_per_cycle - record.turns,
                cap=f"turn cap: {crew.turns_per_cycle} turns in one cycle (PSE_TURNS_PER_CYCLE)",
            )

            def read(final: str, role: str = role) -> tuple[str | None, str | None]:
                problem = read_final(role, final, outcome, run, questions=crew.questions, steps=crew.steps)
                # A report before every output exists goes back once, and so does a block on missing data
                # while outputs are unwritten (what is missing may be the Specialist's own files); after
                # that the gates judge the report, and a block stands: the honest exit stays open.
                # Both at once when both hold: with one nudge each, the 1.5B model spent its two on the
                # missing test file and reported a solution.py that was only PROBLEM's docstring.
                early = (
                    " ".join(
                        filter(
                            None,
                            [
                                unparsed(crew.broken, record.plan),
                                unwritten(crew.missing, record.plan, _told(crew, role, spec.packet)),
                            ],
                        )
                    )
                    or None
                    if role == Role.SPECIALIST and problem is None
                    else None
                )
                if role == Role.EVALUATOR and problem is None:
                    early = (
                        pass_early(crew.owed, outcome.verdict, record.tool_calls)
                        or contradicted(outcome.verdict, _own(record, role), crew.conflicts)
                        or fail_for_work(outcome.verdict)
                    )
                if outcome.blocked is not None:
                    # A judge (it runs the checks) confirms a conflict by code: the test failed in its run.
                    judge = role_spec(role).final == "verdict"
                    early = blocked_early(early, outcome.blocked.reason_code) or unfounded_conflict(
                        crew.finds_test,
                        outcome.blocked,
                        role_spec(role).final,
                        spec.packet,
                        _own(record, role) if judge else None,
                    )
                record.plan = outcome.plan or record.plan  # in force at once: approvals read its outputs
                return problem, early

            result = await run_role(
                work,
                opening,
                read,
                retries=crew.format_retries,
                record=record,
                run=run,
                box=box,
                outcome=outcome,
            )
            if result is None:
                return _closed(outcome, box)
            if not conclude(role, result.final, result.problem, outcome):
                break
            # The plan crosses as PSE read it, rendered: what it enforces, and the very text a revise
            # cycle sends again (a prefix a provider's cache can serve), never the Planner's prose.
            shown = (
                render_plan(outcome.plan)
                if role == Role.PLANNER and outcome.plan is not None
                else result.final
            )
            finals.append((role, shown))
    return _closed(outcome, box)


def _own(record: CycleRecord, role: str) -> list[ToolCallRecord]:
    """The tool calls `role` made in the cycle: the evidence its final message may be held to."""
    return [call for call in record.tool_calls if call.requester == role]


def _told(crew: Crew, role: str, packet: str) -> tuple[str, ...]:
    """What `role` was told in words, the most specific first: its system message (whose general parts name
    no file: the prompts show placeholders only, so a sentence naming an output is the task's), then its
    task message."""
    return (crew.roles[role].system_message, packet)


def _closed(outcome: CycleOutcome, box: FailureBox) -> CycleOutcome:
    if box.failure is not None:
        outcome.stop = CycleStop("ERROR", f"{type(box.failure).__name__}: {box.failure}")
    return outcome


def phase_order(first: str) -> tuple[str, ...]:
    """The phases of a cycle that starts with `first`: always ending with the Evaluator's review."""
    order: Sequence[str] = (Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR)
    return tuple(order[order.index(first) :])
