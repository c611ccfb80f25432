"""The check tools: run_pytest and run_ruff, run so that the code under review cannot steer them.

Each runs isolated from the workspace: `python -I` (no workspace on `sys.path` at start-up, no PYTHON*
variables, no user site), no configuration discovered from the workspace unless the task declares it (`-c
/dev/null` for pytest, `--isolated` for ruff, which then also ignores `# noqa` comments), no pytest plugin
but PSE's own and those the task names (an installed plugin such as a rerun-on-failure one never shapes a
verdict unasked, and none costs start-up time), pytest's *append* import mode (a workspace module never
shadows the standard library or pytest), no cache. Their verdict comes from a machine-readable report
written outside the workspace (pytest's JUnit XML, ruff's JSON), never from what they print. Facts always
say which `target` ran, whether the `report` was read, and, for pytest, how many tests each author's files
held and how they ended (`by_author`), so the gates can demand a full run and tests the Specialist did not
write.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path, PurePosixPath
from typing import Any

from pse.roles import Role
from pse.sandbox import OUTBOX, CommandResult, read_inside, resolve_in_workspace
from pse.tools._junit import JUNIT_LIMIT, parse_junit
from pse.tools._protected import PYTEST_CONFIG_FILES, RUFF_CONFIG_FILES
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = [
    "command_outcome",
    "normalize_target",
    "parse_pytest_summary",
    "pytest_plugin_missing",
    "run_pytest",
    "run_ruff",
]

_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
_PYTEST_SUMMARY = re.compile(
    r"\b(no tests ran|no tests collected|\d+ tests? collected|"
    r"\d+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected))\b.*\bin \d+(\.\d+)?s\b"
)
# "2 failed, 5 passed in 0.47s (0:00:00)": the duration differs between runs, and a run-specific value in
# a prompt breaks strict replay of a recorded cassette, so the role sees the counts without it.
_PYTEST_DURATION = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?=\W*$)")
_RUFF_JSON_LIMIT = 8_000_000
_JUNIT = "junit.xml"
_PSE_ROOT = Path(__file__).resolve().parent.parent.parent  # the folder that holds the `pse` package
_RUFF_REPORT = "ruff.json"


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


def _target(ctx: ToolContext, target: str) -> str:
    """Validate a pytest/ruff target: a workspace path, optionally with a `::node` suffix for pytest."""
    text = target.strip() or "."
    if text.startswith("-"):
        raise ValueError(f"target {text!r} looks like an option; give a path relative to the workspace")
    resolve_in_workspace(ctx.workspace, text.split("::", 1)[0])
    return text


def _without_duration(output: str) -> str:
    """Drop the duration from pytest's final summary line only."""
    lines = output.splitlines(keepends=True)
    for i in range(len(lines) - 1, -1, -1):
        if _PYTEST_SUMMARY.search(lines[i]):
            lines[i] = _PYTEST_DURATION.sub("", lines[i])
            break
    return "".join(lines)


def parse_pytest_summary(output: str) -> dict[str, int]:
    """Counts from pytest's final summary line (`1 failed, 2 passed in 0.1s`); zeros when none is found.

    For display and diagnostics only: the gates read the JUnit report, which printed text cannot forge.
    """
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for line in reversed(output.splitlines()):
        if _PYTEST_SUMMARY.search(line):
            for number, word in _PYTEST_COUNT.findall(line):
                key = "errors" if word.startswith("error") else word
                if key in counts:
                    counts[key] = int(number)
            break
    return counts


def _declared(ctx: ToolContext, names: tuple[str, ...]) -> list[str]:
    """Declared check-configuration files of these names that exist in the workspace, shallowest first."""
    found = [p for p in ctx.check_config if PurePosixPath(p).name in names and (ctx.workspace / p).is_file()]
    return sorted(found, key=lambda p: (len(PurePosixPath(p).parts), p))


def _authored_config(ctx: ToolContext) -> list[str]:
    """Declared check-configuration files a role (not the task) wrote: the Evaluator is told about them."""
    return [
        f"{p} ({ctx.author('workspace', p)})"
        for p in sorted(ctx.check_config)
        if ctx.author("workspace", p) != "task"
    ]


def _note(authored: list[str]) -> str:
    if not authored:
        return ""
    return (
        "[note] check-configuration files written by a role (the task allows them): "
        + ", ".join(authored)
        + ". Read them before you trust this run.\n"
    )


def _has_tests(folder: Path) -> bool:
    return any(name.endswith(".py") for _, _, files in os.walk(folder) for name in files)


_WANTS_A_PLUGIN = ("async def functions are not natively supported", "PytestUnknownMarkWarning")
"""What pytest says when a test needs a plugin it did not load (pytest-asyncio's, for one)."""


def _plugin_hint(output: str) -> str:
    if not any(sign in output for sign in _WANTS_A_PLUGIN):
        return ""
    return (
        "\n[note] this pytest loads only the plugins the task names in [verification] pytest_plugins of "
        "its task.toml; a test that needs another (async tests, a plugin's marks) fails here"
    )


def pytest_plugin_missing(name: str) -> bool:
    """No installed plugin answers to `-p name`: neither a `pytest11` entry point nor a module."""
    if name in {entry.name for entry in entry_points(group="pytest11")}:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a dotted name whose parent package is not installed
        return True


def run_pytest(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run pytest on a workspace path (and the Evaluator's own tests, when it has some).

    Facts: exit_code, passed, failed, errors, skipped (from the JUnit report), target, report
    (`junit`, or None when pytest wrote none: the run then counts as failed), by_author.
    """
    where = _target(ctx, target)
    config = _declared(ctx, PYTEST_CONFIG_FILES)
    argv = [sys.executable, "-I", "-m", "pytest", "--disable-plugin-autoload", "-p", "no:cacheprovider"]
    argv += ["-p", "pse._pytest_plugin", *(a for name in ctx.pytest_plugins for a in ("-p", name))]
    argv += ["-q", "--color=no", "--rootdir=.", "--confcutdir=.", "--import-mode=append"]
    argv += ["-c", config[0] if config else "/dev/null"]  # never a configuration the task did not declare
    argv += [f"--junitxml={OUTBOX}/{_JUNIT}", "-o", "junit_family=xunit1"]
    if {"asyncio", "pytest_asyncio", "pytest_asyncio.plugin"} & set(ctx.pytest_plugins):
        argv += ["-o", "asyncio_default_fixture_loop_scope=function"]  # silences a plugin deprecation notice
    private = {}
    if ctx.evaluation is not None and _has_tests(ctx.evaluation):
        private["evaluation"] = ctx.evaluation
    argv += [where, *(["{evaluation}"] if private else [])]
    result = ctx.sandbox.run(
        argv,
        writable=ctx.writable,
        ro_binds=[_PSE_ROOT],  # the plugin's package: an editable install lives outside the venv
        private=private,
        outbox=True,
        accept=ctx.accept,
    )
    facts: dict[str, Any] = {"target": normalize_target(where), "report": None}
    shown = _note(_authored_config(ctx)) + _without_duration(result.output) + _plugin_hint(result.output)
    report = parse_junit(result.outbox.get(_JUNIT, b"")[:JUNIT_LIMIT]) if not result.timed_out else None
    if report is None:
        facts.update(passed=0, failed=0, errors=0, skipped=0, by_author={})
        outcome = command_outcome(
            result, facts, shown + "\n[pytest wrote no readable report: this run does not count]"
        )
        return outcome if outcome.status == "timeout" else replace(outcome, status="error")
    facts["report"] = "junit"
    facts.update(report.counts)
    by_author: dict[str, dict[str, int]] = {}
    for case in report.cases:
        who = _test_author(ctx, case.file)
        counts = by_author.setdefault(who, dict.fromkeys(("passed", "failed", "errors", "skipped"), 0))
        counts[case.outcome] += 1
    facts["by_author"] = by_author
    return command_outcome(result, facts, shown)


def _test_author(ctx: ToolContext, file: str) -> str:
    """Who wrote the test file a JUnit case names (relative to the workspace, or `../` out of it)."""
    pure = PurePosixPath(file)
    if pure.is_absolute() or ".." in pure.parts:
        return Role.EVALUATOR if ctx.evaluation is not None else "unknown"
    return ctx.author("workspace", str(pure))


def _ruff_config(ctx: ToolContext) -> list[str]:
    declared = _declared(ctx, RUFF_CONFIG_FILES)
    if declared and any(
        PurePosixPath(p).name != "pyproject.toml"
        or b"[tool.ruff" in (read_inside(ctx.workspace, p, 1_000_000) or b"")
        for p in declared
    ):
        return []  # the task's own configuration, found by ruff's discovery; noqa comments count
    return ["--isolated", "--ignore-noqa"]  # no configuration the code under review could have written


def run_ruff(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run ruff check on a workspace path; facts: exit_code, findings, target, report."""
    where = _target(ctx, target)
    argv = [sys.executable, "-I", "-m", "ruff", "check", "--no-cache", "--output-format=json"]
    argv += [f"--output-file={OUTBOX}/{_RUFF_REPORT}", *_ruff_config(ctx), "--", where]
    result = ctx.sandbox.run(
        argv, writable=ctx.writable, output_limit=_RUFF_JSON_LIMIT, outbox=True, accept=ctx.accept
    )
    facts: dict[str, Any] = {"target": normalize_target(where), "report": None}
    if result.timed_out:
        return command_outcome(result, facts)
    try:
        findings = json.loads(result.outbox.get(_RUFF_REPORT, b"")[:_RUFF_JSON_LIMIT])
        if not isinstance(findings, list):
            raise ValueError("not a list")
    except ValueError:
        return command_outcome(result, {**facts, "findings": None})  # ruff failed (bad path...): its text
    facts["report"] = "json"
    prefix = result.cwd.rstrip("/") + "/"
    lines = []
    for f in findings:
        name = str(f.get("filename", "")).removeprefix(prefix)
        loc = f.get("location") or {}
        lines.append(f"{name}:{loc.get('row')}:{loc.get('column')}: {f.get('code')} {f.get('message')}")
    lines.append(f"Found {len(findings)} finding(s)." if findings else "All checks passed!")
    text = _note(_authored_config(ctx)) + "\n".join(lines)
    return command_outcome(result, {**facts, "findings": len(findings)}, text)
