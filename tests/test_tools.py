"""The tools, called through their registry specs, on real workspaces and real pytest / ruff runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pse.exceptions import SandboxViolation
from pse.protocol import ParamSpec
from pse.sandbox import Sandbox, SandboxLimits, bwrap_problem
from pse.tools import ToolContext, ToolOutcome, ToolRegistry, ToolSpec, builtin_tools, parse_pytest_summary

BWRAP_MISSING = bwrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"bwrap unusable here: {BWRAP_MISSING}")
MODES = [pytest.param("bwrap", marks=needs_bwrap), "fallback"]
TOOLS = builtin_tools()


def context(ws: Path, mode: str = "fallback", *, writable: bool = False, **kw: object) -> ToolContext:
    box = Sandbox(ws, SandboxLimits(timeout_s=30), mode)  # type: ignore[arg-type]
    return ToolContext(Path(os.path.realpath(ws)), box, writable, **kw)  # type: ignore[arg-type]


def call(tool_name: str, ctx: ToolContext, **arguments: str) -> ToolOutcome:
    spec = TOOLS.get(tool_name)
    assert spec is not None
    return spec.function(ctx, **arguments)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\nline two\n")
    (root / "pkg" / "mod.py").write_text("VALUE = 3\n")
    return root


def test_builtin_registry_is_the_public_contract() -> None:
    assert {spec.name: spec.signature.usage() for spec in TOOLS} == {
        "read_file": "read_file(path)",
        "list_files": "list_files(path='.')",
        "write_file": "write_file(path, content)",
        "bash": "bash(command)",
        "run_pytest": "run_pytest(target='.')",
        "run_ruff": "run_ruff(target='.')",
        "run_check": "run_check(name)",
    }


def test_registry_accepts_new_tools_and_refuses_duplicates() -> None:
    registry = builtin_tools()
    spec = ToolSpec("search_knowledge", "Search.", (ParamSpec("query"), ParamSpec("k", False, "5")),
                    lambda ctx, query, k: ToolOutcome("ok", f"{query}:{k}"))  # fmt: skip
    registry.register(spec)
    assert "search_knowledge" in registry and len(registry) == 8 and "search_knowledge" not in TOOLS
    assert registry.signatures()["search_knowledge"].usage() == "search_knowledge(query, k='5')"
    with pytest.raises(ValueError, match="already registered"):
        registry.register(spec)
    registry.register(spec, replace=True)
    assert len(ToolRegistry(registry).signatures()) == 8


def test_read_and_list_files(ws: Path) -> None:
    ctx = context(ws)
    assert call("read_file", ctx, path="notes.md") == ToolOutcome("ok", "# Notes\nline two\n", {"bytes": 17})
    listing = call("list_files", ctx, path=".")
    assert listing.output.splitlines() == ["pkg/", "notes.md (17 bytes)", "pkg/mod.py (10 bytes)"]
    assert listing.facts == {"entries": 3}
    assert call("list_files", ctx, path="pkg").output == "pkg/mod.py (10 bytes)"
    # A file lists itself, as `ls` does (the 1.5B model, told "not a directory", blocked on permission).
    assert call("list_files", ctx, path="pkg/mod.py") == ToolOutcome(
        "ok", "pkg/mod.py (10 bytes)", {"entries": 1}
    )
    with pytest.raises(ValueError, match=r"no file or folder 'gone\.py' in the workspace"):
        call("list_files", ctx, path="gone.py")


@pytest.mark.parametrize(
    ("path", "message"),
    [("pkg", "is a directory; use list_files"), ("missing.txt", "no file 'missing.txt' in the workspace")],
)
def test_read_file_errors(ws: Path, path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call("read_file", context(ws), path=path)


def test_read_file_refuses_binary(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="binary file"):
        call("read_file", context(ws), path="blob.bin")


def test_write_file(ws: Path) -> None:
    ctx = context(ws, writable=True)
    out = call("write_file", ctx, path="new/deep/a.py", content="x = 'é'\n")
    assert out == ToolOutcome(
        "ok", "wrote new/deep/a.py (9 bytes)", {"bytes": 9, "area": "workspace", "path": "new/deep/a.py"}
    )
    assert (ws / "new" / "deep" / "a.py").read_text() == "x = 'é'\n"
    again = call("write_file", ctx, path="new/deep/a.py", content="x = 'é'\n")  # the same bytes again
    assert (
        again.output
        == "wrote new/deep/a.py (9 bytes)\nnote: new/deep/a.py already held exactly these bytes: this write changed nothing"
    )
    assert "already held" not in call("write_file", ctx, path="new/deep/a.py", content="x = 1\n").output
    with pytest.raises(ValueError, match="needs a read-write grant"):
        call("write_file", context(ws), path="b.py", content="")


def test_file_tools_refuse_every_escape(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "pkg" / "up").symlink_to(ws.parent)
    ctx = context(ws, writable=True)
    attempts = [
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "link_file"}),
        ("read_file", {"path": "link_dir/secret.txt"}),
        ("read_file", {"path": "pkg/up/outside/secret.txt"}),
        ("read_file", {"path": "pkg/up/../outside/secret.txt"}),
        ("list_files", {"path": "link_dir"}),
        ("write_file", {"path": "link_file", "content": "pwned"}),
        ("write_file", {"path": "link_dir/new.txt", "content": "pwned"}),
        ("write_file", {"path": "/tmp/pse-pwned.txt", "content": "pwned"}),
        ("run_pytest", {"target": "../outside"}),
        ("run_ruff", {"target": "link_dir"}),
    ]
    for name, arguments in attempts:
        with pytest.raises(SandboxViolation):
            call(name, ctx, **arguments)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "s3cret"
    assert "link_dir@" in call("list_files", ctx).output.splitlines()  # listed, never followed


@pytest.mark.parametrize("mode", MODES)
def test_bash_reports_exit_code_and_respects_the_mode(ws: Path, mode: str) -> None:
    out = call("bash", context(ws, mode), command="cat notes.md | wc -l; exit 3")
    assert out.status == "error" and out.facts == {"exit_code": 3} and out.output == "2\n[exit code 3]"
    assert out.sandbox == ("bwrap-ro" if mode == "bwrap" else "fallback-copy")
    call("bash", context(ws, mode), command="echo x > made.txt")
    assert not (ws / "made.txt").exists()
    ok = call("bash", context(ws, mode, writable=True), command="echo x > made.txt")
    assert ok.status == "ok" and (ws / "made.txt").read_text() == "x\n"


def test_pytest_through_bash_is_told_it_is_no_evidence(ws: Path) -> None:
    """heldout-9: the 1.5B model's Evaluator ran `pytest` through bash four times in place of run_pytest."""
    from pse.tools._commands import BASH_PYTEST

    for command in ("pytest -q || true", "python -m pytest tests; true", "cd . && .venv/bin/pytest; true"):
        assert f"\n{BASH_PYTEST}\n" in call("bash", context(ws), command=command).output, command
    for command in ("echo pytest-cov", "ls test_pytest_x.py; true"):
        assert BASH_PYTEST not in call("bash", context(ws), command=command).output, command


def test_bash_timeout_status(ws: Path) -> None:
    ctx = ToolContext(ws, Sandbox(ws, SandboxLimits(timeout_s=0.5), "fallback"))
    out = call("bash", ctx, command="sleep 5")
    assert out.status == "timeout" and out.facts == {"exit_code": None}


PASSING = {"calc.py": "def add(a, b):\n    return a + b\n",
           "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                           "def test_zero():\n    assert add(0, 0) == 0\n"}  # fmt: skip
FAILING = {"calc.py": "import os\ndef add(a, b):\n    return a - b\n",
           "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                           "def test_zero():\n    assert add(0, 0) == 0\n\n\n"
                           "def test_broken():\n    raise RuntimeError('x')\n",
           "test_fixture.py": "import pytest\n\n\n@pytest.fixture\ndef db():\n    raise OSError('no db')\n\n\n"
                              "def test_db(db):\n    assert db\n"}  # fmt: skip


def project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def counts(passed: int = 0, failed: int = 0, errors: int = 0, skipped: int = 0) -> dict[str, int]:
    return {"passed": passed, "failed": failed, "errors": errors, "skipped": skipped}


def _base(facts: dict[str, Any]) -> dict[str, Any]:
    """A check's facts without the evidence lists (files and hashes, tests, exercised), asserted apart."""
    return {k: v for k, v in facts.items() if k not in ("evidence", "tests", "exercised", "files")}


def _result(output: str) -> list[str]:
    """A check's output without the lines that say what its snapshot held."""
    return [line for line in output.splitlines() if not line.startswith("[evidence]")]


@pytest.mark.parametrize("mode", MODES)
def test_run_pytest_on_real_projects(tmp_path: Path, mode: str) -> None:
    good = project(tmp_path / "good", PASSING)
    before = sorted(p.name for p in good.rglob("*"))
    out = call("run_pytest", context(good, mode))
    assert out.status == "ok", out.output
    assert _base(out.facts) == {"exit_code": 0, **counts(passed=2), "target": ".", "report": "checker",
                                "by_author": {"task": counts(passed=2)}, "unproven": []}  # fmt: skip
    assert [(f["path"], f["kind"], f["author"]) for f in out.facts["evidence"]["files"]] == [
        ("calc.py", "input", "task"),
        ("test_calc.py", "test", "task"),
    ]
    assert all(len(f["sha256"]) == 64 for f in out.facts["evidence"]["files"])
    assert sorted(p.name for p in good.rglob("*")) == before  # no cache, no __pycache__ left behind
    bad = project(tmp_path / "bad", FAILING)
    out = call("run_pytest", context(bad, mode))
    assert out.status == "error"
    assert _base(out.facts) == {"exit_code": 1, **counts(passed=1, failed=2, errors=1), "target": ".",
                                "report": "checker", "by_author": {"task": counts(passed=1, failed=2, errors=1)},
                                "unproven": []}  # fmt: skip
    node = call("run_pytest", context(bad, mode), target="./test_calc.py::test_zero")
    assert node.facts["target"] == "test_calc.py::test_zero"  # a narrowed run says so: the gates see it
    assert {k: node.facts[k] for k in ("exit_code", "passed", "failed")} == {
        "exit_code": 0,
        "passed": 1,
        "failed": 0,
    }


RAISING = {"pkg/__init__.py": "",
           "pkg/calc.py": "def add(a, b):\n    total = a + b\n    return totl\n\n\ndef div(a, b):\n    return a / b\n",
           "test_calc.py": "from pkg.calc import add, div\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                           "def test_div():\n    assert div(1, 0) == 0\n\n\ndef test_value():\n    assert div(4, 2) == 3\n\n\n"
                           "def test_own():\n    raise KeyError('x')\n"}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_run_pytest_names_the_line_of_the_delivered_code_each_failure_was_raised_at(
    tmp_path: Path, mode: str
) -> None:
    # `where`: read from the product's own traceback, the workspace file and line, never a sandbox's path
    # (an assertion in the test, or an error the test raised itself, has none); `at`: the test's own line
    # where such a failure surfaced (for a call into the product, the test's line that made it: PSE's
    # proxy frames between them are hidden from pytest's traceback).
    out = call("run_pytest", context(_tree(tmp_path / "p", RAISING), mode))
    found = {t["test"]: (t.get("message"), t.get("where"), t.get("at")) for t in out.facts["tests"]}
    assert found == {
        "test_calc.py::test_add": (
            "NameError: name 'totl' is not defined",
            "pkg/calc.py:3",
            "test_calc.py:5",
        ),
        "test_calc.py::test_div": ("ZeroDivisionError: division by zero", "pkg/calc.py:7", "test_calc.py:9"),
        "test_calc.py::test_value": ("assert 2.0 == 3", None, "test_calc.py:13"),
        "test_calc.py::test_own": ("KeyError: 'x'", None, "test_calc.py:17"),
    }, out.output


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# Installed next to PSE (the dev extra): hypothesis's and anyio's plugins, pytest-asyncio.
_LOADED_PLUGINS = """import sys


def test_plugins():
    assert "_hypothesis_pytestplugin" not in sys.modules
    assert "anyio.pytest_plugin" not in sys.modules
"""
_ASYNC_TEST = "import pytest\n\n\n@pytest.mark.asyncio\nasync def test_async():\n    assert True\n"


@pytest.mark.parametrize("mode", MODES)
def test_run_pytest_loads_no_installed_plugin_the_task_did_not_name(tmp_path: Path, mode: str) -> None:
    # A plugin merely installed next to PSE (a rerun-on-failure one would turn a flaky failure into a
    # pass) never shapes a verdict: only the ones [verification] pytest_plugins names are loaded.
    bare = project(tmp_path / "bare", {"test_plugins.py": _LOADED_PLUGINS, "test_async.py": _ASYNC_TEST})
    out = call("run_pytest", context(bare, mode))
    assert {k: out.facts[k] for k in ("passed", "failed")} == {"passed": 1, "failed": 1}, out.output
    assert "async def functions are not natively supported" in out.output
    assert "[verification] pytest_plugins" in out.output  # the fix, named where the failure shows
    named = call("run_pytest", context(bare, mode, pytest_plugins=("asyncio",)))
    assert {k: named.facts[k] for k in ("passed", "failed")} == {"passed": 2, "failed": 0}, named.output
    assert "asyncio_default_fixture_loop_scope" not in named.output  # its deprecation notice is silenced
    assert "[note]" not in named.output


def test_a_task_naming_an_uninstalled_pytest_plugin_is_refused(tmp_path: Path) -> None:
    from pse.tools import pytest_plugin_missing

    assert not pytest_plugin_missing("asyncio")  # an entry-point name
    assert not pytest_plugin_missing("pytest_asyncio.plugin")  # a module
    assert pytest_plugin_missing("no_such_plugin_xyz")
    assert pytest_plugin_missing("no_such_package.plugin")


@pytest.mark.parametrize("mode", MODES)
def test_run_ruff_on_real_projects(tmp_path: Path, mode: str) -> None:
    good = project(tmp_path / "good", PASSING)
    out = call("run_ruff", context(good, mode))
    assert out.status == "ok" and _base(out.facts) == {
        "exit_code": 0,
        "findings": 0,
        "target": ".",
        "report": "json",
        "unproven": [],
    }
    assert out.facts["files"] == 2
    assert _result(out.output) == ["All checks passed! (2 file(s))", "[exit code 0]"]
    bad = project(tmp_path / "bad", FAILING)
    out = call("run_ruff", context(bad, mode))
    assert out.status == "error" and _base(out.facts) == {
        "exit_code": 1,
        "findings": 2,
        "finding_list": [
            'calc.py:1:1: I001 Import block is un-sorted or un-formatted (ruff\'s fix: line 1 becomes "import os\\n\\n\\n")',
            "calc.py:1:8: F401 `os` imported but unused (ruff's fix: delete line 1)",
        ],
        "target": ".",
        "report": "json",
        "unproven": [],
    }
    assert _result(out.output) == [
        'calc.py:1:1: I001 Import block is un-sorted or un-formatted (ruff\'s fix: line 1 becomes "import os\\n\\n\\n")',
        "calc.py:1:8: F401 `os` imported but unused (ruff's fix: delete line 1)",
        "Found 2 finding(s).",
        "[exit code 1]",
    ]


def test_a_ruff_finding_carries_ruffs_own_fix_as_lines_and_their_new_text(tmp_path: Path) -> None:
    """What a revise cycle's Specialist reads: a finding's name alone did not tell the 1.5B model what to
    change (it wrote the same file again); ruff's safe fix, quoted, does. Never applied by PSE."""
    files = {
        "test_q.py": "from q import q\nimport random\n\n\ndef test_q():\n    assert q(random.random())\n"
    }
    out = call("run_ruff", context(project(tmp_path / "p", files)))
    assert out.facts["finding_list"] == [
        "test_q.py:1:1: I001 Import block is un-sorted or un-formatted (ruff's fix: lines 1-4 become "
        '"import random\\n\\nfrom q import q\\n\\n\\n")'
    ]
    assert (tmp_path / "p" / "test_q.py").read_text() == files["test_q.py"]  # reported, not applied


def test_run_ruff_uses_the_configuration_only_the_task_declares(tmp_path: Path) -> None:
    files = {**FAILING, "ruff.toml": '[lint]\nselect = ["F"]\n'}
    undeclared = call("run_ruff", context(project(tmp_path / "a", files)))
    assert undeclared.facts["findings"] == 2  # a ruff.toml nobody declared changes nothing
    declared = call(
        "run_ruff", context(project(tmp_path / "b", files), check_config=frozenset({"ruff.toml"}))
    )
    assert declared.facts["findings"] == 1  # only F401: the task's own selection counts


def test_run_ruff_ignores_noqa_comments_unless_the_task_declares_its_configuration(tmp_path: Path) -> None:
    files = {"calc.py": "import os  # noqa: F401\n", "other.py": "# ruff: noqa\nimport sys\n"}
    out = call("run_ruff", context(project(tmp_path / "p", files)))
    assert out.status == "error" and out.facts["findings"] == 2


def test_durations_are_dropped_from_every_summary_shape() -> None:
    from pse.tools._pytest import _without_duration

    for line in ("7 tests collected in 0.01s", "no tests collected in 0.20s", "2 failed, 5 passed in 0.47s (0:00:00)",
                 "==== 1 test collected in 0.03s ===="):  # fmt: skip
        assert " in 0." not in _without_duration(f"head\n{line}\n"), line


def test_pytest_summary_parsing() -> None:
    assert parse_pytest_summary("x\n===== 3 failed, 10 passed, 1 skipped, 2 errors in 1.20s =====\n") == {
        "passed": 10, "failed": 3, "errors": 2, "skipped": 1,
    }  # fmt: skip
    assert parse_pytest_summary("1 error in 0.05s") == {"passed": 0, "failed": 0, "errors": 1, "skipped": 0}
    assert parse_pytest_summary("no tests ran in 0.01s")["passed"] == 0
    assert parse_pytest_summary("test said 5 passed yesterday") == {
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
    }


@pytest.mark.parametrize("mode", MODES)
def test_run_check_runs_declared_checks_read_only(ws: Path, tmp_path: Path, mode: str) -> None:
    task_dir = tmp_path / "task"
    (task_dir / "checks").mkdir(parents=True)
    (task_dir / "checks" / "validate.py").write_text(
        "import json, sys\ndata = json.load(open(sys.argv[1]))\n"
        "print('entries:', len(data))\nopen('tamper.txt', 'w')\n"
    )
    (ws / "evidence.json").write_text("[1, 2, 3]")
    checks = {"evidence": "python {task_dir}/checks/validate.py evidence.json", "lint": "true"}
    ctx = context(ws, mode, writable=True, checks=checks, task_dir=task_dir)
    out = call("run_check", ctx, name="evidence")
    assert _result(out.output)[0] == "entries: 3" and out.facts["check"] == "evidence"
    assert not (ws / "tamper.txt").exists()  # read-only even with a read-write context
    assert out.status == "error"  # the write itself fails: the check runs over a sealed snapshot
    with pytest.raises(ValueError, match="no check named 'nope'; the declared checks are: evidence, lint"):
        call("run_check", ctx, name="nope")


def test_read_file_gives_an_input_by_its_name_where_no_such_file_exists(ws: Path) -> None:
    """The 1.5B model read `PROBLEM` in every HumanEval run, then blocked on the missing file."""
    problem = 'def add(a, b):\n    """Sum, e.g. "1 + 2".\n    """\n'
    ctx = context(ws, inputs={"PROBLEM": problem})
    assert call("read_file", ctx, path="PROBLEM") == ToolOutcome(
        "ok", problem, {"bytes": len(problem.encode()), "input": "PROBLEM"}
    )
    assert call("read_file", ctx, path=" PROBLEM\n").output == problem
    (ws / "PROBLEM").write_text("a file the task seeded under that name wins\n")
    assert call("read_file", ctx, path="PROBLEM").output == "a file the task seeded under that name wins\n"
    # A file a role wrote under an input's name does not stand in for the input (a forged specification).
    forged = context(ws, inputs={"PROBLEM": problem}, author=lambda area, path: "Specialist")
    assert call("read_file", forged, path="PROBLEM").output == problem
    assert call("read_file", forged, path="./PROBLEM").output == problem
    with pytest.raises(ValueError, match="no file 'ENTRY_POINT' in the workspace"):
        call("read_file", ctx, path="ENTRY_POINT")  # not an input of this run
