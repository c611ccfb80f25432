"""The judge's own tests, as the gates weigh them (`independent_tests`): its last full pytest run held
tests it wrote in its evaluation area, they all passed, and each criterion it marks met names one of
them, a test of its own for each criterion (`pse.tools._backing`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pse.events import GateResult, PlanRecord, ToolCallRecord, VerdictRecord
from pse.tools import Tool, named_outcomes, names_check, unbacked

__all__ = ["Backing", "backing_gate", "backing_owed", "independent_gate", "own_tests_ran"]


@dataclass(frozen=True)
class Backing:
    """Whose tests count and where (the gates' judge, pytest's declared target), and the checks the task
    requires (a criterion that names one is that check's to show)."""

    judge: str
    target: str
    checks: Sequence[str] = ()


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def backing_owed(
    verdict: VerdictRecord, plan: PlanRecord | None, calls: Sequence[ToolCallRecord], rule: Backing
) -> str | None:
    """What a PASS owes its criteria (`evidence_owed`): a test of the judge's own for each criterion it
    marks met that names none; None when each names one."""
    unbacked, passed = unbacked_criteria(verdict, plan, calls, rule)
    if not unbacked:
        return None
    tests = [f"test_{cid.lower()}" for cid in unbacked]
    return (
        f"run_pytest with a test of your own for {_listed(unbacked)}: write "
        + _listed([f"`def {name}():`" for name in tests])
        + " in your test file, each asserting what its criterion says, from the task's words; then each "
        f"criterion you mark met names its own test (`{tests[0]} passed`), one test per criterion (your "
        f"tests that passed: {_listed(passed) if passed else 'none'})"
    )


def unbacked_criteria(
    verdict: VerdictRecord, plan: PlanRecord | None, calls: Sequence[ToolCallRecord], rule: Backing
) -> tuple[list[str], list[str]]:
    """The criteria `verdict` marks met that name no test of the judge's own that passed in its last full
    run, and whose plan text names no required check, one each (`unbacked`); and the names that passed."""
    full = _full_runs(calls, rule.judge, rule.target)
    facts = full[-1][1].facts if full else {}
    named = named_outcomes(facts.get("tests") or [], rule.judge, facts.get("hollow") or ())
    passed = [name for name, outcome in named.items() if outcome == "passed"]
    texts = {c.id: c.text for c in plan.criteria} if plan is not None else {}
    checked = {cid: [k for k in rule.checks if names_check(text, k)] for cid, text in texts.items()}
    return unbacked({c.id: c.finding for c in verdict.criteria if c.met}, passed, checked), passed


def backing_gate(
    verdict: VerdictRecord, plan: PlanRecord | None, calls: Sequence[ToolCallRecord], rule: Backing
) -> GateResult:
    judge = rule.judge
    unbacked, passed = unbacked_criteria(verdict, plan, calls, rule)
    if unbacked:
        return GateResult(
            name="criteria_backed",
            passed=False,
            detail=f"met, naming no test of the {judge}'s own that passed (one test per criterion): "
            f"{', '.join(unbacked)}; its tests that passed: {', '.join(passed) or 'none'}",
        )
    return GateResult(
        name="criteria_backed",
        passed=True,
        detail="each criterion met names a test of the judge's own that passed, one test each",
    )


def _full_runs(calls: Sequence[ToolCallRecord], judge: str, target: str) -> list[tuple[int, ToolCallRecord]]:
    """The judge's run_pytest calls over the whole declared target that wrote a readable record."""
    return [
        (i, c)
        for i, c in enumerate(calls)
        if c.requester == judge
        and c.decision == "allowed"
        and c.tool == Tool.RUN_PYTEST
        and str(c.facts.get("target", "")) == target
        and c.facts.get("report") == "checker"
    ]


def own_tests_ran(calls: Sequence[ToolCallRecord], rule: Backing) -> bool:
    """Whether the judge's last full pytest run held a test it wrote (passed or not: how it went is for
    the gate). The 1.5B model's Evaluator said PASS on no test of its own (heldout-8 top-words); the gate
    refused it, and the revise that followed sent the Specialist to fix what was the Evaluator's to do."""
    full = _full_runs(calls, rule.judge, rule.target)
    mine = (full[-1][1].facts.get("by_author") or {}).get(rule.judge, {}) if full else {}
    return sum(int(v) for v in mine.values()) > 0


def independent_gate(calls: Sequence[ToolCallRecord], last_write: int, rule: Backing) -> GateResult:
    name, judge = "independent_tests", rule.judge
    full = _full_runs(calls, judge, rule.target)
    if not full:
        return GateResult(name=name, passed=False, detail="no full run_pytest of the Evaluator's own tests")
    index, last = full[-1]
    mine = (last.facts.get("by_author") or {}).get(judge, {})
    ran = sum(int(v) for v in mine.values())
    if ran == 0:
        return GateResult(
            name=name,
            passed=False,
            detail="the last full pytest run held no test the Evaluator wrote (@evaluation/)",
        )
    bad = int(mine.get("failed", 0)) + int(mine.get("errors", 0))
    if bad or not int(mine.get("passed", 0)):
        return GateResult(
            name=name, passed=False, detail=f"the Evaluator's own tests did not pass: {dict(mine)}"
        )
    if last_write > index:
        return GateResult(
            name=name, passed=False, detail="a file was written after the Evaluator's last full run"
        )
    return GateResult(
        name=name, passed=True, detail=f"{mine.get('passed')} test(s) the Evaluator wrote passed"
    )
