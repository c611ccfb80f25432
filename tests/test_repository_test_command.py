"""A repository's own check command (issue 32, items 3 and 6): the task's `[repository] test_command_input`
names an optional input (the built-in `code-change` task's `TEST_COMMAND`); given, its command is the
declared check `tests`, run by the Evaluator through `run_check` over the sealed snapshot and required in
place of pytest; absent, the run checks with `run_pytest` on the repository's tests.

Every run here makes a real repository and runs the real engine, the command and git, in the fallback
sandbox."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.protocol import render_tool_calls
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from repo_support import BUGGY, FIXED, RUN_PYTEST, calls, git, load_demo, make_repo, make_task, run, turns

ROOT = Path(__file__).resolve().parents[1]

COMMAND = "{python} -m pytest -q -p no:cacheprovider tests"
WITH_INPUT = (
    '\n[inputs.TEST_COMMAND]\ndescription = "the repository\'s check command"\n'
    '\n[repository]\ntest_command_input = "TEST_COMMAND"\n'
)


RUN_TESTS = ("run_check", {"name": "tests"})


def _gate(trace: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in trace["cycles"][-1]["gate"]["results"] if g["name"] == name)


class TestGivenTestCommand:
    def test_the_command_is_the_required_check_and_a_pass_commits(self, tmp_path: Path) -> None:
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        summary, trace = run(
            tmp_path,
            repo,
            turns({"calc/core.py": FIXED}, checks=[RUN_TESTS]),
            inputs={"TEST_COMMAND": COMMAND},
        )
        assert summary.outcome == "PASSED", summary.outcome_reason
        check = calls(trace, "run_check")[-1]
        assert check["status"] == "ok" and check["facts"]["check"] == "tests"
        assert check["facts"]["exit_code"] == 0 and "2 passed" in check["output"]
        kinds = {f["path"]: f["kind"] for f in check["facts"]["evidence"]["files"]}
        assert (
            kinds["calc/core.py"] == "output" and kinds["tests/test_core.py"] == "test"
        )  # sealed, as pytest's
        assert _gate(trace, "check:tests")["passed"] is True
        assert not any(g["name"] == "check:pytest" for g in trace["cycles"][-1]["gate"]["results"])
        assert '- tests: run_check(name="tests")' in trace["task_message"]
        assert "run_pytest" not in trace["task_message"]
        assert git(repo, "show", f"{summary.commit}:calc/core.py") == FIXED

    def test_run_pytest_alone_does_not_stand_in_for_it(self, tmp_path: Path) -> None:
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        summary, trace = run(
            tmp_path,
            repo,
            turns({"calc/core.py": FIXED}, checks=[RUN_PYTEST]),
            inputs={"TEST_COMMAND": COMMAND},
        )
        assert calls(trace, "run_pytest")[-1]["facts"]["passed"] == 2
        assert summary.outcome != "PASSED" and summary.commit is None
        gate = _gate(trace, "check:tests")
        assert gate["passed"] is False and gate["detail"] == "the Evaluator did not run run_check(name=tests)"

    def test_a_failing_command_blocks_the_pass(self, tmp_path: Path) -> None:
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        comment = "# a comment, the bug left in\n"
        summary, trace = run(
            tmp_path,
            repo,
            turns({"calc/core.py": BUGGY + comment}, checks=[RUN_TESTS]),
            inputs={"TEST_COMMAND": COMMAND},
        )
        check = calls(trace, "run_check")[-1]
        assert check["status"] == "error" and check["facts"]["exit_code"] == 1
        assert "1 failed, 1 passed" in check["output"]
        assert summary.outcome != "PASSED" and summary.commit is None
        assert _gate(trace, "check:tests")["passed"] is False

    def test_the_command_sees_the_sealed_snapshot_not_the_live_workspace(self, tmp_path: Path) -> None:
        # a file no role wrote and no rule lets in (a scratch file the command would read) is not there;
        # the command only reads files, so its exit status is evidence (a pytest one would be run as
        # run_pytest runs: a compound of both runs the delivered code in-process and proves nothing)
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        command = "test ! -e scratch.txt && grep -q 'a + b' calc/core.py"
        writes = {"calc/core.py": FIXED, "scratch.txt": "left by the Specialist\n"}
        summary, trace = run(
            tmp_path, repo, turns(writes, checks=[RUN_TESTS]), inputs={"TEST_COMMAND": command}
        )
        assert calls(trace, "run_check")[-1]["facts"]["exit_code"] == 0
        assert summary.outcome == "PASSED", summary.outcome_reason


class TestWithoutTestCommand:
    def test_the_default_is_run_pytest_on_the_repositorys_tests(self, tmp_path: Path) -> None:
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}, checks=[RUN_PYTEST]))
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert _gate(trace, "check:pytest")["passed"] is True
        assert "- pytest: run_pytest" in trace["task_message"] and "run_check" not in trace["task_message"]

    def test_an_empty_command_is_no_command(self, tmp_path: Path) -> None:
        make_task(tmp_path, WITH_INPUT)
        repo = make_repo(tmp_path)
        summary, trace = run(
            tmp_path, repo, turns({"calc/core.py": FIXED}, checks=[RUN_PYTEST]), inputs={"TEST_COMMAND": "  "}
        )
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert _gate(trace, "check:pytest")["passed"] is True


class TestTheBuiltInTask:
    def test_code_change_requires_its_test_command(self, tmp_path: Path) -> None:
        """The demo repository given TEST_COMMAND: the task's cassette, whose Evaluator runs run_pytest,
        no longer passes (not the check the run requires); with run_check(name="tests") instead it does."""
        demo = load_demo()
        cassette = json.loads((ROOT / "tasks" / "code-change" / "cassette.json").read_text())
        found = {}
        for label, evaluator in (("cassette", None), ("run_check", render_tool_calls([RUN_TESTS]))):
            root = tmp_path / label
            root.mkdir()
            repo = demo.make_demo_repo(root)
            turns = [dict(t) for t in cassette["turns"]]
            if evaluator is not None:
                assert "run_pytest" in turns[4]["content"]
                turns[4]["content"] = evaluator
            path = root / "cassette.json"
            path.write_text(json.dumps({"turns": turns}))
            settings = Settings(  # type: ignore[call-arg]
                runs_dir=root / "runs", sandbox="fallback", cassette=path, max_partial_retries=0,
                max_fail_retries=0,
            )  # fmt: skip
            inputs = {"REQUEST": demo.REQUEST, "TEST_COMMAND": COMMAND}
            summary = asyncio.run(run_to_end(prepare_run("code-change", settings, inputs=inputs, repo=repo)))
            trace = json.loads(Path(summary.trace).read_text())
            found[label] = (
                summary.outcome == "PASSED",
                summary.commit is not None,
                _gate(trace, "check:tests"),
            )
        assert found["cassette"][:2] == (False, False)
        assert found["cassette"][2]["detail"] == "the Evaluator did not run run_check(name=tests)"
        assert found["run_check"][:2] == (True, True) and found["run_check"][2]["passed"] is True


class TestTheTaskSaysWhichInput:
    def _registry(self, tmp_path: Path, extra: str) -> TaskRegistry:
        tasks = make_task(tmp_path, extra)
        return TaskRegistry.discover(tasks.resolve(), optional=False)

    @pytest.mark.parametrize(
        ("extra", "problem"),
        [
            ('\n[repository]\ntest_command_input = "TEST_COMMAND"\n', "no input 'TEST_COMMAND'"),
            (
                '\n[inputs.TEST_COMMAND]\ndescription = "d"\nrequired = true\n'
                '\n[repository]\ntest_command_input = "TEST_COMMAND"\n',
                "input 'TEST_COMMAND' is required, so the default check (pytest) never runs",
            ),
            (
                WITH_INPUT + '\n[checks]\ntests = "true"\n',
                "the check 'tests' it declares is declared in [checks] too",
            ),
        ],
    )
    def test_a_bad_declaration_is_a_problem(self, tmp_path: Path, extra: str, problem: str) -> None:
        with pytest.raises(ConfigError, match=re.escape(problem)):
            self._registry(tmp_path, extra).get("fix-repo")
