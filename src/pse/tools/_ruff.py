"""run_ruff: ruff over a sealed snapshot, with explicit files and PSE's configuration only (see `_checks`)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from pse.exceptions import ToolInfrastructureError
from pse.sandbox import OUTBOX, read_inside
from pse.tools._checks import (
    authored_config,
    check_target,
    command_outcome,
    config_note,
    declared_files,
    evidence_facts,
    manifest_of,
    normalize_target,
    snapshot_areas,
)
from pse.tools._evidence import Manifest
from pse.tools._protected import RUFF_CONFIG_FILES
from pse.tools._pyhints import parse_python
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = ["run_ruff", "safe_fixes"]

_RUFF_JSON_LIMIT = 8_000_000
_LISTED = 10
"""Findings kept in the record (`finding_list`), beside their count."""
_RUFF_REPORT = "ruff.json"
_FIX_CHARS = 300
"""A safe fix's new text is quoted in a finding's line up to this size (beyond it, only its name)."""


def _ruff_config(ctx: ToolContext, manifest: Manifest) -> list[str]:
    """The task's own ruff configuration, named explicitly, or none at all (`--isolated`); under the
    task's configuration, its noqa comments count."""
    for path in declared_files(manifest, RUFF_CONFIG_FILES):
        if PurePosixPath(path).name != "pyproject.toml" or b"[tool.ruff" in (
            read_inside(ctx.workspace, path, 1_000_000) or b""
        ):
            return ["--config", "{workspace}/" + path]
    return [
        "--isolated",
        "--ignore-noqa",
    ]  # no configuration, and no noqa comment the code under review wrote


def run_ruff(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run ruff check over a sealed snapshot: the admitted Python files under `target`, named one by one.

    Facts: exit_code, findings, files (how many were checked), target, report, evidence, unproven.
    """
    where = check_target(ctx, target)
    manifest = manifest_of(ctx)
    base = str(PurePosixPath(where.partition("::")[0] or "."))
    files = sorted(
        path for path in manifest.area("workspace")
        if path.endswith((".py", ".pyi")) and (base == "." or path == base or path.startswith(base + "/"))
    )  # fmt: skip
    facts: dict[str, Any] = {"target": normalize_target(where), "report": None, "files": len(files)}
    shown = manifest.describe() + config_note(authored_config(manifest))
    if not files:
        facts.update(findings=None, unproven=["ruff had no Python file to check"])
        facts["evidence"] = evidence_facts(manifest, [])
        return ToolOutcome(
            "error", shown + "[no Python file is evidence under this target: nothing checked]", facts
        )
    # Explicit files: no discovery, no exclusion, no ignore file (.gitignore, .ignore) decides what is read.
    argv = [sys.executable, "-I", "-m", "ruff", "check", "--no-cache", "--output-format=json"]
    argv += [f"--output-file={OUTBOX}/{_RUFF_REPORT}", "--no-respect-gitignore", *_ruff_config(ctx, manifest)]
    argv += ["--", *(f"{{workspace}}/{f}" for f in files)]
    result = ctx.sandbox.run(
        argv,
        writable=False,
        output_limit=_RUFF_JSON_LIMIT,
        outbox=True,
        snapshot=snapshot_areas(ctx, manifest),
    )
    facts["evidence"] = evidence_facts(manifest, [result])
    if result.timed_out:
        return command_outcome(result, facts)
    try:
        findings = json.loads(result.outbox.get(_RUFF_REPORT, b"")[:_RUFF_JSON_LIMIT])
        if not isinstance(findings, list):
            raise ValueError("not a list")
    except ValueError:
        if authored_config(manifest):  # a configuration a role wrote can break ruff: the role's problem
            return command_outcome(result, {**facts, "findings": None})
        if _ruff_runs(ctx, manifest):  # ruff works here: these files stopped it (a stack overflow, say)
            why = f"ruff stopped on these files without a report (exit code {result.exit_code})"
            return replace(
                command_outcome(result, {**facts, "findings": None, "unproven": [why]}), status="error"
            )
        # PSE named every file and the configuration: a ruff that wrote no report could not run.
        raise ToolInfrastructureError(
            "ruff could not run in the sandbox (it wrote no report); it said: "
            + (result.output.strip()[-1500:] or f"nothing (exit code {result.exit_code})")
        ) from None
    facts["report"] = "json"
    facts["unproven"] = []
    prefix = result.cwd.rstrip("/") + "/"
    lines = [_finding_line(f, prefix) for f in findings]
    lines.append(
        f"Found {len(findings)} finding(s)." if findings else f"All checks passed! ({len(files)} file(s))"
    )
    listed = {"finding_list": lines[: min(len(findings), _LISTED)]} if findings else {}
    return command_outcome(result, {**facts, "findings": len(findings), **listed}, shown + "\n".join(lines))


def _ruff_runs(ctx: ToolContext, manifest: Manifest) -> bool:
    """Ruff writes a report here under the check's configuration, given an empty file: whether a run
    without one failed on its files (a role's file nested too deeply overflows ruff's stack, issue 45) or
    could not run at all (the machinery's failure)."""
    argv = [sys.executable, "-I", "-m", "ruff", "check", "--no-cache", "--output-format=json"]
    argv += [
        f"--output-file={OUTBOX}/{_RUFF_REPORT}",
        *_ruff_config(ctx, manifest),
        "--stdin-filename=x.py",
        "-",
    ]
    probe = ctx.sandbox.run(
        argv, writable=False, outbox=True, stdin=b"", snapshot=snapshot_areas(ctx, manifest)
    )
    return _RUFF_REPORT in probe.outbox


def _finding_line(finding: dict[str, Any], prefix: str) -> str:
    """One finding on one line, with ruff's own safe fix when it has one: which lines, and their new text.

    A finding's name alone ("I001 Import block is un-sorted") did not tell a small model what to change:
    given it in a revise cycle, the 1.5B model wrote the same file again. The fix is ruff's, read from
    its JSON report, never applied: the Specialist still writes the change."""
    name = str(finding.get("filename", "")).removeprefix(prefix)
    loc = finding.get("location") or {}
    line = f"{name}:{loc.get('row')}:{loc.get('column')}: {finding.get('code')} {finding.get('message')}"
    fix = finding.get("fix") or {}
    if fix.get("applicability") != "safe":
        return line
    edits = fix.get("edits") or []
    if len(edits) == 1:
        edit = edits[0]
        start, end = edit.get("location") or {}, edit.get("end_location") or {}
        content = str(edit.get("content", ""))
        first, after = int(start.get("row") or 0), int(end.get("row") or 0)
        whole_lines = start.get("column") == 1 and end.get("column") == 1
        if whole_lines and 0 < first < after and len(content) <= _FIX_CHARS:
            one = after - first == 1
            rows = f"line {first}" if one else f"lines {first}-{after - 1}"
            new = f"{rows} {'becomes' if one else 'become'} {json.dumps(content)}"
            change = f"delete {rows}" if not content else new
            return f"{line} (ruff's fix: {change})"
    return f"{line} (ruff's fix: {fix['message']})" if fix.get("message") else line


def safe_fixes(ctx: ToolContext, rel: str, content: str) -> tuple[str, list[str]]:
    """`content` of the workspace file `rel` with ruff's safe fixes applied, and the codes they fixed.

    Runs in the sandbox, over the snapshot and with the configuration `run_ruff` uses, the file given
    on stdin (no role-chosen path is read). Nothing to fix, a ruff that failed, or a fixed text that
    no longer parses gives back `content` and no code: the fix is a convenience, the Evaluator's sealed
    `run_ruff` still decides.

    Why it exists: ruff's own findings, even with ruff's fix quoted in them, did not make the 1.5B model
    change its file (it wrote the same import block again, cycle after cycle, and the run ended at its
    budget); a mechanical fix ruff marks safe needs no model."""
    manifest = manifest_of(ctx)
    data = content.encode("utf-8")
    argv = [sys.executable, "-I", "-m", "ruff", "check", "--no-cache", "--no-respect-gitignore"]
    argv += [*_ruff_config(ctx, manifest), f"--stdin-filename={{workspace}}/{rel}"]
    snapshot = snapshot_areas(ctx, manifest)
    found = ctx.sandbox.run(
        [*argv, "--output-format=json", f"--output-file={OUTBOX}/{_RUFF_REPORT}", "-"],
        writable=False, outbox=True, stdin=data, snapshot=snapshot, output_limit=_RUFF_JSON_LIMIT,
    )  # fmt: skip
    try:
        findings = json.loads(found.outbox.get(_RUFF_REPORT, b"[]"))
    except ValueError:
        return content, []
    safe = [f for f in findings if isinstance(f, dict) and isinstance(f.get("fix"), dict)] if isinstance(
        findings, list
    ) else []  # fmt: skip
    codes = sorted({str(f.get("code")) for f in safe if f["fix"].get("applicability") == "safe"})
    if not codes:
        return content, []
    fixed = ctx.sandbox.run(
        [*argv, "--fix-only", "--silent", "-"],
        writable=False, stdin=data, snapshot=snapshot, output_limit=2 * len(content) + 4096,
    )  # fmt: skip
    if fixed.exit_code != 0 or fixed.truncated or not fixed.output.strip():
        return content, []
    try:
        parse_python(fixed.output)
    except (SyntaxError, ValueError):
        return content, []
    return (fixed.output, codes) if fixed.output != content else (content, [])
