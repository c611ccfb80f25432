"""A real small repository with a bug and its tests, a task that fixes it, and scripted runs over both.

What the repository tests share (tests/test_repository*.py, tests/test_demo_repo.py, tests/test_eval_repository.py
and the others that run on a repository).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pse.config import Settings
from pse.protocol import render_tool_calls
from pse.runner import RunSummary, prepare_run, run_to_end

ROOT = Path(__file__).resolve().parents[1]
TASK = "fix-repo"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
CHEAT = "def test_add():\n    assert True\n"
PLAN = """<plan>
  <goal>Make calc.add return the sum of its arguments</goal>
  <step id="S1">Fix add in calc/core.py</step>
  <criterion id="AC1">add returns the sum</criterion>
  <criterion id="AC2">the repository's tests pass</criterion>
  <output path="calc/core.py"/>
</plan>"""
PASS = """<verdict status="PASS">
  <reason_code>ALL_MET</reason_code>
  <criterion id="AC1" met="true">add(2, 3) == 5</criterion>
  <criterion id="AC2" met="true">pytest: 2 passed</criterion>
  <summary>fixed</summary>
</verdict>"""
FAIL = """<verdict status="PARTIAL">
  <reason_code>TESTS_FAILING</reason_code>
  <criterion id="AC1" met="false">add(2, 3) == -1</criterion>
  <criterion id="AC2" met="false">test_add fails</criterion>
  <summary>not fixed</summary>
</verdict>"""


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` as the user would; return its stdout."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(root: Path) -> Path:
    """A git repository holding the package `calc` (with a bug), its tests and pytest configuration."""
    repo = root / "project"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("from calc.core import add\n\n__all__ = ['add']\n")
    (repo / "calc" / "core.py").write_text(BUGGY)
    (repo / "tests" / "test_core.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.email", "person@example.org")
    git(repo, "config", "user.name", "A Person")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "calc with a bug")
    return repo


def user_state(repo: Path) -> dict[str, str]:
    """What a run must never change: working tree and index, HEAD, current branch, stash."""
    return {
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "stash": git(repo, "stash", "list"),
        "diff": git(repo, "diff") + git(repo, "diff", "--cached"),
    }


def make_task(root: Path, extra: str = "") -> Path:
    """A tasks directory with the task `fix-repo`: pytest required, nothing seeded."""
    tasks = root / "tasks"
    folder = tasks / TASK
    folder.mkdir(parents=True)
    (tasks / "registry.toml").write_text(f'[tasks.{TASK}]\npath = "{TASK}"\n')
    for role in ("planner", "specialist", "evaluator"):
        (folder / f"{role}.md").write_text(f"You are the {role} of a change to a repository.\n")
    (folder / "task.toml").write_text(
        'description = "Fix the bug in the repository"\n'
        'goal = "Make calc.add return the sum of its arguments; the repository\'s tests must pass."\n'
        'required_checks = ["pytest"]\n' + extra
    )
    return tasks


RUN_PYTEST = ("run_pytest", {"target": "."})


def turns(
    writes: dict[str, str],
    verdict: str = PASS,
    *,
    extra: Sequence[dict[str, str]] = (),
    checks: Sequence[tuple[str, dict[str, str]]] = (RUN_PYTEST,),
) -> list[dict[str, str]]:
    """The plan; a Specialist writing `writes` (and `extra` turns); the Evaluator running `checks` (pytest
    unless said); `verdict`."""
    return [
        {"role": "Planner", "content": PLAN},
        {
            "role": "Specialist",
            "content": render_tool_calls(
                [("write_file", {"path": p, "content": c}) for p, c in writes.items()]
            ),
        },
        *extra,
        {"role": "Specialist", "content": "<report>Artifacts: calc/core.py</report>"},
        {"role": "Evaluator", "content": render_tool_calls(checks)},
        {"role": "Evaluator", "content": verdict},
    ]


def load_demo() -> ModuleType:
    """`scripts/demo_repo.py`, the repository `make demo-repo` builds (the `code-change` task's)."""
    spec = importlib.util.spec_from_file_location("demo_repo", ROOT / "scripts" / "demo_repo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(
    root: Path, repo: Path, script: list[dict[str, str]], *, sandbox: str = "fallback", base: str | None = None,
    tasks: Path | None = None, inputs: dict[str, str] | None = None,
) -> tuple[RunSummary, dict[str, Any]]:  # fmt: skip
    """Run the task on `repo` replaying `script`; return the summary and the trace."""
    cassette = root / f"cassette-{len(list(root.glob('cassette-*')))}.json"
    cassette.write_text(json.dumps({"turns": script}))
    settings = Settings(
        provider="scripted", cassette=cassette, runs_dir=root / "runs", tasks_dir=tasks or root / "tasks",
        sandbox=sandbox, max_partial_retries=0, max_fail_retries=0, replay_strict=False,
    )  # type: ignore[arg-type]  # fmt: skip
    summary = asyncio.run(run_to_end(prepare_run(TASK, settings, repo=repo, base=base, inputs=inputs)))
    return summary, json.loads(Path(summary.trace).read_text())


def calls(trace: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [c for cycle in trace["cycles"] for c in cycle["tool_calls"] if c["tool"] == tool]
