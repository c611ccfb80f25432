"""`pse run TASK --repo PATH [--base REF]`: a worktree per run, the change committed on PASSED, the user's
repository untouched (issue 32). Every test makes a real repository and runs the real engine, pytest and
git, in the fallback sandbox (what a sandbox mode contains is tests/test_repository_security.py's)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from cli_support import pse
from pse.config import Settings
from pse.events import Event, OutcomeEvent
from pse.exceptions import UserError
from pse.runner import answer_run, prepare_resume, prepare_run, run_to_end
from pse.trace import prune_runs
from repo_support import (
    BUGGY,
    FAIL,
    FIXED,
    calls,
    git,
    make_repo,
    make_task,
    run,
    turns,
    user_state,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    make_task(tmp_path)
    return make_repo(tmp_path)


def _dirty(repo: Path) -> None:
    """Uncommitted work of every kind: a modified tracked file, a staged one, an untracked one, a stash."""
    (repo / "notes.txt").write_text("stash me\n")
    git(repo, "add", "notes.txt")
    git(repo, "stash", "push", "-q", "-m", "the person's stash")
    (repo / "calc" / "core.py").write_text(BUGGY + "# the person's edit\n")
    (repo / "README.md").write_text("staged\n")
    git(repo, "add", "README.md")
    (repo / "scratch.txt").write_text("untracked\n")


class TestPassedRun:
    def test_commits_one_change_on_its_branch_and_leaves_the_user_tree_untouched(
        self, tmp_path: Path, repo: Path
    ) -> None:
        _dirty(repo)
        before = user_state(repo)
        base = before["head"].strip()
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}))

        assert summary.outcome == "PASSED", summary.outcome_reason
        assert user_state(repo) == before
        assert summary.branch == f"pse/{summary.run_id}"
        assert git(repo, "rev-list", f"{base}..{summary.branch}").split() == [summary.commit]
        assert git(repo, "rev-parse", summary.branch).strip() == summary.commit
        assert git(repo, "show", f"{summary.commit}:calc/core.py") == FIXED  # not the person's dirty edit
        assert git(repo, "diff", "--name-only", base, summary.commit).split() == ["calc/core.py"]
        message = git(repo, "log", "-1", "--format=%an <%ae>%n%B", summary.commit)
        assert message.splitlines()[:2] == [
            "PSE <pse@localhost>",
            "Make calc.add return the sum of its arguments",
        ]
        assert "PSE-Run: " + summary.run_id in message and "PSE-Outcome: PASSED" in message
        assert "PSE-Criteria: AC1,AC2" in message
        patch = Path(summary.patch or "")
        assert patch == Path(trace["repository"]["patch"]) and patch.name == "change.patch"
        assert patch.parent == Path(summary.trace).parent
        assert patch.read_text() == git(repo, "format-patch", "-1", "--stdout", summary.commit)
        assert git(repo, "diff", base, summary.commit) in patch.read_text()
        assert (
            trace["repository"]["branch"] == summary.branch
            and trace["repository"]["commit"] == summary.commit
        )
        assert "uncommitted change" in (trace["repository"]["warning"] or "")
        # the run ended for good: its worktree is out of the repository (only the branch stays), its files
        # stay in the run folder, which holds no pointer back into the repository
        listing = git(repo, "worktree", "list", "--porcelain")
        assert summary.branch not in listing and "locked" not in listing
        workspace = Path(summary.trace).parent / "workspace"
        assert (workspace / "calc" / "core.py").read_text() == FIXED and not (workspace / ".git").exists()

    def test_the_checks_run_the_repositorys_tests_with_its_configuration(
        self, tmp_path: Path, repo: Path
    ) -> None:
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}))
        pytest_run = calls(trace, "run_pytest")[-1]
        assert pytest_run["status"] == "ok" and pytest_run["facts"]["passed"] == 2
        kinds = {f["path"]: (f["kind"], f["author"]) for f in pytest_run["facts"]["evidence"]["files"]}
        assert kinds["calc/core.py"] == ("output", "Specialist")
        assert kinds["tests/test_core.py"] == ("test", "task")
        assert kinds["pyproject.toml"] == ("config", "task")  # the repository's own, unchanged
        assert kinds["calc/__init__.py"] == ("input", "task")
        assert summary.outcome == "PASSED"

    def test_the_pytest_configuration_is_the_one_pytest_would_take(self, tmp_path: Path, repo: Path) -> None:
        # pyproject.toml without a pytest section (a packaging file) must not hide pytest.ini, which says
        # how the repository's tests are named: with the wrong file, no test is collected.
        (repo / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0"\n')
        (repo / "pytest.ini").write_text("[pytest]\npython_functions = check_*\n")
        (repo / "tests" / "test_core.py").write_text(
            "from calc import add\n\n\ndef check_add():\n    assert add(2, 3) == 5\n"
        )
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "pytest.ini")
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}))
        assert summary.outcome == "PASSED", summary.outcome_reason
        facts = calls(trace, "run_pytest")[-1]["facts"]
        assert facts["passed"] == 1 and "check_add" in json.dumps(facts["tests"])

    def test_a_base_ref_is_where_the_worktree_starts(self, tmp_path: Path, repo: Path) -> None:
        first = git(repo, "rev-parse", "HEAD").strip()
        git(repo, "tag", "v1")
        (repo / "calc" / "extra.py").write_text("X = 1\n")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "later")
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}), base="v1")
        assert summary.outcome == "PASSED"
        assert trace["repository"]["base_commit"] == first and trace["repository"]["base"] == "v1"
        assert git(repo, "rev-parse", f"{summary.commit}^").strip() == first
        assert "calc/extra.py" not in git(repo, "ls-tree", "-r", "--name-only", summary.commit)

    def test_json_summary_carries_branch_commit_and_patch(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv("PSE_SANDBOX", "fallback")  # as the other runs here: the sandbox is not under test
        cassette = tmp_path / "cli.json"
        cassette.write_text(json.dumps({"turns": turns({"calc/core.py": FIXED})}))
        code, out, _ = pse(
            monkeypatch, capsys, "run", "fix-repo", "--repo", str(repo), "--cassette", str(cassette),
            "--runs-dir", str(tmp_path / "runs"), "--tasks-dir", str(tmp_path / "tasks"), "--json",
        )  # fmt: skip
        summary = json.loads(out)
        assert code == 0 and summary["outcome"] == "PASSED"
        assert summary["branch"] == f"pse/{summary['run_id']}"
        assert summary["commit"] == git(repo, "rev-parse", summary["branch"]).strip()
        assert Path(summary["patch"]).read_text().startswith(f"From {summary['commit']} ")

    def test_the_outcome_is_announced_after_the_commit(self, tmp_path: Path, repo: Path) -> None:
        """Whoever hears the `outcome` event (the dashboard, the CLI's live view) finds the branch moved,
        and the commit and patch in the run's trace: git's work is done before the announcement."""
        cassette = tmp_path / "heard.json"
        cassette.write_text(json.dumps({"turns": turns({"calc/core.py": FIXED})}))
        settings = Settings(
            provider="scripted", cassette=cassette, runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks",
            sandbox="fallback", replay_strict=False,
        )  # type: ignore[arg-type]  # fmt: skip
        heard: list[tuple[str, str | None, str | None, str]] = []

        def on_event(event: Event) -> None:
            if isinstance(event, OutcomeEvent):
                record = prepared.engine.trace.repository
                assert record is not None
                branch_at = git(repo, "rev-parse", record.branch).strip()
                heard.append((event.outcome, record.commit, record.patch, branch_at))

        prepared = prepare_run("fix-repo", settings, repo=repo, on_event=on_event)
        summary = asyncio.run(run_to_end(prepared))
        assert summary.outcome == "PASSED" and summary.commit is not None
        assert heard == [("PASSED", summary.commit, summary.patch, summary.commit)]
        on_disk = json.loads(Path(summary.trace).read_text())["repository"]
        assert (on_disk["commit"], on_disk["patch"]) == (summary.commit, summary.patch)


class TestOtherOutcomes:
    def test_commits_nothing_and_keeps_the_diff_so_far(self, tmp_path: Path, repo: Path) -> None:
        base = git(repo, "rev-parse", "HEAD").strip()
        half = BUGGY.replace("a - b", "a - b  # TODO")
        summary, trace = run(tmp_path, repo, turns({"calc/core.py": half}, FAIL))
        assert summary.outcome == "ESCALATED"
        assert summary.commit is None and trace["repository"]["commit"] is None
        assert git(repo, "rev-parse", summary.branch or "").strip() == base  # the branch did not move
        patch = Path(summary.patch or "").read_text()
        assert "+    return a - b  # TODO" in patch and patch.startswith("diff --git a/calc/core.py")
        note = trace["repository"]["note"]
        assert note.startswith("ESCALATED: nothing committed") and "change.patch" in note
        assert "nothing committed" in (Path(summary.trace).parent / "escalation.md").read_text()

    def test_a_pass_with_no_change_commits_nothing(self, tmp_path: Path, repo: Path) -> None:
        (repo / "calc" / "core.py").write_text(FIXED)
        git(repo, "commit", "-q", "-am", "fixed by hand")
        summary, trace = run(tmp_path, repo, turns({}))
        assert summary.outcome == "PASSED"
        assert summary.commit is None and summary.patch is None
        assert (
            trace["repository"]["note"]
            == "PASSED: no file changed; nothing of the run is left in your repository"
        )
        assert "pse/" not in git(repo, "branch") + git(repo, "worktree", "list")


class TestBadInputs:
    """Each wrong repository input is one line naming what was wrong and the fix; nothing is left behind."""

    def _error(self, tmp_path: Path, repo: Path, base: str | None = None) -> str:
        settings = Settings(provider="scripted", runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks")
        with pytest.raises(UserError) as raised:
            prepare_run("fix-repo", settings, repo=repo, base=base)
        message = str(raised.value)
        assert "\n" not in message and "fix:" in message
        assert not list((tmp_path / "runs").glob("*/workspace"))  # no run folder left
        return message

    def test_missing_folder(self, tmp_path: Path, repo: Path) -> None:
        assert "no such folder" in self._error(tmp_path, tmp_path / "nowhere")

    def test_not_a_repository(self, tmp_path: Path, repo: Path) -> None:
        (tmp_path / "plain").mkdir()
        assert "is not a git repository" in self._error(tmp_path, tmp_path / "plain")

    def test_a_file(self, tmp_path: Path, repo: Path) -> None:
        assert "is a file, not a folder" in self._error(tmp_path, repo / "pyproject.toml")

    def test_bad_ref(self, tmp_path: Path, repo: Path) -> None:
        message = self._error(tmp_path, repo, base="no-such-branch")
        assert (
            message.startswith("--base no-such-branch: no such commit")
            and git(repo, "branch").count("pse/") == 0
        )

    def test_a_ref_that_looks_like_an_option(self, tmp_path: Path, repo: Path) -> None:
        assert "is not a ref" in self._error(tmp_path, repo, base="--output=/tmp/x")

    def test_a_repository_without_commits(self, tmp_path: Path, repo: Path) -> None:
        git(tmp_path, "init", "-q", str(tmp_path / "empty"))
        assert "has no commit yet" in self._error(tmp_path, tmp_path / "empty")

    def test_a_runs_folder_inside_the_repository(self, tmp_path: Path, repo: Path) -> None:
        settings = Settings(provider="scripted", runs_dir=repo / "runs", tasks_dir=tmp_path / "tasks")
        with pytest.raises(UserError, match=r"is inside the repository's working tree.*fix: pass --runs-dir"):
            prepare_run("fix-repo", settings, repo=repo)
        assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
        assert "pse/" not in git(repo, "branch")

    def test_base_without_repo(self, tmp_path: Path, repo: Path) -> None:
        settings = Settings(provider="scripted", runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks")
        with pytest.raises(UserError, match="needs --repo PATH; fix:"):
            prepare_run("fix-repo", settings, base="main")

    def test_the_cli_prints_one_line_and_exits_2(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = pse(
            monkeypatch, capsys, "run", "fix-repo", "--repo", str(tmp_path / "nowhere"),
            "--runs-dir", str(tmp_path / "runs"), "--tasks-dir", str(tmp_path / "tasks"),
        )  # fmt: skip
        assert code == 2
        assert "no such folder; fix:" in " ".join(err.split())


class TestCleaning:
    def test_pruning_a_run_removes_its_worktree_and_an_unused_branch(
        self, tmp_path: Path, repo: Path
    ) -> None:
        passed, _ = run(tmp_path, repo, turns({"calc/core.py": FIXED}))
        failed, _ = run(tmp_path, repo, turns({"calc/core.py": BUGGY + "#\n"}, FAIL))
        assert git(repo, "worktree", "list").count("pse/") == 1  # the ESCALATED run's: it can go on
        old = 1_000_000_000
        for summary in (passed, failed):
            os.utime(summary.trace, (old, old))
        assert sorted(prune_runs(tmp_path / "runs", 7)) == sorted([passed.run_id, failed.run_id])
        assert "pse/" not in git(repo, "worktree", "list")
        branches = git(repo, "branch", "--format=%(refname:short)").split()
        assert passed.branch in branches  # it holds the run's commit: the product stays
        assert failed.branch not in branches  # it never moved from the base
        assert git(repo, "status", "--porcelain") == ""

    def test_pse_clean_all_removes_worktrees(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        summary, _ = run(tmp_path, repo, turns({"calc/core.py": FIXED}))
        code, out, _ = pse(monkeypatch, capsys, "clean", "--all", "--runs-dir", str(tmp_path / "runs"))
        assert code == 0 and "removed 1 run(s)" in out
        assert "pse/" not in git(repo, "worktree", "list")
        assert not Path(summary.trace).parent.exists()


class TestResumed:
    def test_an_escalated_run_taken_on_by_a_person_commits_when_it_passes(
        self, tmp_path: Path, repo: Path
    ) -> None:
        base = git(repo, "rev-parse", "HEAD").strip()
        second = turns({"calc/core.py": FIXED})[1:]  # the revision: no new plan
        summary, _ = run(tmp_path, repo, turns({"calc/core.py": BUGGY + "# tried\n"}, FAIL) + second)
        assert summary.outcome == "ESCALATED" and summary.commit is None
        settings = Settings(provider="scripted", runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks",
                            sandbox="fallback", replay_strict=False)  # fmt: skip
        answer_run(summary.run_id, settings, note="add, not subtract", retries=1)
        resumed = asyncio.run(run_to_end(prepare_resume(summary.run_id, settings)))
        assert resumed.outcome == "PASSED", resumed.outcome_reason
        assert resumed.branch == summary.branch and resumed.commit is not None
        assert git(repo, "rev-list", f"{base}..{resumed.branch}").split() == [resumed.commit]
        assert git(repo, "show", f"{resumed.commit}:calc/core.py") == FIXED
        assert Path(resumed.patch or "").read_text().startswith(f"From {resumed.commit} ")


class TestBatch:
    def test_two_rows_on_one_repository_get_two_worktrees_and_two_branches(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        cassette = tmp_path / "batch.json"
        cassette.write_text(json.dumps({"turns": turns({"calc/core.py": FIXED})}))
        for name, value in (("PSE_SANDBOX", "fallback"), ("PSE_CASSETTE", str(cassette)),
                            ("PSE_REPLAY_STRICT", "false"), ("PSE_PROVIDER", "scripted")):  # fmt: skip
            monkeypatch.setenv(name, value)
        rows = tmp_path / "rows.jsonl"
        rows.write_text("{}\n{}\n")
        before = user_state(repo)
        code, out, _ = pse(
            monkeypatch, capsys, "batch", "fix-repo", "--inputs", str(rows), "--repo", str(repo),
            "--runs-dir", str(tmp_path / "runs"), "--tasks-dir", str(tmp_path / "tasks"), "--json",
        )  # fmt: skip
        summary = json.loads(out)
        assert code == 0 and summary["done"] == 2
        runs = {r["run_id"]: r["branch"] for r in summary["runs"]}
        assert len(runs) == 2 and summary["branches"] == [f"pse/{run_id}" for run_id in runs]
        assert "pse/" not in git(repo, "worktree", "list")  # both PASSED: their branches are what stays
        for run_id, branch in runs.items():
            workspace = tmp_path / "runs" / run_id / "workspace"
            assert (workspace / "calc" / "core.py").read_text() == FIXED
            assert git(repo, "show", f"{branch}:calc/core.py") == FIXED
        assert len({git(repo, "rev-parse", b) for b in runs.values()}) == 2  # a commit each
        assert user_state(repo) == before
