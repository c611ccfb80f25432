"""What each phase's context opens with: a cycle's packet and briefs, the notes PSE adds, a step's briefs.

The decision says which cycle and which phase come next; this module says what their roles read. It is
generic over the crew: a cycle of a kind gives its roles what `roles.CrewSpec` describes (the packet, the
bare task after the first phase of a revise or a re-plan, the plan carried as its author's final), and a
role's spec says what PSE adds to its opening (`RoleSpec.notes`). Whatever crosses from one cycle to the
next is the step_buffer, built from structured data and capped (`_step_buffer`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pse.engine._decide import answered, kept_steps
from pse.engine._graph import StepSpec, task_criteria
from pse.engine._last_run import to_write_again
from pse.engine._said import quoted_for, to_write
from pse.engine._step_buffer import (
    artifact_list,
    check_problems,
    faults,
    fit_to_tokens,
    left_behind,
    replan_packet,
    revise_packet,
)
from pse.engine._workspace import Workspace
from pse.events import PlanRecord, StepAttemptRecord
from pse.protocol import render_plan
from pse.roles import CrewSpec, CycleKind, role_spec
from pse.team import CycleOpening
from pse.trace import CycleRecord, Trace

__all__ = [
    "NextCycle",
    "again",
    "final_review_brief",
    "next_cycle",
    "retry_buffer",
    "review_brief",
    "step_brief",
]


@dataclass(frozen=True)
class NextCycle:
    """What crosses into a cycle: its task message and what each of its roles reads first.

    Attributes:
        kind: initial, revise (after a PARTIAL) or replan (after a FAIL).
        packet: the task message of the cycle (the task, plus the step_buffer after the first cycle).
        step_buffer: what crossed from the previous cycle (None on the first).
        briefs: role → the text that replaces the packet in its context (the bare task on a revise).
        carried: final messages of an earlier cycle that still hold, placed before this cycle's own
            (the fixed plan on a revise, as the Planner's: the same text the first cycle's roles saw).
        notes: role → a message placed after the finals in its context (the step_buffer for the
            Specialist on a revise), so everything before it is a prefix an earlier prompt sent.
    """

    kind: CycleKind
    packet: str
    step_buffer: str | None = None
    briefs: Mapping[str, str] = field(default_factory=dict)
    carried: tuple[tuple[str, str], ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)
    task: str | None = None
    """The task's own words the packet holds (a person's answers included), without what crossed from the
    last cycle, which quotes roles and tools: what a SPEC_CONFLICT must quote. None: the whole packet."""

    @property
    def spec(self) -> str:
        """The text the cycle's specification is: `task`, or the packet where nothing crossed into it."""
        return self.packet if self.task is None else self.task

    def opening(
        self,
        role: str,
        finals: tuple[tuple[str, str], ...],
        plan: PlanRecord | None,
        told: str,
        seen: Workspace,
    ) -> CycleOpening:
        """What `role`'s phase opens with: the cycle's packet or its brief, the finals so far, and its notes
        (the step_buffer, then what PSE adds: `RoleSpec.notes`, from the plan in force)."""
        notes = [self.notes.get(role)]
        wants = role_spec(role).notes
        if "to_write" in wants and self.kind != "revise":  # the one thing a small model must not mistake
            notes.append(to_write(plan, self.packet, self.kind, (told, self.packet)))  # for missing data
        if "outputs" in wants and plan is not None:  # the evidence it judges, compact: no turn spent reading
            notes.append(seen.shown(plan.outputs))
        note = "\n\n".join(n for n in notes if n)
        return CycleOpening(
            self.packet, self.briefs, finals, {**self.notes, role: note} if note else self.notes
        )


def next_cycle(
    kind: CycleKind, trace: Trace, crew: CrewSpec, *, task: str, seen: Workspace, cap: int, steps: bool
) -> NextCycle:
    """What crosses into a cycle of `kind` (the step_buffer capped at `cap` tokens), for `crew`'s roles.

    Args:
        kind: the cycle's kind (the decision's `StartCycle`).
        trace: the run so far (its plan, its last cycle, a person's answers).
        task: the task message.
        seen: the run's workspace (its artifact list crosses).
        steps: the task runs in steps (the steps that passed stay in a re-plan).
    """
    plan, last = trace.plan, trace.cycles[-1] if trace.cycles else None
    index, note = len(trace.cycles) + 1, _answered_note(trace)
    asked = answered(trace) if kind != "revise" else None
    if asked is not None:  # the Planner's questions answered: it plans with the answer
        return NextCycle(kind, f"{task}\n\n{asked}", asked if kind == "replan" else None)
    if last is None or kind == "initial":
        return NextCycle("initial", task)  # a first cycle: every speaker, in order
    roles = [phase.role for phase in crew.phases_for(kind)]
    bare = {role: task for role in roles[1:]}  # the roles after the first read the bare task
    failing = check_problems(last.tool_calls, seen.text)
    if kind == "revise" and plan is not None:
        artifacts = artifact_list(seen.root)
        again = to_write_again(last.tool_calls, plan, lambda paths: quoted_for(paths, [task], plan))
        buffer = note + revise_packet(cycle=index, plan=plan, verdict=last.verdict, gate=last.gate,
                                      artifacts=artifacts, cap=cap, failing=failing,
                                      fault=faults(last.tool_calls, seen.text), again=again)  # fmt: skip
        # Scoped contexts open as the first cycle's did (task, then the plan as its author's final), and
        # only then the step_buffer: all before it is a prefix a provider's cache can serve.
        author = [r for r in crew.speakers if role_spec(r).final == "plan"]
        return NextCycle(
            "revise",
            f"{task}\n\n{buffer}",
            buffer,
            briefs={roles[0]: task, **bare},
            carried=tuple((r, render_plan(plan)) for r in author),
            notes={roles[0]: buffer},
            task=task,
        )
    buffer = note + replan_packet(
        cycle=index, reason=last.result_reason, verdict=last.verdict, plan=plan, cap=cap
    )
    if steps and (kept := kept_steps(trace.cycles)):
        buffer += _kept_note(kept)
    notes: dict[str, str] = {}
    if last.gate.failures and not steps:  # the workspace keeps the last cycle's files: what PSE found in them
        left = left_behind(gate=last.gate, artifacts=artifact_list(seen.root), failing=failing, cap=cap)
        notes = {r: left for r in roles if role_spec(r).final == "report"}
    return NextCycle("replan", f"{task}\n\n{buffer}", buffer, bare, notes=notes, task=task)


def _kept_note(kept: Mapping[str, StepSpec]) -> str:
    listed = "\n".join(
        f"- {s.id}: {s.text} (outputs: {', '.join(s.outputs) or 'none'})" for s in kept.values()
    )
    return (
        "\n\n## Steps that passed (keep each exactly as it is: id, text, depends_on, criteria, "
        f"outputs; they do not run again)\n{listed}"
    )


def _answered_note(trace: Trace) -> str:
    """A person's note, for the first cycle after their answer only (it leads the step_buffer)."""
    answer = trace.answers[-1] if trace.answers else None
    if answer is None or not answer.note or answer.after_cycle != len(trace.cycles):
        return ""
    return f"## A person's answer to the escalation ({answer.by})\n{answer.note.strip()}\n\n"


def again(spec: NextCycle, interrupted: CycleRecord, task: str) -> NextCycle:
    """The cycle a resumed run runs again: what crossed into it, as it crossed (its recorded step_buffer)."""
    if interrupted.step_buffer is None:
        return spec
    return NextCycle(
        spec.kind,
        f"{task}\n\n{interrupted.step_buffer}",
        interrupted.step_buffer,
        spec.briefs,
        spec.carried,
        # a revise's note is its step_buffer; a re-plan's is what the last cycle left
        {role: interrupted.step_buffer for role in spec.notes} if spec.kind == "revise" else spec.notes,
        task=spec.task,
    )


# ---- step mode ----------------------------------------------------------------------------------------


def step_brief(plan: PlanRecord, step: StepSpec, specs: Mapping[str, StepSpec], seen: Workspace) -> str:
    """A step's worker's opening: the goal, its step, criteria and outputs, what its dependencies made."""
    criteria = "\n".join(f"- {c.id}: {c.text}" for c in step.criteria)
    outputs = "\n".join(f"- {p}" for p in step.outputs) or "- (none: this step writes no file)"
    produced = []
    for dep in step.depends_on:
        paths = [p for p in specs[dep].outputs if (seen.root / p).is_file()] if dep in specs else []
        produced.append(f"- {dep}: {', '.join(paths) or '(no files)'}")
    before = "\n".join(produced) or "- (none: this step depends on no other)"
    return (
        f"## The goal\n{plan.goal}\n\n## Your step: {step.id}\n{step.text}\n\n"
        f"## Its acceptance criteria\n{criteria}\n\n"
        f"## Its outputs (the only files you may write)\n{outputs}\n\n"
        f"## What the steps it depends on produced (read them if you need to)\n{before}\n\n"
        "Do this step only, then end with your <report>."
    )


def review_brief(plan: PlanRecord, step: StepSpec, report: str) -> str:
    """A step's review's opening: the goal, the step, its criteria only, and the worker's report."""
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


def retry_buffer(step: StepSpec, last: StepAttemptRecord, seen: Workspace, cap: int) -> str:
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
        + f"\n## The workspace now\n{artifact_list(seen.root)}"
    )
    return fit_to_tokens(text, cap)


def final_review_brief(packet: str, plan: PlanRecord) -> tuple[str, PlanRecord]:
    """Step mode's final review: its opening, and the part of the plan it judges (the task's criteria
    over the whole workspace)."""
    criteria = task_criteria(plan)
    listed = "\n".join(f'<criterion id="{c.id}">{c.text}</criterion>' for c in criteria)
    brief = (
        f"{packet}\n\n## The plan\n{render_plan(plan)}\n\n## Every step passed its own review\n"
        + "\n".join(f"- {s.id}: {s.text}" for s in plan.steps)
        + "\n\n## The final review: judge these criteria over the whole workspace, with the task's checks\n"
        + listed
    )
    return brief, PlanRecord(goal=plan.goal, steps=plan.steps, criteria=criteria, outputs=plan.outputs)
