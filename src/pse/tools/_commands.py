"""Command tools: bash and run_check. They run in the sandbox and report facts.

Status rule for every command tool: `ok` when the command exited 0, `error` otherwise, `timeout` when it
was killed; a check whose exit status is no evidence (`pse.tools._exit_evidence`) is `error` too. Facts
always hold `exit_code` (None after a timeout), so the engine's gates need no parsing. A read-write
command's changes come back through the workspace's check-configuration guard; facts `wrote` and
`refused` list what was kept and what was not.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pse.sandbox import CommandResult
from pse.tools._checks import command_outcome, evidence_facts, manifest_of, snapshot_areas
from pse.tools._exit_evidence import exit_status_problem, pytest_targets
from pse.tools._pytest import pytest_over
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = ["BASH_PYTEST", "bash", "run_check"]

_BASH = ("/bin/bash", "--noprofile", "--norc", "-c")


def change_facts(result: CommandResult) -> dict[str, Any]:
    """What a read-write command changed (kept) and what PSE refused to keep, for the audit."""
    facts: dict[str, Any] = {}
    if result.changes:
        facts["wrote"] = list(result.changes)
    if result.refused:
        facts["refused"] = [{"path": path, "reason": reason} for path, reason in result.refused]
    return facts


def _refusals(result: CommandResult) -> str:
    if not result.refused:
        return ""
    lines = [f"- {path}: {reason}" for path, reason in result.refused]
    return "\n[changes not kept, the workspace is unchanged there:]\n" + "\n".join(lines)


_PYTEST = re.compile(r"(?:^|[\s;&|(])(?:\S*/)?(?:pytest|py\.test)(?=\s|$|;|&|\|)")
"""A command that runs pytest (`pytest -q`, `python -m pytest`, `.venv/bin/pytest`)."""
BASH_PYTEST = (
    "[pytest through bash is no evidence: the checks count only run_pytest's run, each author's tests "
    "sealed and measured from outside the code; call run_pytest with target '.']"
)


def bash(ctx: ToolContext, command: str) -> ToolOutcome:
    """Run a bash command in the workspace (read-only unless the grant is read-write). A command that runs
    pytest is answered with what it printed and `BASH_PYTEST`: the 1.5B model's Evaluator ran `pytest`
    through bash four times in a row in place of run_pytest, and judged on nothing (heldout-9 csv-mean,
    roman)."""
    if not command.strip():
        raise ValueError("empty command")
    result = ctx.sandbox.run([*_BASH, command], writable=ctx.writable, accept=ctx.accept)
    said = f"\n{BASH_PYTEST}" if _PYTEST.search(command) else ""
    return command_outcome(result, change_facts(result), result.output + _refusals(result) + said)


def run_check(ctx: ToolContext, name: str) -> ToolOutcome:
    """Run one of the task's declared check commands over a sealed snapshot of the evidence, read-only;
    facts: exit_code, check, evidence, unproven (why its exit status is no evidence: `_exit_evidence`).

    `{task_dir}` in the command names a private read-only copy of the task's folder. A pytest command
    runs as `run_pytest` does (its facts are run_pytest's, with `check`).
    """
    key = name.strip()
    if key not in ctx.checks:
        declared = ", ".join(sorted(ctx.checks)) or "none (this task declares no checks)"
        raise ValueError(f"no check named {key!r}; the declared checks are: {declared}")
    command = ctx.checks[key]
    targets = pytest_targets(command)
    if targets is not None:
        ran = pytest_over(ctx, targets)
        said = f"[check {key}: a pytest command, run as run_pytest runs it: each author's tests apart]\n"
        return replace(ran, output=said + ran.output, facts={**ran.facts, "check": key})
    private = {"task_dir": ctx.task_dir} if ctx.task_dir is not None else {}
    manifest = manifest_of(ctx)
    result = ctx.sandbox.run(
        [*_BASH, command], writable=False, private=private, snapshot=snapshot_areas(ctx, manifest)
    )
    problem = exit_status_problem(command, manifest, ctx.workspace)
    facts = {
        "check": key,
        "evidence": evidence_facts(manifest, [result]),
        "unproven": [problem] if problem else [],
    }
    outcome = command_outcome(
        result, facts, manifest.describe() + result.output + (f"\n[{problem}]" if problem else "")
    )
    return replace(outcome, status="error") if problem and outcome.status == "ok" else outcome
