"""A repository run attacked (issue 32): each test is a Specialist that wants a PASS, or a say in what PSE
commits, without doing the work. The repository's tests are evidence and read-only to it, in both sandbox
modes; git is PSE's alone, and nothing the workspace holds steers the commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.protocol import render_tool_calls
from pse.sandbox import bwrap_problem
from pse.tools import PROTECTED_BY_DEFAULT, RepositoryFiles
from repo_support import BUGGY, CHEAT, FIXED, TESTS, calls, git, make_repo, make_task, run, turns, user_state

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"no bwrap: {BWRAP_MISSING}")
    ),
    "fallback",
]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _denied(trace: dict[str, object], path: str) -> dict[str, object]:
    found = [c for c in calls(trace, "write_file") if c["arguments"]["path"] == path]  # type: ignore[arg-type]
    assert found, f"no write_file of {path}"
    return found[-1]


class TestTheTestsAreEvidence:
    def test_a_specialist_cannot_rewrite_a_repository_test(self, tmp_path: Path, mode: str) -> None:
        make_task(tmp_path)
        repo = make_repo(tmp_path)
        summary, trace = run(tmp_path, repo, turns({"tests/test_core.py": CHEAT}), sandbox=mode)

        call = _denied(trace, "tests/test_core.py")
        assert call["status"] == "denied" and call["rule"] == "protect.tests"
        assert "protected by 'test_*.py'" in str(call["output"])
        assert summary.outcome != "PASSED" and summary.commit is None
        workspace = Path(summary.trace).parent / "workspace"
        assert (workspace / "tests" / "test_core.py").read_text() == TESTS
        assert git(repo, "rev-parse", summary.branch or "") == git(repo, "rev-parse", "HEAD")

    def test_nor_the_repositorys_test_configuration(self, tmp_path: Path, mode: str) -> None:
        make_task(tmp_path)
        repo = make_repo(tmp_path)
        writes = {
            "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-k nothing'\n",
            "calc/core.py": BUGGY,
        }
        summary, trace = run(tmp_path, repo, turns(writes), sandbox=mode)
        assert _denied(trace, "pyproject.toml")["rule"] == "protect.tests"
        assert summary.outcome != "PASSED"

    def test_a_command_cannot_change_a_test_or_reach_git(self, tmp_path: Path, mode: str) -> None:
        make_task(tmp_path, '\n[policy.Specialist]\nbash = "read-write"\n')
        repo = make_repo(tmp_path)
        command = (
            "printf 'def test_add():\\n    assert True\\n' > tests/test_core.py; "
            "mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-commit; "
            "printf 'def add(a, b):\\n    return a + b\\n' > calc/core.py; "
            "git rev-parse --absolute-git-dir 2>&1; true"
        )
        script = turns(
            {}, extra=[{"role": "Specialist", "content": render_tool_calls([("bash", {"command": command})])}]
        )
        summary, trace = run(tmp_path, repo, script, sandbox=mode)

        bash = calls(trace, "bash")[-1]
        assert "not a git repository" in str(bash["output"])  # the workspace leads nowhere
        refused = {r["path"]: r["reason"] for r in bash["facts"]["refused"]}
        assert refused["tests/test_core.py"].startswith("it is one of the repository's tests")
        assert "(policy: protect.tests)" in refused["tests/test_core.py"]
        assert any(
            path.startswith(".git") and "(policy: protect.vcs)" in why for path, why in refused.items()
        )
        assert bash["facts"]["wrote"] == ["calc/core.py"]
        workspace = Path(summary.trace).parent / "workspace"
        assert (workspace / "tests" / "test_core.py").read_text() == TESTS
        assert not (workspace / ".git").exists()

    def test_a_task_may_open_its_tests_on_purpose(self, tmp_path: Path) -> None:
        make_task(
            tmp_path, '\n[repository]\nprotected = ["pyproject.toml"]\nauthor = "Ada <ada@example.org>"\n'
        )
        repo = make_repo(tmp_path)
        stronger = TESTS + "\n\ndef test_negative():\n    assert add(-1, -2) == -3\n"
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED, "tests/test_core.py": stronger}))
        assert summary.outcome == "PASSED", summary.outcome_reason
        assert git(repo, "show", f"{summary.commit}:tests/test_core.py") == stronger
        assert git(repo, "log", "-1", "--format=%an <%ae>", summary.commit).strip() == "Ada <ada@example.org>"
        checked = calls(trace, "run_pytest")[-1]
        assert checked["facts"]["passed"] == 3
        told = checked["output"].split("[evidence] the repository's tests changed by a role", 1)[1]
        assert told.startswith(" (the task lets roles change them): tests/test_core.py (Specialist)")
        assert "+++ b/tests/test_core.py" in told and "+def test_negative():" in told


class TestTheCommitIsPSEs:
    def test_workspace_content_cannot_steer_the_commit(self, tmp_path: Path) -> None:
        """Attributes naming a filter the person configured, a `.git` pointer elsewhere, hooks of every
        kind in the person's repository, a symlink out of the workspace: the commit holds exactly the
        bytes the Specialist wrote through the ToolAgent, no hook runs, nothing is read through a link."""
        make_task(tmp_path, '\n[policy.Specialist]\nbash = "read-write"\n')
        repo = make_repo(tmp_path)
        marker = tmp_path / "hook-ran"
        git(repo, "config", "filter.upper.clean", "tr a-z A-Z")
        for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "commit-msg"):
            script = repo / ".git" / "hooks" / hook
            script.write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
            script.chmod(0o755)
        elsewhere = tmp_path / "elsewhere"
        git(tmp_path, "init", "-q", str(elsewhere))
        before = user_state(repo)
        writes = {
            "calc/core.py": FIXED,
            ".gitattributes": "*.py filter=upper\n",
            ".git": f"gitdir: {elsewhere / '.git'}\n",
        }
        link = [
            {
                "role": "Specialist",
                "content": render_tool_calls([("bash", {"command": "ln -s /etc/passwd calc/leak.py"})]),
            }
        ]
        summary, trace = run(tmp_path, repo, turns(writes, extra=link))

        assert summary.outcome == "PASSED", summary.outcome_reason
        assert _denied(trace, ".git")["rule"] == "protect.vcs"
        assert git(repo, "show", f"{summary.commit}:calc/core.py") == FIXED  # no clean filter ran
        committed = git(repo, "ls-tree", "-r", "--name-only", summary.commit).split()
        assert "calc/leak.py" not in committed and ".git" not in committed
        # no check saw the link or the attributes file: they left the workspace when the run ended
        left = {f["path"] for f in trace["delivery"]["left_out"]}
        assert {"calc/leak.py", ".gitattributes"} <= left and ".gitattributes" not in committed
        assert not marker.exists(), marker.read_text() if marker.exists() else ""
        assert git(elsewhere, "rev-parse", "--all") == ""  # the pointer led PSE nowhere
        assert user_state(repo) == before


class TestTheManifestOfARepository:
    def test_default_globs_protect_what_pytest_would_discover(self) -> None:
        files = RepositoryFiles.of(
            ["src/app.py", "tests/data/expected.json", "pkg/test_x.py", "x_test.py", "pkg/conftest.py",
             "setup.cfg", "pyproject.toml", "docs/testing.md", "tests.py"],
            PROTECTED_BY_DEFAULT,
        )  # fmt: skip
        assert sorted(files.protected) == [
            "pkg/conftest.py", "pkg/test_x.py", "pyproject.toml", "setup.cfg", "tests/data/expected.json",
            "x_test.py",
        ]  # fmt: skip
        assert files.protected["tests/data/expected.json"] == "tests/*"
        assert files.protected["pkg/test_x.py"] == "test_*.py"
