"""What a request's messages tell a role, read back with PSE's own parsers: the plan it is sent (its
criteria, its outputs) and what its instructions offer (a conflict's way out, findings). The grammar
(`_grammar`) and the schemas (`_schema`) are built from it (`models._turn_shape`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pse.events import PlanRecord
from pse.exceptions import ProtocolError
from pse.protocol._tags import parse_plan

__all__ = [
    "CONFLICT_OFFERED",
    "FINDINGS_ASKED",
    "asks_findings",
    "last_plan",
    "offers_conflict",
    "plan_criteria",
    "plan_outputs",
]

FINDINGS_ASKED = '<finding id="FINDING_ID" severity="SEVERITY"'
"""The line of `prompts/findings.md` that tells an Evaluator of findings (a repository run's): an
Evaluator whose instructions hold it may name findings under the grammar and the schemas."""

CONFLICT_OFFERED = "## Tests the task gave"
"""The heading of `prompts/spec_conflict.md`: a role whose instructions hold it may end with a conflict."""


def last_plan(texts: Iterable[str]) -> PlanRecord | None:
    """The last plan in `texts` (a request's messages, in order), or None.

    The Evaluator is sent the plan it judges (as the Planner's final message, or in its brief on a
    revise cycle); reading it back with `parse_plan` needs no hook in the engine. Texts that hold no
    valid plan are skipped; tool results never count (`parse_plan` strips them).
    """
    for text in reversed(list(texts)):
        if "<plan" not in text:
            continue
        try:
            return parse_plan(text)
        except ProtocolError:
            continue
    return None


def plan_criteria(texts: Iterable[str]) -> tuple[str, ...] | None:
    """The criterion ids of the last plan in `texts` (`last_plan`), or None."""
    plan = last_plan(texts)
    return tuple(c.id for c in plan.criteria) if plan is not None else None


def plan_outputs(texts: Iterable[str]) -> tuple[str, ...] | None:
    """The output paths of the last plan in `texts` (`last_plan`), or None."""
    plan = last_plan(texts)
    return tuple(plan.outputs) if plan is not None else None


def offers_conflict(texts: Iterable[str]) -> bool:
    """Whether a request's messages (its system message first) tell the role of tests the task gave,
    and so of the `SPEC_CONFLICT` way out (`prompts/spec_conflict.md`)."""
    return any(CONFLICT_OFFERED in text for text in texts)


def asks_findings(texts: Iterable[str]) -> bool:
    """Whether a request's messages (its system message first) tell the role of findings."""
    return any(FINDINGS_ASKED in text for text in texts)
