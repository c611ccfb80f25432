"""A repository's own check commands declared by the task (issue 32, item 3): `[verification] commands =
[...]`. Each entry is the declared check `commandN` (N from 1, in the list's order): the Evaluator must run
it with `run_check`, over the sealed snapshot like any declared check, and its last run must succeed for a
PASS. A failing command is evidence against the change, and keeps the run from PASSED.

Every run here makes a real repository and runs the real engine, the commands and git, in both sandbox
modes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse
from pse.exceptions import ConfigError
from pse.sandbox import bwrap_problem
from pse.tasks import TaskRegistry
from repo_support import FIXED, TASK, calls, make_repo, make_task, run, turns

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"no bwrap: {BWRAP_MISSING}")
    ),
    "fallback",
]

PYTEST = "{python} -m pytest -q -p no:cacheprovider tests"
RUN_BOTH = [("run_check", {"name": "command1"}), ("run_check", {"name": "command2"})]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _task(root: Path, commands: list[str], extra: str = "") -> Path:
    """The repository task with `commands` as its only required checks (pytest is not required)."""
    tasks = make_task(root)
    toml = tasks / TASK / "task.toml"
    listed = ", ".join(json.dumps(c) for c in commands)
    text = toml.read_text().replace('required_checks = ["pytest"]\n', "")
    toml.write_text(text + f"\n[verification]\ncommands = [{listed}]\n" + extra)
    return tasks


def _gates(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in trace["cycles"][-1]["gate"]["results"] if g["name"].startswith("check:")}


def _check_run(trace: dict[str, Any], name: str) -> dict[str, Any]:
    return [c for c in calls(trace, "run_check") if c["arguments"]["name"] == name][-1]


class TestTheCommandsAreTheRequiredChecks:
    def test_a_failing_command_keeps_the_run_from_passed(self, tmp_path: Path, mode: str) -> None:
        # the repository's tests pass; its second check (a function the change had to add) does not
        _task(tmp_path, [PYTEST, "grep -q 'def subtract' calc/core.py"])
        repo = make_repo(tmp_path)
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}, checks=RUN_BOTH), sandbox=mode)
        passing, failing = _check_run(trace, "command1"), _check_run(trace, "command2")
        assert passing["status"] == "ok" and passing["facts"]["exit_code"] == 0
        assert "2 passed" in passing["output"]
        kinds = {f["path"]: f["kind"] for f in passing["facts"]["evidence"]["files"]}
        assert kinds["calc/core.py"] == "output" and kinds["tests/test_core.py"] == "test"  # sealed
        assert failing["status"] == "error" and failing["facts"]["exit_code"] == 1
        gates = _gates(trace)
        assert sorted(gates) == ["check:command1", "check:command2"]
        assert gates["check:command1"]["passed"] is True and gates["check:command2"]["passed"] is False
        assert summary.outcome != "PASSED" and summary.commit is None
        assert (
            '- command1: run_check(name="command1")\n- command2: run_check(name="command2")'
            in (trace["task_message"])
        )

    def test_passing_commands_over_the_sealed_snapshot_pass_and_commit(
        self, tmp_path: Path, mode: str
    ) -> None:
        # command2 also proves what it sees is the snapshot: the Specialist's scratch file is not in it
        _task(tmp_path, [PYTEST, "test ! -e scratch.txt && grep -q 'a + b' calc/core.py"])
        repo = make_repo(tmp_path)
        writes = {"calc/core.py": FIXED, "scratch.txt": "left by the Specialist\n"}
        summary, trace = run(tmp_path, repo, turns(writes, checks=RUN_BOTH), sandbox=mode)
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert [_check_run(trace, n)["facts"]["exit_code"] for n in ("command1", "command2")] == [0, 0]
        assert all(g["passed"] for g in _gates(trace).values()) and len(_gates(trace)) == 2
        assert summary.commit is not None

    def test_a_command_the_evaluator_skipped_blocks_the_pass(self, tmp_path: Path) -> None:
        _task(tmp_path, [PYTEST, "grep -q 'a + b' calc/core.py"])
        repo = make_repo(tmp_path)
        script = turns({"calc/core.py": FIXED}, checks=[("run_check", {"name": "command1"})])
        summary, trace = run(tmp_path, repo, script)
        assert summary.outcome != "PASSED" and summary.commit is None
        gate = _gates(trace)["check:command2"]
        assert (
            gate["passed"] is False and gate["detail"] == "the Evaluator did not run run_check(name=command2)"
        )

    def test_naming_a_command_in_required_checks_lists_it_once(self, tmp_path: Path) -> None:
        tasks = _task(tmp_path, ["true", "false"])
        toml = tasks / TASK / "task.toml"
        toml.write_text('required_checks = ["command2"]\n' + toml.read_text())
        task = TaskRegistry.discover(tasks.resolve(), optional=False).get(TASK)
        assert task.config.all_required_checks == ["command2", "command1"]
        assert task.resolved_checks() == {"command1": "true", "command2": "false"}


BAD = [
    ('"make test"', "", "verification.commands: 'make test' is not a list of command strings", 'write commands = ["make test"]'),
    ('[1, "true"]', "", "verification.commands: [1, 'true'] is not a list of command strings", 'write commands = ["COMMAND"'),
    ('["true", "  "]', "", "verification.commands: check 'command2' has an empty command", "give it, or drop the entry"),
    (
        '["{pyton} -m pytest"]',
        "",
        "verification.commands: check 'command1' uses unknown placeholder(s) ['pyton']",
        "use only {python} and {task_dir}",
    ),
    (
        '["true", "true"]',
        '\n[checks]\ncommand2 = "true"\n',
        "[verification] commands: the check 'command2' it declares is declared in [checks] too",
        "rename [checks] command2, or move its command into [verification] commands",
    ),
]  # fmt: skip


class TestBadDeclarations:
    def _write(self, root: Path, commands: str, extra: str) -> Path:
        tasks = make_task(root)
        with (tasks / TASK / "task.toml").open("a") as toml:
            toml.write(f"\n[verification]\ncommands = {commands}\n{extra}")
        return tasks

    @pytest.mark.parametrize(("commands", "extra", "problem", "fix"), BAD)
    def test_the_task_is_refused_naming_the_fix(
        self, tmp_path: Path, commands: str, extra: str, problem: str, fix: str
    ) -> None:
        tasks = self._write(tmp_path, commands, extra)
        with pytest.raises(ConfigError, match=re.escape(problem)) as caught:
            TaskRegistry.discover(tasks.resolve(), optional=False).get(TASK)
        assert f"fix: {fix}" in str(caught.value)
        assert str(caught.value).count("\n  - ") == 1  # one problem, on one line and its fix

    def test_pse_validate_reports_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        tasks = self._write(tmp_path, '["true", "true"]', '\n[checks]\ncommand2 = "true"\n')
        code, _, err = pse(monkeypatch, capsys, "validate", "--tasks-dir", str(tasks))
        assert code == 2
        assert "the check 'command2' it declares is declared in [checks] too" in err
        assert "rename [checks] command2" in err
