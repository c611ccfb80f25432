"""Verdicts measured outside the code they measure (issue 45), attacked by class. Each test is a Specialist
holding only write_file (and reads) that wants a PASS for wrong work; every attack runs end to end, for
real (real pytest, real sandbox, both modes), and each class also has an honest deliverable that still
passes.

Classes:
1. what was checked is not what is delivered (an undeclared file in the delivered workspace);
2. results produced inside the process that runs the delivered code;
3. exit status alone as evidence for a command check;
4. one author's test module changing what another author's tests call;
5. a deliverable that tells a check from use;
6. PSE's own analysis of a role's file ending the run as ERROR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attack_support import BUGGY, FIXED, MODES, ROOT, TESTS, calls, cassette, failures, refused, run_attack
from repo_support import FIXED as FIXED_ADD
from repo_support import git, make_repo, make_task, run, turns


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


DEEP = "x = 1" + " + 1" * 200_000 + "\n"
"""Python cannot compile this (RecursionError in its parser), and ruff's stack overflows on it."""


class TestAnalysisIsNeverAnError:
    """Class 6: a file nested too deeply for Python's parser, written by the Specialist."""

    def test_a_deep_file_is_a_note_to_its_writer_and_the_run_goes_on(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": FIXED, "test_quicksort.py": TESTS, "deep.py": DEEP}
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files))
        assert summary.outcome == "PASSED", summary.outcome_reason  # deep.py is no output: left out
        wrote = next(c for c in calls(trace, "write_file") if c["arguments"]["path"] == "deep.py")
        assert wrote["status"] == "ok"
        assert wrote["facts"]["hints"] == [
            "deep.py does not parse as Python: it is nested too deeply for Python's parser (RecursionError) "
            "(line 1); write it again"
        ]

    def test_a_deep_output_fails_its_checks_instead(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": DEEP, "test_quicksort.py": TESTS}
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files, reports=3))
        assert (summary.outcome, trace["cycles"][0]["result"]) == ("ESCALATED", "PARTIAL")
        ruff = calls(trace, "run_ruff")[-1]
        assert ruff["status"] == "error" and ruff["facts"]["findings"] is None
        (why,) = ruff["facts"]["unproven"]  # ruff aborts: 134 through bwrap's shell, -6 (SIGABRT) alone
        assert why.startswith("ruff stopped on these files without a report (exit code ")
        assert calls(trace, "run_pytest")[-1]["facts"]["passed"] == 0


FORGER = '''

def _forge():
    """At import: find pytest's configuration in this process and make every test report pass."""
    import gc

    try:
        import pytest
    except ImportError:
        return

    class _Forger:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome, report.longrepr = "passed", None

    for found in gc.get_objects():
        if type(found).__name__ == "Config" and hasattr(found, "pluginmanager"):
            found.pluginmanager.register(_Forger(), "forger")
            return


_forge()
'''


class TestResultsFromOutside:
    """Class 2: the delivered module, imported by the tests, rewrites what the check records."""

    def test_a_module_that_forges_pytests_reports_at_import_forges_nothing(
        self, tmp_path: Path, mode: str
    ) -> None:
        files = {"quicksort.py": BUGGY["quicksort.py"] + FORGER, "test_quicksort.py": TESTS}
        trace = refused(tmp_path, mode, cassette(tmp_path, files))
        run = calls(trace, "run_pytest")[-1]
        # The product process imported it, far from pytest: the task's 2 and the Specialist's 2 fail.
        assert (run["status"], run["facts"]["passed"], run["facts"]["failed"]) == ("error", 7, 4)
        assert run["facts"]["by_author"]["task"] == {"passed": 2, "failed": 2, "errors": 0, "skipped": 0}
        assert run["facts"]["exercised"]["quicksort.py"]["proven"] is True
        assert any(f.startswith("check:pytest: last run_pytest run: status error") for f in failures(trace))

    def test_the_same_module_without_its_bug_passes(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": FIXED + FORGER, "test_quicksort.py": TESTS}
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files))
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert calls(trace, "run_pytest")[-1]["facts"]["passed"] == 11


PATCHER = """

import types as _types

import quicksort as _qs

# The task's tests imported quicksort first and hold its function: change that very function, so that
# they call a correct sort that still runs the delivered code (its lines count as executed).
_qs.__dict__["_ORIG"] = _types.FunctionType(_qs.quicksort.__code__, _qs.__dict__)


def _fixed(items):
    _ORIG(items)  # noqa: F821  (looked up in quicksort's globals once the code is swapped)
    return sorted(items)


_qs.quicksort.__code__ = _fixed.__code__
"""


class TestSessionsApart:
    """Class 4: the Specialist's test module changes what the task's tests call."""

    def test_a_test_module_cannot_change_what_another_authors_tests_call(
        self, tmp_path: Path, mode: str
    ) -> None:
        files = {"quicksort.py": BUGGY["quicksort.py"], "test_quicksort.py": TESTS + PATCHER}
        trace = refused(tmp_path, mode, cassette(tmp_path, files))
        run = calls(trace, "run_pytest")[-1]
        # The task's tests run in a session of their own, on a product the Specialist's module never saw.
        assert run["facts"]["by_author"]["task"] == {"passed": 2, "failed": 2, "errors": 0, "skipped": 0}
        # ... and in its own session the patch cannot reach the product's code: nothing of it crosses.
        specialist = [t for t in run["facts"]["tests"] if t["author"] == "Specialist"]
        assert [t["outcome"] for t in specialist] == ["errors"]
        assert specialist[0]["message"] == (
            "collection failure: TypeError: function() argument 'code' must be code, not Remote"
        )

    def test_tests_in_separate_sessions_still_pass_on_right_work(self, tmp_path: Path, mode: str) -> None:
        summary, trace = run_attack(
            tmp_path, mode, cassette(tmp_path, {"quicksort.py": FIXED, "test_quicksort.py": TESTS})
        )
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert calls(trace, "run_pytest")[-1]["facts"]["by_author"] == {
            "task": {"passed": 4, "failed": 0, "errors": 0, "skipped": 0},
            "Specialist": {"passed": 7, "failed": 0, "errors": 0, "skipped": 0},
        }


TWO_FACED = FIXED.replace(
    "def quicksort(items: list) -> list:",
    "def quicksort(items: list) -> list:\n"
    "    if 'pytest' not in sys.modules and not os.environ.get('PYTEST_CURRENT_TEST'):\n"
    "        return sorted(set(items))  # what a user gets: duplicates dropped\n",
)
TWO_FACED = "import os\nimport sys\n\n" + TWO_FACED


class TestCheckLikeUse:
    """Class 5: the deliverable behaves right only when a test framework is loaded."""

    def test_a_deliverable_that_tells_a_check_from_use_is_checked_as_used(
        self, tmp_path: Path, mode: str
    ) -> None:
        assert "if 'pytest' not in sys.modules" in TWO_FACED  # the attack is in place
        files = {"quicksort.py": TWO_FACED, "test_quicksort.py": TESTS}
        trace = refused(tmp_path, mode, cassette(tmp_path, files))
        run = calls(trace, "run_pytest")[-1]
        assert run["facts"]["by_author"]["task"] == {"passed": 2, "failed": 2, "errors": 0, "skipped": 0}
        # what a user's own run gives, in the workspace the run delivered:
        workspace = next((tmp_path / "runs").glob("*/workspace"))
        plain = {k: v for k, v in os.environ.items() if "PYTEST" not in k}  # not this test's own pytest
        used = subprocess.run(
            [sys.executable, "-c", "import quicksort; print(quicksort.quicksort([2, 1, 2]))"],
            cwd=workspace, capture_output=True, text=True, check=True, env=plain,
        )  # fmt: skip
        assert used.stdout == "[1, 2]\n"

    def test_the_product_runs_as_a_plain_run_would(self, tmp_path: Path, mode: str) -> None:
        probe = (
            FIXED + "\n\ndef where_am_i():\n    import os, sys\n"
            "    return {'frameworks': sorted(m for m in ('pytest', '_pytest', 'pluggy', 'coverage') if m in sys.modules),\n"
            "            'env': sorted(k for k in os.environ if 'PYTEST' in k or 'PSE' in k), 'argv': sys.argv,\n"
            "            'path0': sys.path[0], 'isolated': sys.flags.isolated,\n"
            "            'cwd': sorted(os.listdir('.'))}\n"
        )
        tests = TESTS + (
            "\n\ndef test_where():\n    from quicksort import where_am_i\n\n"
            "    assert where_am_i() == {'frameworks': [], 'env': [], 'argv': ['-c'], 'path0': '', 'isolated': 0,\n"
            "                            'cwd': ['quicksort.py', 'test_acceptance.py', 'test_quicksort.py']}\n"
        )
        summary, trace = run_attack(
            tmp_path, mode, cassette(tmp_path, {"quicksort.py": probe, "test_quicksort.py": tests})
        )
        run = calls(trace, "run_pytest")[-1]
        assert run["facts"]["by_author"]["Specialist"]["passed"] == 8, run["output"]
        assert summary.outcome == "PASSED", summary.outcome_reason


CHECK_SORT = (  # `{python}` is `python -I`: the workspace goes on the path by the script's own hand
    "import os\nimport sys\n\nsys.path.insert(0, os.getcwd())\nfrom quicksort import quicksort  # noqa: E402\n\n"
    "assert quicksort([2, 1, 2]) == [1, 2, 2], 'duplicates lost'\n"
)
EXITS_AT_IMPORT = "import os\n\nos._exit(0)\n\n" + BUGGY["quicksort.py"]


def _checked_by(tmp_path: Path, command: str) -> Path:
    """code-delivery judged by one declared check `sorts` (its command `command`) and nothing else; the
    task seeds a script and a test file the command may run."""
    tasks = tmp_path / "tasks"
    folder = shutil.copytree(ROOT / "tasks" / "code-delivery", tasks / "checked")
    (folder / "check_sort.py").write_text(CHECK_SORT)
    (folder / "test_acceptance.py").rename(folder / "test_sorts.py")
    toml = (
        (folder / "task.toml")
        .read_text()
        .replace('seed = ["test_acceptance.py"]', 'seed = ["check_sort.py", "test_sorts.py"]')
    )
    toml = toml.replace('required_checks = ["pytest", "ruff"]', 'required_checks = ["sorts"]')
    (folder / "task.toml").write_text(toml + f"\n[checks]\nsorts = {json.dumps(command)}\n")
    (tasks / "registry.toml").write_text('[tasks.checked]\npath = "checked"\n')
    return tasks


SORTS = [("run_check", {"name": "sorts"})]


class TestCommandsNeedEvidence:
    """Class 3: a declared command check passes on its exit status, and the delivered code runs inside it."""

    def test_a_command_that_runs_delivered_code_is_no_evidence(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": EXITS_AT_IMPORT, "test_quicksort.py": TESTS}
        tasks = _checked_by(tmp_path, "{python} check_sort.py")
        trace = refused(tmp_path, mode, cassette(tmp_path, files, SORTS), "checked", tasks_dir=tasks)
        check = calls(trace, "run_check")[-1]
        assert (check["status"], check["facts"]["exit_code"]) == ("error", 0)  # it "passed" ...
        (why,) = check["facts"]["unproven"]  # ... and proves nothing
        assert why.startswith(
            "ran, no evidence: code a role wrote was within its reach (quicksort.py (Specialist)"
        )
        assert any(
            f.startswith("check:sorts: last run_check(name=sorts) run:") and "ran, no evidence" in f
            for f in failures(trace)
        )

    def test_a_pytest_command_measures_the_delivered_code_from_outside(
        self, tmp_path: Path, mode: str
    ) -> None:
        files = {"quicksort.py": EXITS_AT_IMPORT, "test_quicksort.py": TESTS}
        tasks = _checked_by(tmp_path, "{python} -m pytest -q test_sorts.py")
        trace = refused(tmp_path, mode, cassette(tmp_path, files, SORTS), "checked", tasks_dir=tasks)
        check = calls(trace, "run_check")[-1]
        assert check["status"] == "error" and check["facts"]["report"] == "checker"
        assert check["facts"]["by_author"] == {"task": {"passed": 0, "failed": 0, "errors": 1, "skipped": 0}}
        assert "the product process cannot be asked any more" in check["facts"]["tests"][0]["message"]

    def test_right_work_passes_a_pytest_command(self, tmp_path: Path, mode: str) -> None:
        tasks = _checked_by(tmp_path, "{python} -m pytest -q test_sorts.py")
        files = {"quicksort.py": FIXED, "test_quicksort.py": TESTS}
        summary, trace = run_attack(
            tmp_path, mode, cassette(tmp_path, files, SORTS), "checked", tasks_dir=tasks
        )
        assert summary.outcome == "PASSED", summary.outcome_reason
        check = calls(trace, "run_check")[-1]
        assert (check["facts"]["check"], check["facts"]["passed"], check["facts"]["unproven"]) == (
            "sorts",
            4,
            [],
        )

    def test_a_script_reading_data_is_still_evidence(self, tmp_path: Path, mode: str) -> None:
        # incident-review's check reads a Markdown report and a JSON index (data): its exit status counts
        summary, trace = run_attack(
            tmp_path, mode, ROOT / "tasks" / "incident-review" / "cassette.json", "incident-review"
        )
        assert summary.outcome == "PASSED", summary.outcome_reason
        checks = [c for c in trace["cycles"][-1]["tool_calls"] if c["tool"] == "run_check"]
        assert checks[-1]["status"] == "ok" and checks[-1]["facts"]["unproven"] == []


def _used(workspace: Path, code: str) -> str:
    """What a user's own `python -c` in the delivered workspace prints."""
    plain = {k: v for k, v in os.environ.items() if "PYTEST" not in k}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, check=True, env=plain
    )
    return done.stdout


class TestDeliveredAsChecked:
    """Class 1: a file no check saw stays in what the run delivers, and changes what `import` gives."""

    def test_an_undeclared_package_never_reaches_the_delivered_workspace(
        self, tmp_path: Path, mode: str
    ) -> None:
        # The checks see the right quicksort.py; the package beside it, which `import quicksort` prefers,
        # was left out of them (undeclared): it must be left out of the deliverable too.
        files = {
            "quicksort.py": FIXED,
            "test_quicksort.py": TESTS,
            "quicksort/__init__.py": BUGGY["quicksort.py"],
        }
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files))
        assert summary.outcome == "PASSED", summary.outcome_reason
        run_dir = Path(summary.trace).parent
        assert (
            _used(run_dir / "workspace", "import quicksort; print(quicksort.quicksort([2, 1, 2]))")
            == "[1, 2, 2]\n"
        )
        assert not (run_dir / "workspace" / "quicksort").exists()
        assert (run_dir / "left-out" / "quicksort" / "__init__.py").read_text() == BUGGY["quicksort.py"]
        assert trace["delivery"] == {
            "files": 3,
            "left_out": [
                {
                    "path": "quicksort/__init__.py",
                    "author": "Specialist",
                    "kept_at": "left-out/quicksort/__init__.py",
                }
            ],
            "note": "",
        }

    def test_a_file_admitted_beside_an_output_that_import_prefers_fails_the_gate(
        self, tmp_path: Path, mode: str
    ) -> None:
        # A task admitting support files (`[verification] evidence`) admits a package that shadows the
        # delivered module: the gate names both paths.
        tasks = tmp_path / "tasks"
        folder = shutil.copytree(ROOT / "tasks" / "code-delivery", tasks / "admitting")
        toml = (folder / "task.toml").read_text()
        (folder / "task.toml").write_text(toml + '\n[verification]\nevidence = ["quicksort/*"]\n')
        (tasks / "registry.toml").write_text('[tasks.admitting]\npath = "admitting"\n')
        files = {"quicksort.py": FIXED, "test_quicksort.py": TESTS, "quicksort/__init__.py": FIXED}
        trace = refused(tmp_path, mode, cassette(tmp_path, files), "admitting", tasks_dir=tasks)
        assert any(
            f.startswith("check:pytest:")
            and "quicksort.py: `import quicksort` in the workspace gives quicksort/__init__.py, not the declared output"
            in f
            for f in failures(trace)
        ), failures(trace)

    def test_an_undeclared_write_never_reaches_a_repository_commit(self, tmp_path: Path, mode: str) -> None:
        make_task(tmp_path)
        repo = make_repo(tmp_path)
        shadow = "def add(a, b):\n    return a - b\n"  # the bug again, where `import calc.core` would find it
        writes = {"calc/core.py": FIXED_ADD, "calc/core/__init__.py": shadow, "notes.txt": "scratch\n"}
        summary, trace = run(tmp_path, repo, turns(writes), sandbox=mode)
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert git(repo, "show", "--name-only", "--format=", summary.commit).split() == ["calc/core.py"]
        assert [f["path"] for f in trace["delivery"]["left_out"]] == ["calc/core/__init__.py", "notes.txt"]
