"""Hard gates: code that must agree before an Evaluator's PASS counts.

A PASS stands only if, in this cycle:

* every expected output exists in the workspace (a regular file or folder, reached through no symlink);
* every check the task requires was run by the Evaluator itself through the ToolAgent, and its *last*
  run: ran over a sealed snapshot of the evidence, succeeded by its machine-readable report (pytest's
  checking sessions' records, ruff's JSON; a task check's exit code, when no role-written code could run
  in it), is positive evidence (for pytest: tests collected, every one run and passed, none skipped, no
  delivered code run in a checking process, each declared Python output called by the tests; for ruff:
  files checked), covered the whole target the task declares (not one test
  node, not a sub-folder), and came after the last write to the workspace or the evaluation area (a
  later write makes it stale);
* no check-configuration file a role wrote is in the workspace unless the task declares it;
* when the task requires independent tests, that last full pytest run held tests the Evaluator wrote
  in its evaluation area, and they all passed; and each criterion it marks met names one of them, a
  test of its own for each criterion (`criteria_backed`, `pse.tools._backing`);
* every plan criterion has a `met` entry in the verdict, and all of them are met;
* the verdict holds no `<finding>` the task's gate rule blocks on (`[verification] block_findings`,
  default `high`: no unresolved high-severity finding).

The gates are evaluated on every cycle (and recorded), so a trace also shows what a PARTIAL still lacked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pse.engine._judge_tests import Backing, backing_gate, backing_owed, independent_gate, own_tests_ran
from pse.events import SEVERITIES, GateRecord, GateResult, PlanRecord, ToolCallRecord, VerdictRecord
from pse.roles import Role
from pse.tools import OWN_TEST_FILE, Tool, check_tool

__all__ = ["GatePolicy", "evaluate_gates", "evidence_owed"]

_REPORTS = {Tool.RUN_PYTEST: "checker", Tool.RUN_RUFF: "json"}


@dataclass(frozen=True)
class GatePolicy:
    """What the gates demand of a run, from its task: outputs, checks and how they must have run.

    Attributes:
        required_checks: `pytest`, `ruff` or names of the task's declared checks.
        expected_outputs: workspace paths a PASS needs (the plan's outputs are added).
        targets: check → the target its last run must have covered (default `.`, the whole workspace).
        independent_tests: a PASS needs passing tests the Evaluator wrote itself.
        check_config: check-configuration files the task allows roles to write.
        block_findings: the gate rule for findings: a PASS whose verdict holds a finding of this
            severity or a worse one does not stand (`none`: findings never block).
        enforced: the gates hold a PASS to account (false: the judge's word alone: PSE_HARD_GATES=false,
            an ablation, or a crew whose judge reviews its own work; the gates are still evaluated and
            recorded).
        judge: whose check runs count (the crew's reviewer).
    """

    required_checks: Sequence[str] = ()
    expected_outputs: Sequence[str] = ()
    targets: Mapping[str, str] = field(default_factory=dict)
    independent_tests: bool = False
    check_config: frozenset[str] = frozenset()
    block_findings: str = "high"
    enforced: bool = True
    judge: str = Role.EVALUATOR

    def target(self, check: str) -> str:
        """The target the last run of `check` must have covered."""
        return str(PurePosixPath(self.targets.get(check, ".")))

    def backing(self) -> Backing:
        """What backs a criterion marked met: the judge's own tests in its full pytest runs, the checks."""
        return Backing(self.judge, self.target("pytest"), tuple(self.required_checks))

    def owing(self, plan: PlanRecord | None) -> PlanRecord | None:
        """`plan` as the run holds it: its outputs are the files of `expected_outputs` (the task's word),
        in the task's order, then the Planner's others but those it misread from the task (`strays`).
        A folder output stays the gates' alone.

        A Planner cannot drop what the task expects, nor put its own outputs before them. The gates
        already owed them at a PASS, but the 1.5B model's Planner listed no output on two held-out tasks
        (no nudge asked its Specialist for the test file it never wrote, and the Evaluator spent the
        cycle's turns looking for it), and on a third listed `top-words/words.py` for `words.py`: its
        Specialist writes the first output first. Each output keeps the Planner's spelling (a step binds
        its outputs by that name); the Planner's own words stay in the cycle's messages."""
        if plan is None:
            return None
        strays = self.strays(plan)
        spelled = {_posix(path): path for path in plan.outputs}  # output_steps' keys
        expected = [path for path in self.expected_outputs if not path.endswith("/")]
        files = list(dict.fromkeys(spelled.get(_posix(path), path) for path in expected))
        outputs = [*files, *(path for path in plan.outputs if path not in files and path not in strays)]
        if outputs == list(plan.outputs):
            return plan
        kept = {_posix(path) for path in outputs}
        steps = {path: step for path, step in plan.output_steps.items() if _posix(path) in kept}
        return plan.model_copy(update={"outputs": outputs, "output_steps": steps})

    def strays(self, plan: PlanRecord | None) -> list[str]:
        """The outputs of `plan` that misread the task, which `owing` leaves out: a required check taken
        for a file (`pytest`, `pytest:run_pytest`), or a file the task lists, put in a folder the task
        does not name (`slug/slug.py` for `slug.py`). Both were seen on the 1.5B model's Planner; its
        Specialist was asked for each, wrote `slug/slug.py` as a copy, and blocked over `pytest`. Any
        other output the Planner adds (a `test_cli.py` beside the `cli.py` a task lists) stands."""
        checks = {*self.required_checks, *map(check_tool, self.required_checks)}
        listed = [PurePosixPath(path) for path in self.expected_outputs]
        strays = []
        for path in plan.outputs if plan else ():
            pure = PurePosixPath(path)
            if pure in listed or any(folder in pure.parents for folder in listed):
                continue
            if path.split(":")[0].strip() in checks or any(pure.name == own.name for own in listed):
                strays.append(path)
        return strays


def _posix(path: str) -> str:
    return str(PurePosixPath(path))


def _exists_inside(workspace: Path, relative: str) -> bool:
    """A regular file or a folder at `relative`, reached without following any symlink."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts:
        return False
    current = workspace
    for part in pure.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
    if not pure.parts:
        return True
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _is_write(call: ToolCallRecord) -> bool:
    if call.decision != "allowed":
        return False
    return (call.tool == Tool.WRITE_FILE and call.status == "ok") or bool(call.facts.get("wrote"))


def _check_runs(check: str, calls: Sequence[ToolCallRecord], judge: str) -> list[tuple[int, ToolCallRecord]]:
    tool = check_tool(check)
    return [
        (i, c)
        for i, c in enumerate(calls)
        if c.requester == judge
        and c.decision == "allowed"
        and c.tool == tool
        and (tool != Tool.RUN_CHECK or c.arguments.get("name", "").strip() == check)
    ]


def _check_gate(
    check: str, calls: Sequence[ToolCallRecord], last_write: int, policy: GatePolicy
) -> GateResult:
    tool = check_tool(check)
    label = str(tool) if tool != Tool.RUN_CHECK else f"{tool}(name={check})"
    runs = _check_runs(check, calls, policy.judge)
    if not runs:
        return GateResult(
            name=f"check:{check}", passed=False, detail=f"the {policy.judge} did not run {label}"
        )
    index, last = runs[-1]
    exit_code = last.facts.get("exit_code")
    problems = []
    if last.status != "ok" or exit_code != 0:
        problems.append(f"status {last.status}, exit code {exit_code}")
    wanted = _REPORTS.get(tool)
    if wanted is not None and last.facts.get("report") != wanted:
        problems.append(f"no {wanted} report was read (printed output does not count)")
    if "evidence" not in last.facts:
        problems.append("it did not run over a sealed snapshot of the evidence")
    unproven = last.facts.get("unproven")
    if (wanted is not None or tool == Tool.RUN_CHECK) and (unproven is None or unproven):
        problems.append(
            "not positive evidence: " + ("; ".join(map(str, unproven)) if unproven else "unknown")
        )
    if tool != Tool.RUN_CHECK:
        target, declared = str(last.facts.get("target", "?")), policy.target(check)
        if target != declared:
            problems.append(f"it covered {target!r}, not the declared target {declared!r}")
    if last_write > index:
        problems.append(
            f"{calls[last_write].requester} wrote to the workspace after it ({calls[last_write].tool})"
        )
    if problems:
        return GateResult(
            name=f"check:{check}", passed=False, detail=f"last {label} run: " + "; ".join(problems)
        )
    return GateResult(
        name=f"check:{check}", passed=True, detail=f"last {label} run: passed, full target, current"
    )


def evidence_owed(
    tool_calls: Sequence[ToolCallRecord],
    policy: GatePolicy,
    verdict: VerdictRecord | None = None,
    plan: PlanRecord | None = None,
) -> list[str]:
    """The required checks an Evaluator's PASS comes before: never run by it this cycle, run before the
    last write, or run over less than the declared target; and where its own tests are owed
    (`independent_tests`), tests of its own in its last full pytest run. What it can still do in its
    phase; how a run went (failed, unproven) is for the gates and its verdict to weigh, not a reason to
    ask again. With `verdict`, a PASS of `plan`: the criteria it marks met that name no passing test of
    the judge's own (`criteria_backed`)."""
    writes = [i for i, c in enumerate(tool_calls) if _is_write(c)]
    last_write = writes[-1] if writes else -1
    owed = []
    for check in policy.required_checks:
        tool, target = check_tool(check), policy.target(check)
        call = f"{tool} with target {target!r}" if tool != Tool.RUN_CHECK else f"{tool} with name {check!r}"
        runs = [
            (i, c)
            for i, c in _check_runs(check, tool_calls, policy.judge)
            if tool == Tool.RUN_CHECK or str(c.facts.get("target", "")) == target
        ]
        if not runs:
            owed.append(f"{call} (not run yet)")
        elif runs[-1][0] < last_write:
            owed.append(f"{call} (files were written after its last run)")
    if policy.independent_tests and not own_tests_ran(tool_calls, policy.backing()):
        owed.append(
            f"tests of your own (write them with write_file at {OWN_TEST_FILE}, from the task's "
            "words, then run_pytest with target '.': your last full run held none of yours)"
        )
    elif policy.independent_tests and verdict is not None and verdict.status == "PASS":
        backing = backing_owed(verdict, plan, tool_calls, policy.backing())
        owed += [backing] if backing else []
    return owed


def _config_gate(written: Mapping[str, str], policy: GatePolicy) -> GateResult:
    undeclared = sorted(p for p in written if p not in policy.check_config)
    if undeclared:
        detail = f"written by a role, not declared by the task: {', '.join(undeclared)}"
    elif written:
        detail = "written by a role, declared by the task: " + ", ".join(
            f"{p} ({w})" for p, w in sorted(written.items())
        )
    else:
        detail = "no role wrote a check-configuration file"
    return GateResult(name="check_config", passed=not undeclared, detail=detail)


def evaluate_gates(
    *,
    verdict: VerdictRecord | None,
    plan: PlanRecord | None,
    tool_calls: Sequence[ToolCallRecord],
    policy: GatePolicy,
    workspace: Path,
    role_written_config: Mapping[str, str] | None = None,
) -> GateRecord:
    """Evaluate every hard gate for one cycle.

    Args:
        role_written_config: check-configuration files of the workspace a role wrote, with the author.
    """
    results: list[GateResult] = []
    missing = [
        output
        for output in dict.fromkeys([*policy.expected_outputs, *(plan.outputs if plan else [])])
        if not _exists_inside(workspace, output)
    ]
    results.append(
        GateResult(
            name="outputs_exist",
            passed=not missing,
            detail=f"missing: {', '.join(missing)}" if missing else "every expected output exists",
        )
    )
    writes = [i for i, c in enumerate(tool_calls) if _is_write(c)]
    last_write = writes[-1] if writes else -1
    results += [_check_gate(check, tool_calls, last_write, policy) for check in policy.required_checks]
    results.append(_config_gate(dict(role_written_config or {}), policy))
    if policy.independent_tests:
        results.append(independent_gate(tool_calls, last_write, policy.backing()))
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
        if verdict.status == "PASS" and policy.independent_tests:
            results.append(backing_gate(verdict, plan, tool_calls, policy.backing()))
        if verdict.status == "PASS" and verdict.findings:  # a verdict without findings: no such gate
            results.append(_findings_gate(verdict, policy))
    failures = [f"{r.name}: {r.detail}" for r in results if not r.passed]
    return GateRecord(passed=not failures, failures=failures, results=results, enforced=policy.enforced)


def _findings_gate(verdict: VerdictRecord, policy: GatePolicy) -> GateResult:
    """No PASS with a finding the gate rule blocks on: an Evaluator that names a high-severity problem
    has not found the work done, whatever its criteria say."""
    if policy.block_findings not in SEVERITIES:
        return GateResult(
            name="findings", passed=True, detail=f"{len(verdict.findings)} finding(s); none block"
        )
    blocking = SEVERITIES[: SEVERITIES.index(policy.block_findings) + 1]
    found = [f for f in verdict.findings if f.severity in blocking]
    if found:
        shown = "; ".join(f.describe()[:200] for f in found[:5]) + (
            f" and {len(found) - 5} more" if len(found) > 5 else ""
        )
        return GateResult(
            name="findings",
            passed=False,
            detail=f"PASS with unresolved {'/'.join(blocking)} finding(s): {shown}",
        )
    return GateResult(
        name="findings",
        passed=True,
        detail=f"no {'/'.join(blocking)} finding ({len(verdict.findings)} in all)",
    )
