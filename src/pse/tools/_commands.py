"""Command tools: bash, run_pytest, run_ruff, run_check. They run in the sandbox and report facts.

Status rule for every command tool: `ok` when the command exited 0, `error` otherwise, `timeout` when it
was killed. Facts always hold `exit_code` (None after a timeout), so the engine's gates need no parsing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from pse.sandbox import CommandResult, resolve_in_workspace
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = ["bash", "parse_pytest_summary", "run_check", "run_pytest", "run_ruff"]

_BASH = ("/bin/bash", "--noprofile", "--norc", "-c")
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
_PYTEST_SUMMARY = re.compile(
    r"\b(no tests ran|\d+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected))\b.*"
    r"\bin \d+(\.\d+)?s\b"
)
_PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_RUFF_JSON_LIMIT = 8_000_000


def _outcome(result: CommandResult, facts: dict[str, Any], output: str | None = None) -> ToolOutcome:
    text = result.output if output is None else output
    if result.timed_out:
        status: Any = "timeout"
    else:
        status = "ok" if result.exit_code == 0 else "error"
        text = f"{text.rstrip()}\n[exit code {result.exit_code}]".lstrip("\n")
    return ToolOutcome(
        status, text, {"exit_code": result.exit_code, **facts}, result.sandbox, result.truncated
    )


def _target(ctx: ToolContext, target: str) -> str:
    """Validate a pytest/ruff target: a workspace path, optionally with a `::node` suffix for pytest."""
    text = target.strip() or "."
    if text.startswith("-"):
        raise ValueError(f"target {text!r} looks like an option; give a path relative to the workspace")
    resolve_in_workspace(ctx.workspace, text.split("::", 1)[0])
    return text


def bash(ctx: ToolContext, command: str) -> ToolOutcome:
    """Run a bash command in the workspace (read-only unless the grant is read-write)."""
    if not command.strip():
        raise ValueError("empty command")
    return _outcome(ctx.sandbox.run([*_BASH, command], writable=ctx.writable), {})


# "2 failed, 5 passed in 0.47s (0:00:00)": the duration differs between runs, and a run-specific value in
# a prompt breaks strict replay of a recorded cassette, so the role sees the counts without it.
_PYTEST_DURATION = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?=\W*$)")


def _without_duration(output: str) -> str:
    """Drop the duration from pytest's final summary line only."""
    lines = output.splitlines(keepends=True)
    for i in range(len(lines) - 1, -1, -1):
        if _PYTEST_SUMMARY.search(lines[i]):
            lines[i] = _PYTEST_DURATION.sub("", lines[i])
            break
    return "".join(lines)


def parse_pytest_summary(output: str) -> dict[str, int]:
    """Counts from pytest's final summary line (`1 failed, 2 passed in 0.1s`); zeros when none is found."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for line in reversed(output.splitlines()):
        if _PYTEST_SUMMARY.search(line):
            for number, word in _PYTEST_COUNT.findall(line):
                key = "errors" if word.startswith("error") else word
                if key in counts:
                    counts[key] = int(number)
            break
    return counts


def run_pytest(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run the project's pytest on a workspace path; facts: exit_code, passed, failed, errors, skipped."""
    where = _target(ctx, target)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--color=no", "--rootdir=."]
    argv.append("--confcutdir=.")  # never load a conftest.py from above the workspace
    if not any((ctx.workspace / name).is_file() for name in _PYTEST_CONFIGS):
        argv += ["-c", "/dev/null"]  # no config of its own: do not inherit one from a parent directory
    if importlib.util.find_spec("pytest_asyncio") is not None:
        argv += ["-o", "asyncio_default_fixture_loop_scope=function"]  # silences a plugin deprecation notice
    argv.append(where)
    result = ctx.sandbox.run(argv, writable=ctx.writable)
    facts = parse_pytest_summary(result.output) if not result.timed_out else {}
    return _outcome(result, facts, _without_duration(result.output))


def _ruff_config(workspace: Path) -> list[str]:
    for name in ("ruff.toml", ".ruff.toml"):
        if (workspace / name).is_file():
            return []
    pyproject = workspace / "pyproject.toml"
    if pyproject.is_file() and "[tool.ruff" in pyproject.read_text(errors="replace"):
        return []
    return ["--isolated"]  # no config of its own: ignore any ruff config of a parent directory


def run_ruff(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run ruff check on a workspace path; facts: exit_code, findings."""
    where = _target(ctx, target)
    argv = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--output-format=json",
        *_ruff_config(ctx.workspace),
    ]
    result = ctx.sandbox.run([*argv, "--", where], writable=ctx.writable, output_limit=_RUFF_JSON_LIMIT)
    if result.timed_out:
        return _outcome(result, {})
    try:
        findings = json.loads(result.output)
    except json.JSONDecodeError:
        return _outcome(result, {"findings": None})  # ruff failed (bad config, missing path): show its text
    prefix = result.cwd.rstrip("/") + "/"
    lines = []
    for f in findings:
        name = str(f.get("filename", "")).removeprefix(prefix)
        loc = f.get("location") or {}
        lines.append(f"{name}:{loc.get('row')}:{loc.get('column')}: {f.get('code')} {f.get('message')}")
    lines.append(f"Found {len(findings)} finding(s)." if findings else "All checks passed!")
    return _outcome(result, {"findings": len(findings)}, "\n".join(lines))


def run_check(ctx: ToolContext, name: str) -> ToolOutcome:
    """Run one of the task's declared check commands, always read-only; facts: exit_code, check."""
    key = name.strip()
    if key not in ctx.checks:
        declared = ", ".join(sorted(ctx.checks)) or "none (this task declares no checks)"
        raise ValueError(f"no check named {key!r}; the declared checks are: {declared}")
    command = ctx.checks[key]
    binds: list[Path] = []
    if ctx.task_dir is not None:
        command = command.replace("{task_dir}", shlex.quote(str(ctx.task_dir.resolve())))
        binds.append(ctx.task_dir.resolve())
    command = command.replace("{workspace}", ".")
    result = ctx.sandbox.run([*_BASH, command], writable=False, ro_binds=binds)
    return _outcome(result, {"check": key})
