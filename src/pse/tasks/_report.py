"""Final report extraction: the deliverable a task names, as the text of the run's `report.md`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pse.sandbox import read_inside
from pse.tasks._task import Task

__all__ = ["MAX_REPORT_BYTES", "extract_report", "titled_report"]

MAX_REPORT_BYTES = 4_000_000
"""Largest report file taken from the workspace."""


def extract_report(task: Task, workspace: Path, last_specialist_message: str | None) -> str | None:
    """The run's report per the task's `[report]` spec, or None when there is none to take.

    `report.file` reads that workspace file (None when missing, empty, or reached through a symlink).
    `report.tag` takes the text between the last `<tag>` and `</tag>` of the Specialist's last report
    (None when absent or empty). A task without `[report]` has no report.
    """
    spec = task.config.report
    if spec is None:
        return None
    if spec.file is not None:
        data = read_inside(workspace, spec.file, MAX_REPORT_BYTES)  # never through a symlink, never a FIFO
        text = data.decode("utf-8", errors="replace").strip() if data is not None else ""
        return text + "\n" if text else None
    if not last_specialist_message or spec.tag is None:
        return None
    tag = re.escape(spec.tag)
    matches: list[str] = re.findall(
        rf"<{tag}>(.*?)</{tag}>", last_specialist_message, flags=re.DOTALL | re.IGNORECASE
    )
    if not matches or not matches[-1].strip():
        return None
    return matches[-1].strip() + "\n"


def titled_report(
    report: str,
    *,
    task: str,
    run_id: str,
    outcome: str,
    reason: str,
    why: str,
    sections: Sequence[tuple[str, Sequence[str]]] = (),
) -> str:
    """A report taken from the Specialist's message (`report.tag`) as a document that says what it is:
    a title with the task and the run's outcome, the run, its reason and why it ended so (the causal
    line), PSE's own `sections` (heading, bullet lines: the criteria as judged, the findings, where the
    delivered files are; an empty one is left out), then the Specialist's words under a heading of their
    own. A `report.file` is a deliverable and stays as the role wrote it.

    Example:
        # code-delivery: PASSED

        - run: `20261203-114511-code-delivery-c17c05`
        - outcome: PASSED — PASS (ALL_MET); every hard gate passed
        - why: cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: …

        ## The Specialist's last report

        Artifacts: quicksort.py (revised), …
    """
    lines = [f"# {task}: {outcome}", "", f"- run: `{run_id}`"]
    lines.append(f"- outcome: {outcome}" + (f" — {' '.join(reason.split())}" if reason.strip() else ""))
    if why:
        lines.append(f"- why: {why}")
    for heading, items in sections:
        if items:
            lines += ["", f"## {heading}", "", *(f"- {item}" for item in items)]
    return "\n".join([*lines, "", "## The Specialist's last report", "", report.strip(), ""])
