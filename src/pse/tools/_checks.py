"""What every check tool shares: the manifest of a check, its sealed snapshot, its evidence facts, its status.

Sealed verification (docs/security.md): a check never sees the live workspace. It runs over a fresh,
read-only snapshot of exactly the files the manifest admits (`pse.tools._evidence`), hashed as copied;
whatever else a role wrote is absent, and the Evaluator is told what was left out and who wrote it.
Only PSE's configuration applies (the task's declared check-configuration files, or none), and a check's
verdict comes from a machine-readable record, never from what it prints: `run_pytest`
(`pse.tools._pytest`), `run_ruff` (`pse.tools._ruff`), `run_check` (`pse.tools._commands`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from pse.sandbox import CommandResult, resolve_in_workspace
from pse.tools._evidence import EvidenceRules, Manifest, build_manifest
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = [
    "authored_config",
    "check_target",
    "command_outcome",
    "config_note",
    "declared_files",
    "evidence_facts",
    "manifest_of",
    "normalize_target",
    "snapshot_areas",
]

_LISTED = 200
"""Most files, tests or left-out paths one check's facts list (the counts are always whole)."""
Areas = dict[str, tuple[Path, dict[str, str]]]


def command_outcome(result: CommandResult, facts: dict[str, Any], output: str | None = None) -> ToolOutcome:
    """`ok` when the command exited 0, `error` otherwise, `timeout` when killed; facts hold `exit_code`."""
    text = result.output if output is None else output
    if result.timed_out:
        status: Any = "timeout"
    else:
        status = "ok" if result.exit_code == 0 else "error"
        text = f"{text.rstrip()}\n[exit code {result.exit_code}]".lstrip("\n")
    return ToolOutcome(
        status, text, {"exit_code": result.exit_code, **facts}, result.sandbox, result.truncated
    )


def normalize_target(target: str) -> str:
    """A check target as the gates compare it: `./tests/` → `tests`, `.` stays `.`; `::node` kept."""
    path, sep, node = target.strip().partition("::")
    return str(PurePosixPath(path or ".")) + sep + node


def check_target(ctx: ToolContext, target: str) -> str:
    """Validate a pytest/ruff target: a workspace path, optionally with a `::node` suffix for pytest."""
    text = target.strip() or "."
    if text.startswith("-"):
        raise ValueError(f"target {text!r} looks like an option; give a path relative to the workspace")
    resolve_in_workspace(ctx.workspace, text.split("::", 1)[0])
    return text


def declared_files(manifest: Manifest, names: tuple[str, ...]) -> list[str]:
    """Declared check-configuration files of these names in the snapshot, shallowest first."""
    found = [f.path for f in manifest.files if f.kind == "config" and PurePosixPath(f.path).name in names]
    return sorted(found, key=lambda p: (len(PurePosixPath(p).parts), p))


def authored_config(manifest: Manifest) -> list[str]:
    """Declared check-configuration files a role (not the task) wrote: the Evaluator is told about them."""
    return [f"{f.path} ({f.author})" for f in manifest.files if f.kind == "config" and f.author != "task"]


def config_note(authored: list[str]) -> str:
    if not authored:
        return ""
    return (
        "[note] check-configuration files written by a role (the task allows them): "
        + ", ".join(authored)
        + ". Read them before you trust this run.\n"
    )


def manifest_of(ctx: ToolContext) -> Manifest:
    """The check's manifest: the executor's, or (a bare context) one from the context's own rules."""
    if ctx.evidence is not None:
        return ctx.evidence()
    return build_manifest(
        ctx.workspace, ctx.evaluation, EvidenceRules(check_config=ctx.check_config), ctx.author
    )


def snapshot_areas(ctx: ToolContext, manifest: Manifest, areas: tuple[str, ...] = ("workspace",)) -> Areas:
    """What `Sandbox.run(snapshot=…)` copies: each area's live folder and its admitted files."""
    live = {"workspace": ctx.workspace, "evaluation": ctx.evaluation}
    return {
        area: (folder, dict.fromkeys(manifest.area(area), ""))
        for area in areas
        if (folder := live.get(area)) is not None
    }


def evidence_facts(manifest: Manifest, results: Sequence[CommandResult]) -> dict[str, Any]:
    """The manifest as the trace keeps it: each file with kind, author and the hash it was run with."""
    hashes: dict[str, str] = {}
    missing: list[str] = []
    for result in results:
        for area, files in result.snapshot.items():
            prefix = "@evaluation/" if area == "evaluation" else ""
            for path, digest in files.items():
                hashes[prefix + path] = digest
        missing += result.snapshot_missing
    return {
        "files": [
            {"path": f.path, "kind": f.kind, "author": f.author, "sha256": hashes.get(f.path)}
            for f in manifest.files[:_LISTED]
            if f.path in hashes
        ],
        "count": len(hashes),
        "left_out": [{"path": path, "author": who} for path, who in manifest.left_out[:_LISTED]],
        "missing": sorted(set(missing)),
    }
