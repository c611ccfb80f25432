"""run_pytest: each author's tests in a session of their own, measuring the delivered code from outside it.

Only PSE's configuration applies: explicit test files (no collection rule chooses them), `-c` the task's
declared ini-file or `/dev/null`, `--noconftest` unless the task declares a conftest.py,
`--rootdir`/`--confcutdir` at the snapshot, the append import mode, no plugin but the task's (each flag
stands for one discovery rule of pytest's that the files under review could otherwise steer:
tests/test_check_discovery.py pins each one). A session runs only its author's tests and check
configuration (and the task's): a role's conftest.py never runs beside another author's tests.

The verdict comes from each session's record (`pse.tools._record`), written by a checking process that
never imported the delivered code (`pse.tools._sessions`, `pse.product`), never from what pytest
prints. A run is **positive evidence** only by the rules of `pse.tools._proof`; otherwise its status is
`error` and `facts["unproven"]` says why. Who wrote a test comes from PSE's write records (which files a
session was given), never from what a test process reports.
"""

from __future__ import annotations

import importlib.util
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import PurePosixPath
from typing import Any

from pse.exceptions import ToolInfrastructureError
from pse.sandbox import read_inside
from pse.tools._backing import named_line, named_outcomes
from pse.tools._checks import (
    authored_config,
    check_target,
    command_outcome,
    config_note,
    declared_files,
    evidence_facts,
    manifest_of,
    normalize_target,
)
from pse.tools._evidence import Manifest
from pse.tools._files import EVALUATION_PREFIX, resolve_path
from pse.tools._own_tests import code_faults, hollow_tests
from pse.tools._proof import Session, output_facts, unproven
from pse.tools._protected import PYTEST_CONFIG_FILES
from pse.tools._pyhints import syntax_problem
from pse.tools._registry import ToolContext, ToolOutcome
from pse.tools._sessions import SessionPlan, plan_sessions, run_session

__all__ = ["parse_pytest_summary", "pytest_over", "pytest_plugin_missing", "run_pytest"]

_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
_PYTEST_SUMMARY = re.compile(
    r"\b(no tests ran|no tests collected|\d+ tests? collected|"
    r"\d+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected))\b.*\bin \d+(\.\d+)?s\b"
)
# "2 failed, 5 passed in 0.47s (0:00:00)": the duration differs between runs, and a run-specific value in
# a prompt breaks strict replay of a recorded cassette, so the role sees the counts without it.
_PYTEST_DURATION = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?=\W*$)")
_LISTED = 200
"""Most tests one check's facts list (the counts are always whole)."""
_COUNTS = ("passed", "failed", "errors", "skipped")
_FAULTS_READ = 1_000_000
"""The Evaluator's test files larger than this are not read for their own faults."""
_UNPARSED = "a test file that does not parse tests nothing: write it again with write_file, then run_pytest"
_PYTEST_SECTIONS = {"pyproject.toml": b"[tool.pytest", "tox.ini": b"[pytest]", "setup.cfg": b"[tool:pytest]"}
_WANTS_A_PLUGIN = ("async def functions are not natively supported", "PytestUnknownMarkWarning")
"""What pytest says when a test needs a plugin it did not load (pytest-asyncio's, for one)."""


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

    For display and diagnostics only: the gates read the sessions' records, which printed text cannot forge.
    """
    counts = dict.fromkeys(_COUNTS, 0)
    for line in reversed(output.splitlines()):
        if _PYTEST_SUMMARY.search(line):
            for number, word in _PYTEST_COUNT.findall(line):
                key = "errors" if word.startswith("error") else word
                if key in counts:
                    counts[key] = int(number)
            break
    return counts


def pytest_plugin_missing(name: str) -> bool:
    """No installed plugin answers to `-p name`: neither a `pytest11` entry point nor a module."""
    if name in {entry.name for entry in entry_points(group="pytest11")}:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a dotted name whose parent package is not installed
        return True


def _plugin_hint(output: str) -> str:
    if not any(sign in output for sign in _WANTS_A_PLUGIN):
        return ""
    return (
        "\n[note] this pytest loads only the plugins the task names in [verification] pytest_plugins of "
        "its task.toml; a test that needs another (async tests, a plugin's marks) fails here"
    )


def _pytest_config(ctx: ToolContext, manifest: Manifest) -> list[str]:
    """The admitted pytest configuration files, the one pytest itself would take first: shallowest, then in
    pytest's order of names, and a shared file (pyproject.toml, tox.ini, setup.cfg) only when it holds a
    pytest section (a repository's setup.cfg for flake8 must not hide its pytest.ini)."""
    found = sorted(
        declared_files(manifest, PYTEST_CONFIG_FILES),
        key=lambda p: (len(PurePosixPath(p).parts), PYTEST_CONFIG_FILES.index(PurePosixPath(p).name), p),
    )
    for path in found:
        section = _PYTEST_SECTIONS.get(PurePosixPath(path).name)
        if section is None or section in (read_inside(ctx.workspace, path, 1_000_000) or b""):
            return [path, *(p for p in found if p != path)]
    return found


def _mine(manifest: Manifest, plan: SessionPlan) -> set[str]:
    """Whose check configuration a session uses: the task's, and its author's (not for the own tests)."""
    return {"task"} if plan.own else {"task", plan.author}


def _roles_config(manifest: Manifest, plan: SessionPlan) -> bool:
    """The session uses check configuration a role wrote (declared by the task)."""
    mine = _mine(manifest, plan) - {"task"}
    return any(f.kind == "config" and f.author in mine for f in manifest.files)


def _pytest_args(ctx: ToolContext, manifest: Manifest, plan: SessionPlan) -> list[str]:
    """pytest's arguments for one session: PSE's configuration, and the session's author's own."""
    mine = _mine(manifest, plan)
    config = [c for c in _pytest_config(ctx, manifest) if manifest.author(c) in mine]
    conftest = not plan.own and any(
        f.kind == "config" and PurePosixPath(f.path).name == "conftest.py" and f.author in mine
        for f in manifest.files
    )
    argv = ["--disable-plugin-autoload", "-p", "no:cacheprovider"]
    argv += [a for name in ctx.pytest_plugins for a in ("-p", name)]  # the task's plugins, no other
    argv += ["-q", "--color=no", "--rootdir={workspace}", "--confcutdir={workspace}", "--import-mode=append"]
    argv += ["-c", "{workspace}/" + config[0] if config else "/dev/null"]  # never an undeclared ini-file
    argv += [] if conftest else ["--noconftest"]  # conftest.py only when the task declares one
    argv += ["--basetemp={shared}/tmp"]  # shared with the product process: a test hands it tmp_path files
    if {"asyncio", "pytest_asyncio", "pytest_asyncio.plugin"} & set(ctx.pytest_plugins):
        argv += ["-o", "asyncio_default_fixture_loop_scope=function"]  # silences a plugin deprecation notice
    place = "{evaluation}/" if plan.own else "{workspace}/"
    return [*argv, "--", *(place + t for t in plan.tests)]  # explicit files: no collection rule applies


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


def _in_area(target: str) -> bool:
    """Whether a target names the evaluation area (`@evaluation`, `@evaluation/FILE[::NODE]`)."""
    path = target.partition("::")[0].strip()
    return path == EVALUATION_PREFIX or path.startswith(EVALUATION_PREFIX + "/")


def _own_tests_for(ctx: ToolContext, own: list[str], target: str) -> list[str]:
    """The Evaluator's own test files (or node ids) a target in its evaluation area names; every one for
    `@evaluation`. The 1.5B model's Evaluator wrote `@evaluation/test_top_words.py` and ran run_pytest on
    that very path, which named no workspace test file and was refused (held-out top-words)."""
    path, sep, node = target.partition("::")
    resolve_path(ctx, path)  # a role without the area is refused, as its file tools are
    inside = str(PurePosixPath(path.strip()[len(EVALUATION_PREFIX) :].lstrip("/") or "."))
    if inside == ".":
        return own
    chosen = [t for t in own if t == inside or t.startswith(inside.rstrip("/") + "/")]
    if not chosen:
        raise ValueError(
            f"target {target!r} holds no test file of your evaluation area (no such test file): write it "
            "with write_file first, or run run_pytest with target . to run every test"
        )
    return [chosen[0] + sep + node] if sep else chosen


def _own_author(manifest: Manifest) -> str:
    """The evaluation area's tests belong to whoever wrote that area (only the Evaluator can)."""
    who = {f.author for f in manifest.files if f.area == "evaluation"}
    return who.pop() if len(who) == 1 else "unknown"


def _run_sessions(ctx: ToolContext, manifest: Manifest, plans: list[SessionPlan]) -> list[Session]:
    """Every session at once (they share nothing); in the plans' order."""
    with ThreadPoolExecutor(max_workers=len(plans), thread_name_prefix="pse-session") as pool:
        futures = [
            pool.submit(
                run_session, ctx, manifest, p, _pytest_args(ctx, manifest, p), _roles_config(manifest, p)
            )
            for p in plans
        ]
        return [future.result() for future in futures]


def run_pytest(ctx: ToolContext, target: str = ".") -> ToolOutcome:
    """Run pytest over sealed snapshots of the evidence: each author's admitted tests (the task's, each
    role's, the Evaluator's own) in a session of their own, the sessions at once.

    Facts: exit_code, passed, failed, errors, skipped (from the sessions' records), target, report
    (`checker`, or None when a session left no record: the run then counts as failed), by_author, tests,
    exercised (per declared Python module: imported, calls into it, proven), evidence, unproven (why the
    run is not positive evidence; the run then counts as failed).
    """
    return pytest_over(ctx, [target])


def pytest_over(ctx: ToolContext, targets: list[str]) -> ToolOutcome:
    """`run_pytest` over several targets at once (a task's `{python} -m pytest PATH ...` check)."""
    wheres = [check_target(ctx, target) for target in targets]
    full = any(PurePosixPath(w.partition("::")[0] or ".") == PurePosixPath(".") for w in wheres)
    manifest = manifest_of(ctx)
    shown = manifest.describe() + config_note(authored_config(manifest))
    own = manifest.tests("evaluation") if ctx.evaluation is not None else []
    theirs = [w for w in wheres if not _in_area(w)]
    chosen = list(dict.fromkeys(t for where in theirs for t in _tests_for(manifest, where)))
    if not theirs:  # only the Evaluator's own tests, as it named them
        own = list(dict.fromkeys(t for where in wheres for t in _own_tests_for(ctx, own, where)))
    own, unparsed, hollow = _parsing(ctx, own)
    if unparsed:
        shown += f"[left out of this run: {'; '.join(f['fault'] for f in unparsed)}: {_UNPARSED}]\n"
    plans = plan_sessions(manifest, chosen, own, _own_author(manifest))
    facts: dict[str, Any] = {"target": " ".join(normalize_target(w) for w in wheres), "report": None}
    facts |= ({"own_faults": unparsed} if unparsed else {}) | ({"hollow": hollow} if hollow else {})
    if not plans:
        facts.update(dict.fromkeys(_COUNTS, 0), by_author={}, unproven=["no test file is evidence"])
        facts["evidence"] = evidence_facts(manifest, [])
        left = "; the test files a role wrote but nobody declared were left out" if manifest.left_out else ""
        return ToolOutcome("error", shown + f"[no test file is evidence here{left}: nothing ran]", facts)
    sessions = _run_sessions(ctx, manifest, plans)
    _same_files(sessions)
    for s, plan in zip(sessions, plans, strict=True):
        text = _without_duration(s.result.output)
        head = f"[{s.author}'s tests, in a session of their own]\n" if len(plans) > 1 or plan.own else ""
        said = s.product_output and f"\n[the product process wrote, outside the calls: {s.product_output}]"
        shown += head + text + said + _plugin_hint(text) + "\n"
    facts["evidence"] = evidence_facts(manifest, [s.result for s in sessions])
    timed_out = next((s.result for s in sessions if s.result.timed_out), None)
    if timed_out is not None:
        facts.update(dict.fromkeys(_COUNTS, 0), by_author={})
        return command_outcome(timed_out, facts, shown)
    facts["report"] = "checker"
    counts = dict.fromkeys(_COUNTS, 0)
    by_author: dict[str, dict[str, int]] = {}
    tests: list[dict[str, str]] = []
    for s in sessions:
        mine = by_author.setdefault(s.author, dict.fromkeys(_COUNTS, 0))
        for case in s.record.cases:
            counts[case.outcome] += 1
            mine[case.outcome] += 1
            if len(tests) < _LISTED:
                test = {"test": case.id, "outcome": case.outcome, "author": s.author}
                test |= {"message": case.message} if case.message else {}
                test |= {"where": case.where} if case.where else {}
                tests.append(test | ({"at": case.at} if case.at else {}))
    facts.update(counts, by_author=by_author, tests=tests)
    own_sessions = [s for s, plan in zip(sessions, plans, strict=True) if plan.own]
    if own_sessions:  # after every session: the names a met criterion cites (`_backing`)
        shown += named_line(named_outcomes(tests, own_sessions[0].author, hollow)) + "\n"
    faults = _own_faults(ctx, sessions, plans)
    if faults:
        facts["own_faults"] = unparsed + faults
        shown += (
            "[your own tests failed on their own code, not on the work: "
            + "; ".join(f["fault"] for f in faults)
            + ". Write them again with write_file, then run run_pytest]\n"
        )
    sources = _sources(ctx, manifest)
    facts["exercised"] = output_facts(sessions, manifest, sources)
    problems = unproven(sessions, manifest, full, sources)
    facts["unproven"] = problems
    worst = next((s.result for s in sessions if s.result.exit_code != 0), sessions[0].result)
    if problems:
        shown += "[this run is not positive evidence, whatever pytest said: " + "; ".join(problems) + "]"
    outcome = command_outcome(worst, facts, shown)
    return replace(outcome, status="error") if problems and outcome.status == "ok" else outcome


def _parsing(ctx: ToolContext, own: list[str]) -> tuple[list[str], list[dict[str, str]], list[str]]:
    """The Evaluator's own test files (or node ids) that parse, a fault for each file that does not, and
    the names of its tests that assert nothing of the work (`hollow_tests`).

    A test file that does not parse tests nothing, and left in the Evaluator's session it fails every
    later run, whatever the work is: the evaluation area outlives a cycle, and the 1.5B model wrote its
    next tests under a new name (held-out roman, heldout-16: a file that did not parse in cycle 2 failed
    cycle 3's run too, and the run ended at the turn cap). Left out, its fault is said and recorded; the
    `independent_tests` gate still needs an own test that ran and passed."""
    if ctx.evaluation is None:
        return own, [], []
    kept: list[str] = []
    problems: dict[str, str | None] = {}
    hollow: list[str] = []
    for test in own:
        file = test.partition("::")[0]
        if file not in problems:
            data = read_inside(ctx.evaluation, file, _FAULTS_READ)
            rel = f"{EVALUATION_PREFIX}/{file}"
            readable = data is not None and len(data) < _FAULTS_READ
            problems[file] = syntax_problem(rel, data) if readable and data is not None else None
            hollow += hollow_tests(data) if readable and data is not None and problems[file] is None else []
        if problems[file] is None:
            kept.append(test)
    faults = [
        {"file": f"{EVALUATION_PREFIX}/{file}", "fault": problem}
        for file, problem in problems.items()
        if problem is not None
    ]
    return kept, faults, hollow


def _own_faults(ctx: ToolContext, sessions: list[Session], plans: list[SessionPlan]) -> list[dict[str, str]]:
    """Why the Evaluator's own tests failed on their own code (`code_faults` of each file of its session,
    where the session had a failure), each with its file: a PARTIAL over them is about its tests, not
    the work."""
    found: list[dict[str, str]] = []
    for s, plan in zip(sessions, plans, strict=True):
        failing = [case for case in s.record.cases if case.outcome in ("failed", "errors")]
        if not plan.own or not failing or ctx.evaluation is None:
            continue
        for file in dict.fromkeys(test.partition("::")[0] for test in plan.tests):
            data = read_inside(ctx.evaluation, file, _FAULTS_READ)
            if data is None or len(data) >= _FAULTS_READ:
                continue
            rel = f"{EVALUATION_PREFIX}/{file}"  # how the record names a file of the area
            failures = {c.id.partition("::")[2]: c.message for c in failing if c.file in (rel, "")}
            found += [{"file": rel, "fault": fault} for fault in code_faults(rel, data, failures)]
    return found


def _same_files(sessions: list[Session]) -> None:
    """Every process of the check saw the same bytes of each file (the workspace did not change meanwhile):
    what the tests were told is what the product ran."""
    seen: dict[str, str] = {}
    for s in sessions:
        for files in (s.result.snapshot.get("workspace", {}), s.served):
            for path, digest in files.items():
                if seen.setdefault(path, digest) != digest:
                    raise ToolInfrastructureError(f"{path} changed in the workspace while the check ran")


def _sources(ctx: ToolContext, manifest: Manifest) -> dict[str, bytes]:
    """The declared Python outputs' bytes, as a check reads them (a missing one is absent)."""
    modules = {m for rule in manifest.coverage for m in rule.modules}
    return {m: data for m in modules if (data := read_inside(ctx.workspace, m, 4_000_000)) is not None}
