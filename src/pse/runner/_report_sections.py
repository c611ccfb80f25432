"""What a run's report.md says besides the Specialist's words: the criteria as last judged, the findings,
and where the delivered files are (the workspace, and for a repository run its branch, commit and patch).

Built from the trace alone, so the report tells what the trace holds; the Specialist's own report follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pse.trace import Trace

__all__ = ["report_sections"]

_LISTED_FILES = 20


def _criteria(trace: Trace) -> list[str]:
    """Each criterion of the plan, with the last verdict's word on it (`✓` met, `✗` not, `?` not judged)."""
    plan = trace.plan
    if plan is None:
        return []
    verdict = next((c.verdict for c in reversed(trace.cycles) if c.verdict is not None), None)
    judged = {c.id: c for c in verdict.criteria} if verdict is not None else {}
    lines = []
    for criterion in plan.criteria:
        found = judged.get(criterion.id)
        mark = "?" if found is None else "✓" if found.met else "✗"
        said = f" — {' '.join(found.finding.split())}" if found is not None and found.finding.strip() else ""
        lines.append(f"{mark} {criterion.id}: {' '.join(criterion.text.split())}{said}")
    return lines


def _findings(trace: Trace) -> list[str]:
    verdict = next((c.verdict for c in reversed(trace.cycles) if c.verdict is not None), None)
    return [f.describe() for f in verdict.findings] if verdict is not None else []


def _delivered(trace: Trace, workspace: Path, outputs: Sequence[str]) -> list[str]:
    """Where the files are: the workspace (the outputs in it), and a repository run's branch and patch."""
    present = [p for p in outputs if (workspace / p).is_file()]
    shown = ", ".join(present[:_LISTED_FILES]) + (
        f" and {len(present) - _LISTED_FILES} more" if len(present) > _LISTED_FILES else ""
    )
    lines = [f"the workspace: {workspace}" + (f" ({shown})" if shown else "")]
    repository = trace.repository
    if repository is not None:
        if repository.commit is not None:
            lines.append(
                f"the commit {repository.commit[:12]} on branch {repository.branch} of {repository.path} "
                f"(`git -C {repository.path} show {repository.branch}`)"
            )
        if repository.patch is not None:
            lines.append(f"change.patch: {repository.patch}")
    return lines


def report_sections(trace: Trace, workspace: Path, outputs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The report's sections of PSE's own: (heading, bullet lines) each; an empty one is left out."""
    plan_outputs = list(trace.plan.outputs) if trace.plan is not None else []
    files = list(dict.fromkeys([*outputs, *plan_outputs]))
    return [
        ("Criteria", _criteria(trace)),
        ("Findings", _findings(trace)),
        ("Delivered files", _delivered(trace, workspace.resolve(), files)),
    ]
