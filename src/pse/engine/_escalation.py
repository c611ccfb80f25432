"""The escalation record: what a person needs when a run ends ESCALATED.

It lists the last artifacts, the last verdict, every criterion that ever failed with how many times
and its last finding, what passed, and any `<blocked>` reason: enough to decide without reading the
whole trace. Written as `escalation.json` (for tools) and `escalation.md` (for people).

A `SPEC_CONFLICT` block (a given test contradicts the specification) is quoted on both sides, so a
person can judge it at a glance: the named test's source as it is in the workspace (and who wrote the
file: the task, or a role), and the sentence of the specification the role quoted, with whether the
task message really holds it.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from pse.engine._step_buffer import artifact_list
from pse.events import BlockedRecord, FindingRecord
from pse.protocol import SPEC_CONFLICT
from pse.tools import Tool, parse_python
from pse.trace import CycleRecord, Trace

__all__ = [
    "build_escalation",
    "criterion_failures",
    "criterion_over_cap",
    "names_a_test",
    "quotes_task",
    "spec_conflict",
    "write_escalation",
]

MAX_TEST_SOURCE_BYTES = 1 << 20
"""Largest test file read to quote the test a SPEC_CONFLICT names."""
MAX_QUOTED_CHARS = 4000
"""Most characters of a quoted test."""


def criterion_failures(cycles: Sequence[CycleRecord]) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Every failed finding of each criterion, by (id, text), in cycle order: [(cycle, finding), …].

    A criterion is its id *and* its text in the plan of that cycle: a re-plan that rewrites AC2 starts
    its count again, a re-plan that keeps it goes on counting (seed 001: the same criterion returned
    at most twice). A `<finding>` that names a criterion and comes back in the next review (the same
    criterion and file) counts against that criterion too, even where the verdict calls it met: a
    problem that a revise did not remove is a failure of it, whatever the criteria alone say (issue 32).
    """
    found: dict[tuple[str, str], list[tuple[int, str]]] = {}
    before: set[tuple[str, str | None]] = set()
    for cycle in cycles:
        if cycle.verdict is None:
            continue
        text = {c.id: c.text for c in (cycle.plan.criteria if cycle.plan else [])}
        failed: set[str] = set()
        for crit in cycle.verdict.criteria:
            if not crit.met:
                failed.add(crit.id)
                found.setdefault((crit.id, text.get(crit.id, "")), []).append((cycle.index, crit.finding))
        for finding in cycle.verdict.findings:
            cid = finding.criterion
            if cid is not None and (cid, finding.path) in before and cid not in failed:
                failed.add(cid)
                again = f"came back: {finding.describe()}"
                found.setdefault((cid, text.get(cid, "")), []).append((cycle.index, again))
        before = {(f.criterion, f.path) for f in cycle.verdict.findings if f.criterion is not None}
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
        "spec_conflict": spec_conflict(blocked, trace, workspace) if blocked else None,
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
    if record.get("spec_conflict"):
        lines += _conflict_markdown(record["spec_conflict"])
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
    findings = [FindingRecord.model_validate(f) for f in (record["last_verdict"] or {}).get("findings") or []]
    if findings:
        lines += ["", "## Findings in the last verdict", *[f"- {f.describe()}" for f in findings]]
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


def spec_conflict(blocked: BlockedRecord, trace: Trace, workspace: Path) -> dict[str, Any] | None:
    """Both sides of a `SPEC_CONFLICT`, quoted: the named test's source and the specification's sentence.

    Returns None for another reason code. `test_source` is None when the test cannot be found in the
    workspace (no such file or function); `test_author` is who last wrote its file (`task` when no role
    did); `specification_in_task` says whether the task message holds the quoted sentence (spacing aside).
    """
    if blocked.reason_code != SPEC_CONFLICT:
        return None
    named = (blocked.test or "").strip()
    found = _find_test(named, workspace) if named else None
    path, source = found if found is not None else (None, None)
    sentence = blocked.detail.strip()
    return {
        "by": blocked.role,
        "test": named or None,
        "test_file": path,
        "test_source": source,
        "test_author": _author(path, trace) if path is not None else None,
        "specification": sentence,
        "specification_in_task": quotes_task(sentence, trace.task_message),
    }


def names_a_test(workspace: Path, named: str) -> bool:
    """Whether `named` (`FILE::[CLASS::]NAME`, or a bare NAME) is a test function of the workspace's test
    files: what a SPEC_CONFLICT must name (read as `spec_conflict` reads it)."""
    named = named.strip()
    return bool(named) and _find_test(named, workspace) is not None


def quotes_task(sentence: str, task: str) -> bool:
    """Whether the task message holds `sentence`, spacing and surrounding quotes aside: what a
    SPEC_CONFLICT's specification must be, a sentence of the task, not one its author wrote."""
    return bool(_plain(sentence)) and _plain(sentence) in _plain(task)


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip("\"'`").strip()


def _find_test(named: str, workspace: Path) -> tuple[str, str] | None:
    """(file, source of the test function) of `FILE::[CLASS::]NAME` (or a bare NAME: the first test file
    of the workspace holding it), read without leaving the workspace or following a symlink."""
    parts = [p.strip() for p in named.split("::") if p.strip()]
    if not parts:
        return None
    files = [parts.pop(0)] if len(parts) > 1 or parts[0].endswith(".py") else _test_files(workspace)
    if not parts:
        return None
    for rel in files:
        text = _read_inside(workspace, rel)
        source = _function_source(text, parts) if text is not None else None
        if source is not None:
            return rel, source
    return None


def _test_files(workspace: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                found.append((Path(folder) / name).relative_to(workspace).as_posix())
        if len(found) > 200:
            break
    return found


def _read_inside(workspace: Path, rel: str) -> str | None:
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        return None
    path = workspace.joinpath(*pure.parts)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TEST_SOURCE_BYTES:
            return None
        if not path.resolve().is_relative_to(workspace.resolve()):
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _function_source(text: str, names: list[str]) -> str | None:
    try:
        body: list[ast.stmt] = parse_python(text).body
    except (SyntaxError, ValueError):
        return None
    for position, name in enumerate(names):
        last = position == len(names) - 1
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in body if isinstance(n, kinds) and n.name == name.split("[")[0]), None)
        if node is None:
            return None
        if last:
            segment = ast.get_source_segment(text, node) or ""
            return segment[:MAX_QUOTED_CHARS]
        body = node.body
    return None


def _author(path: str, trace: Trace) -> str:
    """Who last wrote `path` through the ToolAgent in this run; `task` when no role did."""
    author = "task"
    for cycle in trace.cycles:
        for call in cycle.tool_calls:
            if call.decision != "allowed" or call.status != "ok":
                continue
            facts = call.facts
            wrote = [str(PurePosixPath(str(p))) for p in facts.get("wrote") or []]
            if call.tool == Tool.WRITE_FILE and facts.get("area", "workspace") == "workspace":
                wrote.append(str(PurePosixPath(str(facts.get("path", "")))))
            if path in wrote:
                author = call.requester
    return author


def _conflict_markdown(conflict: dict[str, Any]) -> list[str]:
    test = conflict["test"] or "(no test named)"
    author = conflict["test_author"]
    lines = [f"## Specification conflict ({SPEC_CONFLICT}, by {conflict['by']})", ""]
    if conflict["test_source"] is not None:
        who = "the task's own file" if author == "task" else f"a file {author} wrote"
        lines += [f"The test `{test}` ({conflict['test_file']}, {who}):", "", "```python"]
        lines += [conflict["test_source"], "```", ""]
    else:
        lines += [f"The test `{test}` (not found in the workspace)", ""]
    where = "in the task message" if conflict["specification_in_task"] else "NOT found in the task message"
    lines += [f"contradicts this sentence of the specification ({where}):", ""]
    lines += [f"> {line}" for line in (conflict["specification"] or "(none quoted)").splitlines()] + [""]
    return lines


def write_escalation(trace: Trace, run_dir: Path, workspace: Path) -> Path:
    """Write escalation.json and escalation.md into the run folder; return the JSON's path."""
    record = build_escalation(trace, workspace)
    path = run_dir / "escalation.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (run_dir / "escalation.md").write_text(_markdown(record), encoding="utf-8")
    return path
