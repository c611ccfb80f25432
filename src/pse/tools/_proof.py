"""Positive evidence of a pytest run: what PSE's plugin recorded, judged by rules the run cannot change.

A run proves something only when it collected tests, every collected test has a result and passed
(a skip or an xfail proves nothing: delivered code can turn a failure into one), and, on a full run,
each declared Python output was imported from its own path and executed while the tests ran. The
records come from `pse._pytest_plugin`; the rules are here, in PSE's process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pse.sandbox import CommandResult
from pse.tools._evidence import Manifest
from pse.tools._junit import JunitReport

__all__ = ["Session", "coverage_facts", "coverage_of", "unproven"]


@dataclass(slots=True)
class Session:
    """One pytest process's readings: its report, PSE's evidence record, and what it ran."""

    result: CommandResult
    report: JunitReport | None
    record: dict[str, Any] | None
    author: Callable[[str], str]


def unproven(sessions: list[Session], manifest: Manifest, full: bool) -> list[str]:
    """Why these runs are not positive evidence, however they exited (empty: they are)."""
    problems: list[str] = []
    collected = passed = 0
    for s in sessions:
        if s.record is None or s.record.get("collected") is None:
            problems.append(
                "PSE's pytest plugin left no record of what was collected (the session broke early)"
            )
            continue
        ids = list(s.record["collected"])
        results = dict(s.record.get("results") or {})
        collected += len(ids)
        passed += sum(1 for i in ids if results.get(i) == "passed")
        unfinished = [i for i in ids if i not in results]
        if unfinished:
            problems.append(
                f"{len(unfinished)} collected test(s) have no result (the session ended early): "
                f"{unfinished[0]}"
            )
        skipped = [i for i in ids if results.get(i) == "skipped"]
        if skipped:
            problems.append(
                f"{len(skipped)} test(s) skipped or xfailed ({skipped[0]}): a skipped test proves nothing "
                "and may hide a failure"
            )
        cases = len(s.report.cases) if s.report is not None else 0
        if s.report is not None and cases != len(ids):
            problems.append(f"the report lists {cases} test(s) where {len(ids)} were collected")
    if collected == 0:
        problems.append("no test was collected: a run of no test proves nothing")
    elif passed == 0:
        problems.append("no test passed")
    if full:
        problems += _coverage_problems(sessions, manifest)
    return problems


def _coverage_problems(sessions: list[Session], manifest: Manifest) -> list[str]:
    problems = []
    for rule in manifest.coverage:
        if not any(_executed(sessions, m) for m in rule.modules):
            shown = rule.output if rule.modules == (rule.output,) else f"{rule.output} (no module in it)"
            problems.append(
                f"{shown}: the tests never ran its code from that path (imported and executed, measured "
                "by coverage); tests that do not exercise the delivered file prove nothing about it"
            )
    return problems


def coverage_of(record: Mapping[str, Any] | None, path: str) -> dict[str, Any] | None:
    """One module's coverage from a plugin record: imported, statements, lines run at import and in tests."""
    if not record:
        return None
    entry = (record.get("coverage") or {}).get(path)
    return entry if isinstance(entry, dict) else None


def _executed(sessions: list[Session], path: str) -> bool:
    """The module at `path` (relative to the snapshot) was imported from there and ran during the tests:
    a line ran while the tests ran, or import alone ran every statement it has."""
    for s in sessions:
        entry = coverage_of(s.record, path)
        if not entry or not entry.get("imported"):
            continue
        statements = set(entry.get("statements") or [])
        at_import, in_tests = set(entry.get("import") or []), set(entry.get("tests") or [])
        if in_tests or statements <= at_import:
            return True
    return False


def coverage_facts(sessions: list[Session], manifest: Manifest) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for module in sorted({m for rule in manifest.coverage for m in rule.modules}):
        entries = [e for s in sessions if (e := coverage_of(s.record, module))]
        imported = any(e.get("imported") for e in entries)
        statements = set().union(*(set(e.get("statements") or []) for e in entries)) if entries else set()
        ran = (
            set().union(*(set(e.get("import") or []) | set(e.get("tests") or []) for e in entries))
            if entries
            else set()
        )
        in_tests = set().union(*(set(e.get("tests") or []) for e in entries)) if entries else set()
        facts[module] = {
            "imported": imported,
            "statements": len(statements),
            "executed": len(ran & statements) if statements else len(ran),
            "in_tests": len(in_tests),
            "percent": round(100 * len(ran & statements) / len(statements), 1) if statements else 100.0,
            "proven": _executed(sessions, module),
        }
    return facts
