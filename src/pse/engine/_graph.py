"""The plan as a graph (`execution = "steps"`): its checks, and what a step is made of.

A steps plan binds every criterion to a step (`<criterion id="AC3" step="S2">`) or to the whole task
(no `step`), binds outputs to the step that writes them (`<output path="…" step="S2"/>`), and names
each step's dependencies (`<step id="S2" depends_on="S1">`). `graph_problem` says what is wrong with
one, in words the Planner can act on (the engine sends them back through the format repair).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pse.events import PlanItem, PlanRecord

__all__ = ["StepSpec", "graph_problem", "step_specs", "task_criteria"]


@dataclass(frozen=True)
class StepSpec:
    """One step of a steps plan: its text, dependencies, criteria and outputs."""

    id: str
    text: str
    depends_on: tuple[str, ...]
    criteria: tuple[PlanItem, ...]
    outputs: tuple[str, ...]

    def same_as(self, other: StepSpec) -> bool:
        """Unchanged (text, dependencies, criteria, outputs): what a re-plan must keep of a passed step."""
        return (self.text, self.depends_on, self.criteria, self.outputs) == (
            other.text,
            other.depends_on,
            other.criteria,
            other.outputs,
        )


def step_specs(plan: PlanRecord) -> dict[str, StepSpec]:
    """The plan's steps by id, in plan order, each with its criteria and outputs."""
    return {
        s.id: StepSpec(
            id=s.id,
            text=s.text,
            depends_on=tuple(s.depends_on),
            criteria=tuple(c for c in plan.criteria if c.step == s.id),
            outputs=tuple(p for p in plan.outputs if plan.output_steps.get(p) == s.id),
        )
        for s in plan.steps
    }


def task_criteria(plan: PlanRecord) -> list[PlanItem]:
    """The criteria of the whole task (bound to no step): what the final review judges; when the plan
    has none, every criterion (the final review then checks the whole workspace against all of them)."""
    unbound = [c for c in plan.criteria if c.step is None]
    return unbound or list(plan.criteria)


def graph_problem(plan: PlanRecord, max_steps: int, kept: Mapping[str, StepSpec] | None = None) -> str | None:
    """What is wrong with a steps plan, or None. `kept`: steps that passed before a re-plan, which the
    new plan must hold unchanged (they do not run again)."""
    ids = [s.id for s in plan.steps]
    if not ids:
        return 'execution = "steps" needs <step id="S1" depends_on="…"> entries; the plan has none'
    if len(ids) > max_steps:
        return f"the plan has {len(ids)} steps; at most {max_steps} (PSE_MAX_STEPS): merge small steps"
    known = set(ids)
    for s in plan.steps:
        unknown = [d for d in s.depends_on if d not in known]
        if unknown:
            return f'step {s.id} depends_on {", ".join(unknown)}, which no <step id="…"> declares'
        if s.id in s.depends_on:
            return f"step {s.id} depends on itself"
    cycle = _cycle(plan.steps)
    if cycle:
        return f"the steps {' → '.join(cycle)} depend on each other in a cycle: one must come first"
    for c in plan.criteria:
        if c.step is not None and c.step not in known:
            return f'criterion {c.id} is bound to step="{c.step}", which no <step id="…"> declares'
    for path, step in plan.output_steps.items():
        if step not in known:
            return f'output {path} is bound to step="{step}", which no <step id="…"> declares'
    judged = {c.step for c in plan.criteria}
    bare = [i for i in ids if i not in judged]
    if bare:
        fix = f'add <criterion id="…" step="{bare[0]}">'
        return f"step {bare[0]} has no criterion: {fix}; every step is reviewed"
    specs = step_specs(plan)
    for step_id, before in (kept or {}).items():
        now = specs.get(step_id)
        if now is None or not now.same_as(before):
            return (
                f"step {step_id} passed already: keep it exactly as it was (its text, depends_on, criteria "
                "and outputs), so it does not run again; re-plan only the steps that have not passed"
            )
    return None


def _cycle(steps: list[PlanItem]) -> list[str]:
    """One dependency cycle among the steps (its ids, the first repeated at the end), or []."""
    needs = {s.id: list(s.depends_on) for s in steps}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in needs.get(node, []):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for s in steps:
        if state.get(s.id) is None and (found := visit(s.id)):
            return found
    return []
