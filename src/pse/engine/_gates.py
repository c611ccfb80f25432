"""Hard gates: code that must agree before an Evaluator's PASS counts.

A PASS stands only if, in this cycle: every expected output exists in the workspace; every check
the task requires was run by the Evaluator itself through the ToolAgent and its last run succeeded;
every plan criterion has a `met` entry in the verdict, and all of them are met. The gates are
evaluated on every cycle (and recorded), so a trace also shows what a PARTIAL still lacked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pse.events import GateRecord, GateResult, PlanRecord, ToolCallRecord, VerdictRecord

__all__ = ["CHECK_TOOLS", "evaluate_gates"]

CHECK_TOOLS: dict[str, str] = {"pytest": "run_pytest", "ruff": "run_ruff"}
_JUDGE = "Evaluator"


def _check_runs(check: str, calls: Sequence[ToolCallRecord]) -> list[ToolCallRecord]:
    tool = CHECK_TOOLS.get(check, "run_check")
    return [
        c
        for c in calls
        if c.requester == _JUDGE
        and c.decision == "allowed"
        and c.tool == tool
        and (tool != "run_check" or c.arguments.get("name", "").strip() == check)
    ]


def _succeeded(call: ToolCallRecord) -> bool:
    exit_code = call.facts.get("exit_code")
    return call.status == "ok" and (exit_code is None or exit_code == 0)


def _inside(workspace: Path, relative: str) -> Path | None:
    root = workspace.resolve()
    candidate = (root / relative).resolve()
    return candidate if candidate.is_relative_to(root) else None


def evaluate_gates(
    *,
    verdict: VerdictRecord | None,
    plan: PlanRecord | None,
    tool_calls: Sequence[ToolCallRecord],
    required_checks: Iterable[str],
    expected_outputs: Iterable[str],
    workspace: Path,
) -> GateRecord:
    """Evaluate every hard gate for one cycle."""
    results: list[GateResult] = []

    missing = []
    for output in dict.fromkeys([*expected_outputs, *(plan.outputs if plan else [])]):
        path = _inside(workspace, output)
        if path is None or not path.exists():
            missing.append(output)
    results.append(
        GateResult(
            name="outputs_exist",
            passed=not missing,
            detail=f"missing: {', '.join(missing)}" if missing else "every expected output exists",
        )
    )

    for check in required_checks:
        runs = _check_runs(check, tool_calls)
        tool = CHECK_TOOLS.get(check, f"run_check(name={check})")
        if not runs:
            results.append(
                GateResult(name=f"check:{check}", passed=False, detail=f"the Evaluator did not run {tool}")
            )
            continue
        last = runs[-1]
        passed = _succeeded(last)
        detail = f"last {tool} run: status {last.status}, exit code {last.facts.get('exit_code')}"
        results.append(GateResult(name=f"check:{check}", passed=passed, detail=detail))

    if plan is None or verdict is None:
        results.append(
            GateResult(name="criteria_covered", passed=False, detail="no plan or no verdict to compare")
        )
    else:
        judged = {c.id for c in verdict.criteria}
        uncovered = [c.id for c in plan.criteria if c.id not in judged]
        results.append(
            GateResult(
                name="criteria_covered",
                passed=not uncovered,
                detail=f"no met entry for: {', '.join(uncovered)}" if uncovered else "every criterion judged",
            )
        )
        if verdict.status == "PASS":
            unmet = [c.id for c in verdict.criteria if not c.met]
            results.append(
                GateResult(
                    name="criteria_met",
                    passed=not unmet,
                    detail=f"PASS with unmet criteria: {', '.join(unmet)}" if unmet else "all criteria met",
                )
            )

    failures = [f"{r.name}: {r.detail}" for r in results if not r.passed]
    return GateRecord(passed=not failures, failures=failures, results=results)
