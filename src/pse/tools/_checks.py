"""The check tools: run_pytest and run_ruff, run so that the code under review cannot steer them.

Sealed verification (docs/security.md): a check never sees the live workspace. It runs over a fresh,
read-only snapshot of exactly the files the manifest admits (`pse.tools._evidence`), hashed as copied;
whatever else a role wrote is absent, and the Evaluator is told what was left out and who wrote it.

Only PSE's configuration applies: `python -I`; pytest with explicit test files (no collection rule
chooses them), `-c` the task's declared ini-file or `/dev/null`, `--noconftest` unless the task declares a
conftest.py, `--rootdir`/`--confcutdir` at the snapshot, the append import mode, no plugin but PSE's and
the task's; ruff with explicit files, `--no-respect-gitignore`, and `--config` the task's file or
`--isolated --ignore-noqa`. Their verdict comes from machine-readable reports written outside the
snapshot (pytest's JUnit XML and PSE's plugin record, ruff's JSON), never from what they print.

A pytest run is **positive evidence** only when it collected tests, every collected test ran and passed
(a skip or an xfail proves nothing and may hide a failure; a session cut short leaves tests without a
result), and each declared Python output was imported from its own path and executed while the tests
ran (coverage, measured by PSE's plugin). Otherwise its status is `error` and `facts["unproven"]` says
why. The Evaluator's own tests run in a session of their own, so who wrote a test comes from PSE's write
records (which files a session was given), never from what the test process reports.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path, PurePosixPath
from typing import Any

from pse.exceptions import ToolInfrastructureError
from pse.sandbox import OUTBOX, CommandResult, read_inside, resolve_in_workspace
from pse.tools._evidence import EvidenceRules, Manifest, build_manifest
from pse.tools._junit import JUNIT_LIMIT, parse_junit
from pse.tools._proof import Session, coverage_facts, coverage_of, unproven
from pse.tools._protected import PYTEST_CONFIG_FILES
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = [
    "command_outcome",
    "coverage_of",
    "evidence_facts",
    "manifest_of",
    "normalize_target",
    "parse_pytest_summary",
    "pytest_plugin_missing",
    "run_pytest",
    "snapshot_areas",
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
_EVIDENCE = "evidence.json"
_LISTED = 200
"""Most files, tests or left-out paths one check's facts list (the counts are always whole)."""
Areas = dict[str, tuple[Path, dict[str, str]]]
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


def _declared(manifest: Manifest, names: tuple[str, ...]) -> list[str]:
    """Declared check-configuration files of these names in the snapshot, shallowest first."""
    found = [f.path for f in manifest.files if f.kind == "config" and PurePosixPath(f.path).name in names]
    return sorted(found, key=lambda p: (len(PurePosixPath(p).parts), p))


_PYTEST_SECTIONS = {"pyproject.toml": b"[tool.pytest", "tox.ini": b"[pytest]", "setup.cfg": b"[tool:pytest]"}


def _pytest_config(ctx: ToolContext, manifest: Manifest) -> list[str]:
    """The admitted pytest configuration files, the one pytest itself would take first: shallowest, then in
    pytest's order of names, and a shared file (pyproject.toml, tox.ini, setup.cfg) only when it holds a
    pytest section (a repository's setup.cfg for flake8 must not hide its pytest.ini)."""
    found = sorted(
        _declared(manifest, PYTEST_CONFIG_FILES),
        key=lambda p: (len(PurePosixPath(p).parts), PYTEST_CONFIG_FILES.index(PurePosixPath(p).name), p),
    )
    for path in found:
        section = _PYTEST_SECTIONS.get(PurePosixPath(path).name)
        if section is None or section in (read_inside(ctx.workspace, path, 1_000_000) or b""):
            return [path, *(p for p in found if p != path)]
    return found


def _authored_config(manifest: Manifest) -> list[str]:
    """Declared check-configuration files a role (not the task) wrote: the Evaluator is told about them."""
    return [f"{f.path} ({f.author})" for f in manifest.files if f.kind == "config" and f.author != "task"]


def _note(authored: list[str]) -> str:
    if not authored:
        return ""
    return (
        "[note] check-configuration files written by a role (the task allows them): "
        + ", ".join(authored)
        + ". Read them before you trust this run.\n"
    )


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


def _pytest_argv(ctx: ToolContext, manifest: Manifest, tests: list[str], own: bool) -> list[str]:
    """pytest over the snapshot with PSE's configuration only: each flag stands for one discovery rule
    of pytest's that the files under review could otherwise steer (tests/test_check_discovery.py pins
    each one)."""
    config = _pytest_config(ctx, manifest)
    conftest = any(f.kind == "config" and PurePosixPath(f.path).name == "conftest.py" for f in manifest.files)
    argv = [sys.executable, "-I", "-m", "pytest"]  # -I: no PYTHON* variables, no user site, no cwd on path
    argv += ["--disable-plugin-autoload", "-p", "no:cacheprovider", "-p", "pse._pytest_plugin"]
    argv += [a for name in ctx.pytest_plugins for a in ("-p", name)]  # the task's plugins, no other
    argv += ["-q", "--color=no", "--rootdir={workspace}", "--confcutdir={workspace}", "--import-mode=append"]
    argv += ["-c", "{workspace}/" + config[0] if config else "/dev/null"]  # never an undeclared ini-file
    if own or not conftest:
        argv.append("--noconftest")  # conftest.py only when the task declares one, never for its own tests
    argv += [
        f"--junitxml={OUTBOX}/{_JUNIT}",
        "-o",
        "junit_family=xunit1",
        f"--pse-evidence={OUTBOX}/{_EVIDENCE}",
    ]
    if {"asyncio", "pytest_asyncio", "pytest_asyncio.plugin"} & set(ctx.pytest_plugins):
        argv += ["-o", "asyncio_default_fixture_loop_scope=function"]  # silences a plugin deprecation notice
    modules = sorted({m for rule in manifest.coverage for m in rule.modules})
    argv += [f"--pse-cover={{workspace}}/{m}" for m in modules]
    place = "{evaluation}/" if own else "{workspace}/"
    return [*argv, "--", *(place + t for t in tests)]  # explicit files: no collection rule applies


def _tests_for(manifest: Manifest, target: str) -> list[str]:
    """The admitted workspace test files (or node ids) a target names; every one for `.`."""
    path, sep, node = target.partition("::")
    path = str(PurePosixPath(path or "."))
    admitted = manifest.tests("workspace")
    if path == ".":
        return admitted
    chosen = [t for t in admitted if t == path or t.startswith(path.rstrip("/") + "/")]
    if not chosen:
        who = dict(manifest.left_out).get(path)
        why = (
            f"it was written by {who} but is not declared as an output or evidence"
            if who
            else "no such test file"
        )
        raise ValueError(
            f"target {target!r} holds no admitted test file ({why}); run_pytest runs only evidence"
        )
    return [chosen[0] + sep + node] if sep else chosen


def _session(ctx: ToolContext, manifest: Manifest, tests: list[str], own: bool) -> Session:
    areas = snapshot_areas(ctx, manifest, ("workspace", "evaluation") if own else ("workspace",))
    result = ctx.sandbox.run(
        _pytest_argv(ctx, manifest, tests, own),
        writable=False,
        ro_binds=[_PSE_ROOT],  # the plugin's package: an editable install lives outside the venv
        outbox=True,
        snapshot=areas,
    )
    report = parse_junit(result.outbox.get(_JUNIT, b"")[:JUNIT_LIMIT]) if not result.timed_out else None
    record = None
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        loaded = json.loads(result.outbox.get(_EVIDENCE, b"null")[:JUNIT_LIMIT])
        record = loaded if isinstance(loaded, dict) else None
    if _EVIDENCE not in result.outbox and not result.timed_out and not _authored_config(manifest):
        # PSE's plugin writes its record as pytest configures it: without one, pytest never got that far
        # (not installed for this interpreter, the plugin not importable, a broken task ini-file). That
        # is the check failing to run, never a test failing.
        raise ToolInfrastructureError(
            "pytest could not start in the sandbox (PSE's plugin never ran); it said: "
            + (result.output.strip()[-1500:] or f"nothing (exit code {result.exit_code})")
        )
    if own:
        authors = {f.relative: f.author for f in manifest.files if f.area == "evaluation"}
        return Session(result, report, record, lambda file: _own_author(authors))
    authors = {f.path: f.author for f in manifest.files if f.area == "workspace"}
    return Session(result, report, record, lambda file: authors.get(str(PurePosixPath(file)), "unknown"))


def _own_author(authors: dict[str, str]) -> str:
    """Tests of the evaluation-area run belong to whoever wrote that area (only the Evaluator can)."""
    who = set(authors.values())
    return who.pop() if len(who) == 1 else "unknown"


def run_pytest(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run pytest over a sealed snapshot of the evidence: the workspace's admitted tests, and the
    Evaluator's own tests (when it has some) in a second process of their own.

    Facts: exit_code, passed, failed, errors, skipped (from the JUnit reports), target, report (`junit`,
    or None when a run wrote none: the run then counts as failed), by_author, tests, coverage, evidence,
    unproven (why the run is not positive evidence; the run then counts as failed).
    """
    where = _target(ctx, target)
    full = PurePosixPath(where.partition("::")[0] or ".") == PurePosixPath(".")
    manifest = manifest_of(ctx)
    shown = manifest.describe() + _note(_authored_config(manifest))
    runs: list[tuple[list[str], bool]] = []
    workspace_tests = _tests_for(manifest, where)
    if workspace_tests:
        runs.append((workspace_tests, False))
    own = manifest.tests("evaluation")
    if own and ctx.evaluation is not None:
        runs.append((own, True))
    facts: dict[str, Any] = {"target": normalize_target(where), "report": None}
    if not runs:
        facts.update(
            passed=0, failed=0, errors=0, skipped=0, by_author={}, unproven=["no test file is evidence"]
        )
        facts["evidence"] = evidence_facts(manifest, [])
        left = "; the test files a role wrote but nobody declared were left out" if manifest.left_out else ""
        return ToolOutcome("error", shown + f"[no test file is evidence here{left}: nothing ran]", facts)
    sessions = [_session(ctx, manifest, tests, own) for tests, own in runs]
    hashes = [s.result.snapshot.get("workspace") for s in sessions]
    if any(h != hashes[0] for h in hashes):
        raise ToolInfrastructureError("the workspace changed between the two pytest sessions of one check")
    texts = [_without_duration(s.result.output) for s in sessions]
    shown += "\n".join(
        (f"[the Evaluator's own tests, in a session of their own]\n{t}" if own else t)
        for t, (_, own) in zip(texts, runs, strict=True)
    ) + "".join(_plugin_hint(t) for t in texts)
    facts["evidence"] = evidence_facts(manifest, [s.result for s in sessions])
    timed_out = next((s.result for s in sessions if s.result.timed_out), None)
    if timed_out is not None or any(s.report is None for s in sessions):
        facts.update(passed=0, failed=0, errors=0, skipped=0, by_author={})
        first = timed_out or next(s.result for s in sessions if s.report is None)
        outcome = command_outcome(
            first, facts, shown + "\n[pytest wrote no readable report: this run does not count]"
        )
        return outcome if outcome.status == "timeout" else replace(outcome, status="error")
    facts["report"] = "junit"
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped"), 0)
    by_author: dict[str, dict[str, int]] = {}
    tests: list[dict[str, str]] = []
    for s in sessions:
        assert s.report is not None
        for case in s.report.cases:
            counts[case.outcome] += 1
            who = s.author(case.file)
            mine = by_author.setdefault(who, dict.fromkeys(("passed", "failed", "errors", "skipped"), 0))
            mine[case.outcome] += 1
            if len(tests) < _LISTED:
                test = {"test": f"{case.file}::{case.name}", "outcome": case.outcome, "author": who}
                tests.append({**test, "message": case.message} if case.message else test)
    facts.update(counts, by_author=by_author, tests=tests)
    facts["coverage"] = coverage_facts(sessions, manifest)
    problems = unproven(sessions, manifest, full)
    facts["unproven"] = problems
    exit_code = next((s.result.exit_code for s in sessions if s.result.exit_code != 0), 0)
    worst = next((s.result for s in sessions if s.result.exit_code != 0), sessions[0].result)
    if problems:
        shown += "\n[this run is not positive evidence, whatever pytest said: " + "; ".join(problems) + "]"
    outcome = command_outcome(replace(worst, exit_code=exit_code), facts, shown)
    return replace(outcome, status="error") if problems and outcome.status == "ok" else outcome
