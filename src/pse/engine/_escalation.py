"""The escalation record: what a person needs when a run ends ESCALATED.

It lists the last artifacts, the last verdict, every criterion that ever failed with how many times
and its last finding, what passed, and any `<blocked>` reason: enough to decide without reading the
whole trace. Written as `escalation.json` (for tools) and `escalation.md` (for people).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pse.engine._step_buffer import artifact_list
from pse.trace import CycleRecord, Trace

__all__ = ["build_escalation", "criterion_failures", "criterion_over_cap", "write_escalation"]


def criterion_failures(cycles: Sequence[CycleRecord]) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Every failed finding of each criterion, by (id, text), in cycle order: [(cycle, finding), …].

    A criterion is its id *and* its text in the plan of that cycle: a re-plan that rewrites AC2 starts
    its count again, a re-plan that keeps it goes on counting (seed 001: the same criterion returned
    at most twice).
    """
    found: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for cycle in cycles:
        if cycle.verdict is None:
            continue
        text = {c.id: c.text for c in (cycle.plan.criteria if cycle.plan else [])}
        for crit in cycle.verdict.criteria:
            if not crit.met:
                found.setdefault((crit.id, text.get(crit.id, "")), []).append((cycle.index, crit.finding))
    return found


def criterion_over_cap(cycles: Sequence[CycleRecord], cap: int) -> tuple[str, int] | None:
    """The criterion of the last cycle's verdict that has now failed `cap` times or more, if any."""
    last = cycles[-1] if cycles else None
    if last is None or last.verdict is None:
        return None
    for (cid, _), times in criterion_failures(cycles).items():
        if len(times) >= cap and times[-1][0] == last.index:
            return cid, len(times)
    return None


def build_escalation(trace: Trace, workspace: Path) -> dict[str, Any]:
    """Collect the escalation record from a finished trace."""
    failed: Counter[str] = Counter()
    last_finding: dict[str, str] = {}
    for cycle in trace.cycles:
        for crit in cycle.verdict.criteria if cycle.verdict else []:
            if not crit.met:
                failed[crit.id] += 1
                last_finding[crit.id] = crit.finding
    history = criterion_failures(trace.cycles)
    last = next((c for c in reversed(trace.cycles) if c.verdict is not None), None)
    blocked = next((c.blocked for c in reversed(trace.cycles) if c.blocked is not None), None)
    plan_text = {c.id: c.text for c in (trace.plan.criteria if trace.plan else [])}
    return {
        "run_id": trace.run_id,
        "task": trace.task,
        "reason": trace.outcome_reason,
        "cycles": len(trace.cycles),
        "goal": trace.plan.goal if trace.plan else None,
        "blocked": blocked.model_dump() if blocked else None,
        "last_verdict": last.verdict.model_dump() if last and last.verdict else None,
        "last_gate_failures": last.gate.failures if last else [],
        "failed_criteria": [
            {
                "id": cid,
                "criterion": plan_text.get(cid, ""),
                "times_failed": n,
                "last_finding": last_finding[cid],
                "findings": [
                    {"cycle": index, "finding": finding}
                    for (fid, _), found in history.items()
                    if fid == cid
                    for index, finding in found
                ],
            }
            for cid, n in failed.most_common()
        ],
        "passed_criteria": [c.id for c in (last.verdict.criteria if last and last.verdict else []) if c.met],
        "artifacts": artifact_list(workspace),
        "answers": [a.model_dump() for a in trace.answers],
    }


def _markdown(record: dict[str, Any]) -> str:
    lines = [
        f"# Escalation: {record['task']} run {record['run_id']}",
        "",
        f"**Why:** {record['reason']}  ",
        f"**Cycles:** {record['cycles']}  ",
        f"**Goal:** {record['goal'] or '(no plan was fixed)'}",
        "",
    ]
    if record["blocked"]:
        b = record["blocked"]
        lines += [f"**Blocked by {b['role']}** ({b['reason_code']}): {b['detail']}", ""]
    lines.append("## Failed criteria")
    lines += [
        f"- **{f['id']}** ({f['criterion']}) failed {f['times_failed']}×: "
        + "; ".join(f"cycle {x['cycle']}: {x['finding']}" for x in f["findings"])
        for f in record["failed_criteria"]
    ] or ["- none"]
    lines += [
        "",
        "## Passed in the last verdict",
        *([f"- {c}" for c in record["passed_criteria"]] or ["- none"]),
    ]
    if record["last_gate_failures"]:
        lines += ["", "## Hard gate failures (last cycle)", *[f"- {g}" for g in record["last_gate_failures"]]]
    lines += ["", "## Last artifacts", *([f"- {a}" for a in record["artifacts"]] or ["- none"]), ""]
    if record["answers"]:
        lines += ["## Answered before", ""]
        lines += [
            f"- {a['at']} by {a['by']}: {a['decision']}, {a['retries']} cycle(s)"
            + (f", note: {a['note']}" if a["note"] else "")
            + (f", grants: {', '.join(a['grants'])}" if a["grants"] else "")
            for a in record["answers"]
        ]
        lines.append("")
    return "\n".join(lines)


def write_escalation(trace: Trace, run_dir: Path, workspace: Path) -> Path:
    """Write escalation.json and escalation.md into the run folder; return the JSON's path."""
    record = build_escalation(trace, workspace)
    path = run_dir / "escalation.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (run_dir / "escalation.md").write_text(_markdown(record), encoding="utf-8")
    return path
