"""The next cycle: what the run's state calls for (its kind, its phases) and what crosses into it."""

from __future__ import annotations

from pathlib import Path

from pse.engine._crew import CycleKind, NextCycle, StepWiring
from pse.engine._cycle import phase_order
from pse.engine._state import State
from pse.engine._step_buffer import artifact_list, check_problems, left_behind, replan_packet, revise_packet
from pse.protocol import render_plan
from pse.roles import Role
from pse.trace import Trace

__all__ = ["answers_for_questions", "next_cycle"]


def next_cycle(
    state: State,
    trace: Trace,
    *,
    task: str,
    speakers: tuple[str, ...],
    workspace: Path,
    cap: int,
    steps: StepWiring | None,
) -> NextCycle:
    """The cycle `state` calls for, and what crosses into it (the step_buffer, capped at `cap` tokens).

    Args:
        state: the run's state now.
        trace: the run so far (its plan, its last cycle, a person's answers).
        task: the task message.
        speakers: the crew's speakers, in order (a first cycle has every one).
        workspace: the run's workspace (its artifact list crosses).
        cap: PSE_STEP_BUFFER_TOKENS.
        steps: step mode's wiring (the steps that passed stay in a re-plan), None in task mode.
    """
    plan = trace.plan
    last = trace.cycles[-1] if trace.cycles else None
    index = len(trace.cycles) + 1
    note = _answered_note(trace)
    if state == State.REVISING and plan is not None and last is not None:
        buffer = note + revise_packet(
            cycle=index,
            plan=plan,
            verdict=last.verdict,
            gate=last.gate,
            artifacts=artifact_list(workspace),
            cap=cap,
            failing=check_problems(last.tool_calls),
        )
        # Scoped contexts open as the first cycle's did (task, then the plan as the Planner's),
        # and only then the step_buffer: all before it is a prefix a provider's cache can serve.
        return NextCycle(
            "revise",
            phase_order(Role.SPECIALIST),
            f"{task}\n\n{buffer}",
            buffer,
            briefs={Role.SPECIALIST: task, Role.EVALUATOR: task},
            carried=((Role.PLANNER, render_plan(plan)),),
            notes={Role.SPECIALIST: buffer},
        )
    if state == State.REPLANNING and last is not None:
        buffer = note + replan_packet(
            cycle=index, reason=last.result_reason, verdict=last.verdict, plan=plan, cap=cap
        )
        if steps is not None and steps.kept:
            kept = "\n".join(
                f"- {s.id}: {s.text} (outputs: {', '.join(s.outputs) or 'none'})" for s in steps.kept.values()
            )
            buffer += (
                "\n\n## Steps that passed (keep each exactly as it is: id, text, depends_on, criteria, "
                f"outputs; they do not run again)\n{kept}"
            )
        briefs: dict[str, str] = {Role.SPECIALIST: task, Role.EVALUATOR: task}
        left = left_behind(
            gate=last.gate,
            artifacts=artifact_list(workspace),
            failing=check_problems(last.tool_calls),
            cap=cap,
        )
        notes: dict[str, str] = {Role.SPECIALIST: left} if last.gate.failures and steps is None else {}
        return NextCycle(
            "replan", phase_order(Role.PLANNER), f"{task}\n\n{buffer}", buffer, briefs, notes=notes
        )
    if state == State.AWAITING_ANSWER:
        answered = answers_for_questions(trace)
        assert answered is not None  # the loop stops while the questions wait
        kind: CycleKind = "replan" if plan is not None else "initial"
        packet = f"{task}\n\n{answered}"
        return NextCycle(kind, phase_order(Role.PLANNER), packet, answered if kind == "replan" else None)
    return NextCycle("initial", speakers, task)  # a first cycle: every speaker, in order


def answers_for_questions(trace: Trace) -> str | None:
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


def _answered_note(trace: Trace) -> str:
    """A person's note, for the first cycle after their answer only (it leads the step_buffer)."""
    answer = trace.answers[-1] if trace.answers else None
    if answer is None or not answer.note or answer.after_cycle != len(trace.cycles):
        return ""
    return f"## A person's answer to the escalation ({answer.by})\n{answer.note.strip()}\n\n"
