"""PSE's pytest plugin, loaded by `run_pytest` with `-p pse._pytest_plugin`: the evidence a test run leaves.

pytest runs over a sealed snapshot with the append import mode, so no module of the snapshot can shadow
the standard library or pytest itself. This plugin:

* appends the snapshot's root (pytest's rootdir) to the end of `sys.path`, so the Evaluator's own tests,
  which live outside it, can import the delivered modules;
* refuses a `pytest_plugins` list in a test module: plugins come from PSE and the task only
  (`[verification] pytest_plugins`), never from a file under review;
* measures, with coverage.py, which lines of each delivered Python module (`--pse-cover`, exact paths)
  ran while the modules were imported and which while the tests ran;
* writes `--pse-evidence` (JSON): the test ids collected (written as soon as collection ends, so a
  session cut short shows tests without a result), each test's outcome, and the coverage.

What it cannot do: code under test runs in this process and could tamper with all of it (docs/security.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

_ORDER = {"passed": 0, "skipped": 1, "failed": 2}
_EVIDENCE = pytest.StashKey[dict[str, Any]]()
_COVERAGE = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pse", "PSE's evidence (set by run_pytest)")
    group.addoption("--pse-evidence", default=None, help="where to write the run's evidence (JSON)")
    group.addoption("--pse-cover", action="append", default=[], help="a delivered module to measure")


_config: pytest.Config | None = None
"""The session's config (a test report does not carry it); one session per process."""


def pytest_configure(config: pytest.Config) -> None:
    """Make the snapshot importable after everything installed; start measuring; refuse test plugins."""
    global _config
    _config = config
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.append(root)
    manager = config.pluginmanager
    considered = manager.consider_module

    def consider_module(mod: Any) -> None:
        if getattr(mod, "pytest_plugins", None):
            raise pytest.UsageError(
                f"{getattr(mod, '__file__', mod)} asks for plugins (pytest_plugins); under PSE a check's "
                "plugins come only from the task ([verification] pytest_plugins in task.toml)"
            )
        considered(mod)

    manager.consider_module = consider_module  # type: ignore[method-assign]
    path = config.getoption("pse_evidence")
    if path is None:
        return
    evidence: dict[str, Any] = {"collected": None, "results": {}, "coverage": {}}
    config.stash[_EVIDENCE] = evidence
    _write(config)  # first of all: pytest got this far, so a missing record means it could not start
    covered = [os.path.realpath(p) for p in config.getoption("pse_cover")]
    if covered:
        import coverage  # only when asked: it costs start-up time

        cov = coverage.Coverage(data_file=None, config_file=False, include=covered, branch=False)
        cov.clear_exclude()  # `# pragma: no cover` in a delivered file must not hide its lines
        cov.start()
        cov.switch_context("import")
        config.stash[_COVERAGE] = (cov, covered)


def _write(config: pytest.Config) -> None:
    path = config.getoption("pse_evidence")
    if path is not None and _EVIDENCE in config.stash:
        Path(path).write_text(json.dumps(config.stash[_EVIDENCE]))


def pytest_collection_finish(session: pytest.Session) -> None:
    evidence = session.config.stash.get(_EVIDENCE, None)
    if evidence is None:
        return
    evidence["collected"] = [item.nodeid for item in session.items]
    _write(session.config)
    if _COVERAGE in session.config.stash:
        session.config.stash[_COVERAGE][0].switch_context("tests")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep each test's worst outcome over setup, call and teardown (an xfail is a skip)."""
    evidence = _config.stash.get(_EVIDENCE, None) if _config is not None else None
    if evidence is None:
        return
    outcome = "skipped" if hasattr(report, "wasxfail") and report.outcome != "failed" else report.outcome
    if report.when == "call" and hasattr(report, "wasxfail") and report.outcome == "passed":
        outcome = "passed"  # an xfail that passed (not strict): it ran and passed
    results = evidence["results"]
    if _ORDER.get(outcome, 2) >= _ORDER.get(results.get(report.nodeid, "passed"), 0):
        results[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    evidence = config.stash.get(_EVIDENCE, None)
    if evidence is None:
        return
    measured = config.stash.get(_COVERAGE, None)
    if measured is not None:
        cov, covered = measured
        cov.stop()
        data = cov.get_data()
        files = {os.path.realpath(f): f for f in data.measured_files()}
        root = os.path.realpath(str(config.rootpath))
        for path in covered:
            key = os.path.relpath(path, root)  # as the manifest names it: where the snapshot sits varies
            found = files.get(path)
            if found is None:
                evidence["coverage"][key] = {"imported": False}
                continue
            _, statements, _, _, _ = cov.analysis2(found)
            data.set_query_contexts(["import"])
            at_import = sorted(data.lines(found) or [])
            data.set_query_contexts(["tests"])
            in_tests = sorted(data.lines(found) or [])
            data.set_query_contexts(None)
            evidence["coverage"][key] = {
                "imported": True,
                "statements": sorted(statements),
                "import": at_import,
                "tests": in_tests,
            }
    _write(config)
